//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/*`) through the targets'
//! bodies on stable, so that every input a fuzzer kept, and every crash it once found,
//! stays a regression test without cargo-fuzz or nightly.

use std::path::PathBuf;

fn replay(target: &str) {
    let body = fuzzing::target(target).unwrap_or_else(|| panic!("no target {target}"));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    entries.sort();
    assert!(!entries.is_empty(), "empty corpus {}", dir.display());
    for path in entries {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let r = std::panic::catch_unwind(|| body(&data));
        if let Err(p) = r {
            eprintln!("corpus input {} fails", path.display());
            std::panic::resume_unwind(p);
        }
    }
}

#[test]
fn frame_corpus() {
    replay("frame");
}

#[test]
fn query_corpus() {
    replay("query");
}

#[test]
fn json_corpus() {
    replay("json");
}

#[test]
fn keys_corpus() {
    replay("keys");
}

#[test]
fn eval_corpus() {
    replay("eval");
}

/// The two layouts answer a few hand-written queries, and answer them alike.
#[test]
fn eval_world_answers() {
    use serde_json::json;
    let count = json!([43, [[15, ["t"]]]]);
    assert_eq!(fuzzing::eval::run("dba", &count).as_deref(), Some("40"));
    assert_eq!(fuzzing::eval::run("dbb", &count).as_deref(), Some("40"));
    let shards = json!([43, [[170, [[174, [[15, ["t"]]]], "shards"]]]]);
    assert_eq!(fuzzing::eval::run("dba", &shards).as_deref(), Some("1"));
    let want = fuzzing::eval::SHARDS.to_string();
    assert_eq!(fuzzing::eval::run("dbb", &shards), Some(want));
    for q in [
        json!([41, [[15, ["t"]]], {"index": "id"}]),
        json!([150, [[43, [[144, [[15, ["t"]], "g"]]]]]]),
        json!([182, [[15, ["t"]], 3, "k37"]]),
        json!([145, [[15, ["t"]], "n"]]),
    ] {
        fuzzing::eval::compare(&q);
    }
}
