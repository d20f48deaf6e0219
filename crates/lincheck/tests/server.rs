//! The recorder against a real (in-process, single) Ponder server: the history it records
//! must check as linearizable with no acknowledged write lost, and must exercise every
//! kind of answer (reads of written values, applied and refused cas, final reads).

use std::sync::Arc;
use std::time::Duration;

use lincheck::record::Recorder;
use lincheck::run::{run, RunOptions};
use lincheck::{check_history, read_jsonl, Budget, Completion, EventType, Func, Verdict};
use server::{Config, Server};
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_history_against_one_server_is_linearizable() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut config = Config::new(dir.path());
    config.eval_threads = 2;
    config.cache_size_mb = 16;
    config.log_file = Some(dir.path().join("log"));
    let server = tokio::time::timeout(Duration::from_secs(30), Server::start(listener, config))
        .await
        .expect("start timed out")
        .unwrap();
    let port = server.local_addr().port();
    let path = dir.path().join("history.jsonl");
    let rec = Arc::new(Recorder::create(&path).unwrap());
    let opts = RunOptions {
        addrs: vec![("127.0.0.1".into(), port)],
        clients: 4,
        keys: 3,
        ops: 400,
        duration: Duration::from_secs(60),
        op_timeout: Duration::from_secs(20),
        seed: 42,
        ..RunOptions::default()
    };
    let counts = tokio::time::timeout(Duration::from_secs(120), run(opts.clone(), rec))
        .await
        .expect("run timed out")
        .unwrap();
    assert_eq!(counts.invoke, 403, "400 operations and 3 final reads");
    assert_eq!(counts.ok, 403, "{counts:?}");

    let file = std::fs::File::open(&path).unwrap();
    let events = read_jsonl(std::io::BufReader::new(file)).unwrap();
    let report = check_history(&events, &Budget::default()).unwrap();
    assert_eq!(report.keys.len(), 3);
    assert!(
        report
            .keys
            .iter()
            .all(|k| k.verdict == Verdict::Linearizable),
        "{}",
        report.render()
    );
    assert!(report.lost.findings.is_empty(), "{}", report.render());
    assert_eq!(report.lost.keys_checked, 3);
    assert_eq!(report.exit_code(), 0);

    let ops = lincheck::pair(&events).unwrap();
    let has = |pred: &dyn Fn(&lincheck::Operation) -> bool| ops.iter().any(pred);
    assert!(has(
        &|o| matches!(&o.completion, Completion::Read(v) if v.is_i64())
    ));
    assert!(has(&|o| o.completion == Completion::Cas(true)));
    assert!(has(&|o| o.completion == Completion::Cas(false)));
    assert!(events
        .iter()
        .any(|e| e.final_read && e.kind == EventType::Ok && e.f == Func::Read));

    // A second run on the same table with `fresh_table` starts from empty keys again.
    let rec = Arc::new(Recorder::create(&path).unwrap());
    let again = RunOptions { ops: 50, ..opts };
    run(again, rec).await.unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let events = read_jsonl(std::io::BufReader::new(file)).unwrap();
    assert_eq!(
        check_history(&events, &Budget::default())
            .unwrap()
            .exit_code(),
        0
    );

    server.shutdown().await.unwrap();
}
