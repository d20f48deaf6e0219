//! Prints the query the `eval` target builds from each file named on the command line,
//! and both layouts' outcomes: `cargo run --release -p fuzzing --example eval_show -- FILE...`.

fn main() {
    for path in std::env::args().skip(1) {
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let parsed = if path.ends_with(".json") {
            serde_json::from_slice(&data).ok()
        } else {
            fuzzing::eval::query(&data)
        };
        let Some(term) = parsed else {
            println!("{path}: no query");
            continue;
        };
        println!("{path}: {term}");
        let repeat: usize = std::env::var("REPEAT")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(1);
        for _ in 1..repeat {
            fuzzing::eval::compare(&term);
        }
        if repeat > 1 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let rss = status
                .lines()
                .find(|l| l.starts_with("VmHWM"))
                .unwrap_or("");
            println!("  after {repeat} runs: {rss}");
        }
        for db in ["dba", "dbb"] {
            let t = std::time::Instant::now();
            let out = fuzzing::eval::run(db, &term);
            let mut s = format!("{out:?}");
            s.truncate(400);
            println!("  {db} ({:?}): {s}", t.elapsed());
        }
    }
}
