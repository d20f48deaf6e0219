//! Two servers in one process: each has its own storage, catalog and document-cache
//! budget, and each shuts down cleanly (connections closed, storage flushed and closed)
//! while the other keeps serving.

use std::path::Path;
use std::time::Duration;

use client::{term, Connection};
use serde_json::{json, Map, Value};
use server::{Config, Server};
use tokio::net::TcpListener;

/// Bounds every step, so a hang fails the test instead of stalling it.
const STEP: Duration = Duration::from_secs(20);

async fn start(dir: &Path, name: &str, cache_size_mb: u64) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut config = Config::new(dir);
    config.server_name = name.into();
    config.cache_size_mb = cache_size_mb;
    config.eval_threads = 2;
    config.log_file = Some(dir.join("log"));
    tokio::time::timeout(STEP, Server::start(listener, config))
        .await
        .expect("start timed out")
        .unwrap()
}

async fn connect(s: &Server) -> Connection {
    Connection::connect("127.0.0.1", s.local_addr().port())
        .await
        .unwrap()
}

async fn run(c: &Connection, t: Value) -> Result<Value, client::Error> {
    tokio::time::timeout(STEP, c.run(t, Value::Null))
        .await
        .expect("query timed out")
}

/// Threads of this process whose name starts with `prefix` (Linux; None elsewhere).
fn threads_named(prefix: &str) -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with(prefix))
            .count(),
    )
}

async fn tables(c: &Connection) -> Value {
    run(c, term::table_list("test")).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_in_one_process() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start(dir_a.path(), "alpha", 8).await;
    let b = start(dir_b.path(), "beta", 2).await;
    assert_ne!(a.local_addr(), b.local_addr());

    // Each budget is half its server's cache size, and nothing is held yet.
    assert_eq!(a.doc_cache().limit(), 4 << 20);
    assert_eq!(b.doc_cache().limit(), 1 << 20);
    assert_eq!((a.doc_cache().used(), b.doc_cache().used()), (0, 0));

    let (ca, cb) = (connect(&a).await, connect(&b).await);
    assert_eq!(ca.server_info().await.unwrap()["name"], json!("alpha"));
    assert_eq!(cb.server_info().await.unwrap()["name"], json!("beta"));

    // A table created on one server does not exist on the other.
    run(&ca, term::table_create("test", "t")).await.unwrap();
    assert_eq!(tables(&ca).await, json!(["t"]));
    assert_eq!(tables(&cb).await, json!([]));
    let missing = run(&cb, term::get(term::table("test", "t"), &json!(1))).await;
    assert!(
        matches!(&missing, Err(client::Error::Reql(e)) if e.message.contains("does not exist")),
        "{missing:?}"
    );

    // A write and a read on A fill A's document cache only.
    let doc = json!({"id": 1, "v": "on alpha"});
    let inserted = run(
        &ca,
        term::insert(term::table("test", "t"), &doc, Map::new()),
    )
    .await
    .unwrap();
    assert_eq!(inserted["inserted"], json!(1));
    let got = run(&ca, term::get(term::table("test", "t"), &json!(1)))
        .await
        .unwrap();
    assert_eq!(got, doc);
    let used_a = a.doc_cache().used();
    assert!(used_a > 0, "A's cache holds the document");
    assert_eq!(b.doc_cache().used(), 0, "B's cache is not A's");

    // B with a table and a document of its own: its cache fills, A's does not move.
    run(&cb, term::table_create("test", "u")).await.unwrap();
    let doc_b = json!({"id": "x", "v": "on beta"});
    run(
        &cb,
        term::insert(term::table("test", "u"), &doc_b, Map::new()),
    )
    .await
    .unwrap();
    // A read caches it (an insert leaves the key to its first read: store::shard).
    run(&cb, term::get(term::table("test", "u"), &json!("x")))
        .await
        .unwrap();
    assert!(b.doc_cache().used() > 0);
    assert_eq!(a.doc_cache().used(), used_a);
    assert_eq!(tables(&ca).await, json!(["t"]));
    assert_eq!(tables(&cb).await, json!(["u"]));

    // Changing one budget leaves the other alone.
    b.doc_cache().set_limit(0);
    assert_eq!(a.doc_cache().limit(), 4 << 20);

    // Shutting A down (with a client still connected) closes its connection and
    // leaves B serving.
    tokio::time::timeout(STEP, a.shutdown())
        .await
        .expect("shutdown timed out")
        .unwrap();
    assert!(run(&ca, term::table_list("test")).await.is_err());
    assert_eq!(
        run(&cb, term::get(term::table("test", "u"), &json!("x")))
            .await
            .unwrap(),
        doc_b
    );
    tokio::time::timeout(STEP, b.shutdown())
        .await
        .expect("shutdown timed out")
        .unwrap();

    // A's storage was flushed and closed: a new server on its directory has the data.
    let log = std::fs::read_to_string(dir_a.path().join("log")).unwrap();
    assert!(log.contains("listening for client driver connections on 127.0.0.1:"));
    assert!(log.contains("Shutting down: flushing storage."));
    let a2 = start(dir_a.path(), "alpha", 8).await;
    let ca2 = connect(&a2).await;
    assert_eq!(tables(&ca2).await, json!(["t"]));
    assert_eq!(
        run(&ca2, term::get(term::table("test", "t"), &json!(1)))
            .await
            .unwrap(),
        doc
    );
    assert!(threads_named("eval-").is_none_or(|n| n > 0));
    tokio::time::timeout(STEP, a2.shutdown())
        .await
        .expect("shutdown timed out")
        .unwrap();

    // Nothing of the three servers is left running: evaluation pools and flush
    // threads exit once their server is shut down.
    let deadline = std::time::Instant::now() + STEP;
    for prefix in ["eval-", "group-commit"] {
        while threads_named(prefix).is_some_and(|n| n > 0) {
            assert!(
                std::time::Instant::now() < deadline,
                "{prefix} threads still running"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
