//! `ponder-lincheck check`: the verdict printed per key and the exit status (0 clean,
//! 1 violation, 2 unreadable history, 3 unknown).

mod common;

use std::path::Path;
use std::process::Command;

use common::H;
use serde_json::json;

fn write(h: &H, path: &Path) {
    let lines: Vec<String> = h
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn check(path: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ponder-lincheck"))
        .arg("check")
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn exit_status_follows_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    let mut h = H::default();
    h.write(1, "a", 0, 10, json!(1))
        .read(2, "a", 5, 6, json!(1))
        .final_read(3, "a", 20, 21, json!(1));
    write(&h, &good);
    let (code, text) = check(&good, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("key \"a\": linearizable"), "{text}");
    assert!(text.contains("OK"), "{text}");

    let bad = dir.path().join("bad.jsonl");
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1)).read(2, "a", 2, 3, json!(2));
    write(&h, &bad);
    let (code, text) = check(&bad, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("NOT LINEARIZABLE"), "{text}");

    let hard = dir.path().join("hard.jsonl");
    let mut h = H::default();
    for i in 0..30 {
        h.write(i, "a", i, 1000 + i, json!(i));
    }
    h.read(30, "a", 2000, 2001, json!(0))
        .read(30, "a", 2002, 2003, json!(-1));
    write(&h, &hard);
    let (code, text) = check(&hard, &["--max-steps", "10000"]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("UNKNOWN"), "{text}");

    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "{\"process\": 1}\n").unwrap();
    let (code, text) = check(&garbage, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("line 1"), "{text}");
}
