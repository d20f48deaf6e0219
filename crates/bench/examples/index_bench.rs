//! Secondary-index benchmark (issue 4): loads N documents, times an index build on the
//! populated table, then measures at 16 concurrent clients: `between` on an index
//! returning 1,000 documents, `order_by(index=).limit(10)`, `get_all` on an index
//! against `get` by primary key, and `count()` of an indexed range of 100,000 entries.
//!
//! `cargo run --release -p bench --example index_bench -- PORT [DOCS] [keep|reuse]`

use std::time::{Duration, Instant};

use client::Connection;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

const CLIENTS: usize = 16;

fn table() -> Value {
    json!([15, [[14, ["test"]], "idxbench"]])
}

async fn run(c: &Connection, t: Value) -> Value {
    match c.run(t.clone(), json!({})).await {
        Ok(v) => v,
        Err(e) => panic!("query {t} failed: {e:?}"),
    }
}

/// Runs `per_client` queries from each of 16 connections, checking the row count when
/// `want` is given; returns (p50, p99, max) ms and queries per second.
async fn latency(
    port: u16,
    per_client: usize,
    want: Option<usize>,
    make: fn(u64) -> Value,
) -> (f64, f64, f64, f64) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let conn = Connection::connect("127.0.0.1", port)
                .await
                .expect("connect");
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            for i in 0..per_client {
                let q = make((c * 7919 + i * 104_729) as u64);
                let t0 = Instant::now();
                let rows = conn.run_all(q, json!({})).await.expect("query");
                if let Some(w) = want {
                    assert_eq!(rows.len(), w, "wrong number of rows");
                }
                h.record(t0.elapsed().as_micros() as u64).expect("record");
            }
            h
        }));
    }
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    for t in tasks {
        all.add(t.await.expect("task")).expect("merge");
    }
    let qps = (CLIENTS * per_client) as f64 / start.elapsed().as_secs_f64();
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    (ms(0.5), ms(0.99), all.max() as f64 / 1000.0, qps)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(28015);
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    // `keep`: leave the table for later runs; `reuse`: query the table a `keep` run left.
    let mode = args.get(3).map(String::as_str).unwrap_or("");
    let reuse = mode == "reuse";
    let c = Connection::connect("127.0.0.1", port)
        .await
        .expect("connect");
    if !reuse {
        load(&c, n).await;
    }
    queries(port, &c).await;
    if mode.is_empty() {
        let _ = c
            .run(json!([61, [[14, ["test"]], "idxbench"]]), json!({}))
            .await;
    }
}

/// Creates the table, loads `n` documents and times building index `r` on them.
async fn load(c: &Connection, n: u64) {
    let _ = c
        .run(json!([61, [[14, ["test"]], "idxbench"]]), json!({}))
        .await;
    run(c, json!([60, [[14, ["test"]], "idxbench"]])).await;
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        let docs: Vec<Value> = (i..(i + 2000).min(n))
            .map(|k| json!({"id": k, "r": scramble(k, n), "v": k % 200, "pad": "x".repeat(100)}))
            .collect();
        run(
            &c,
            json!([56, [table(), [2, docs]], {"durability": "soft"}]),
        )
        .await;
        i += 2000;
    }
    println!("loaded {n} docs in {:.1}s", t0.elapsed().as_secs_f64());

    let t0 = Instant::now();
    run(c, json!([75, [table(), "r"]])).await;
    loop {
        let st = run(c, json!([139, [table(), "r"]])).await;
        if st.pointer("/0/ready") == Some(&json!(true)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "index build on {n} docs: {secs:.2}s = {:.0} docs/s",
        n as f64 / secs
    );
    run(c, json!([75, [table(), "v"]])).await;
    run(c, json!([140, [table()]])).await;
}

/// The latency measurements at 16 clients.
async fn queries(port: u16, c: &Connection) {

    let report = |name: &str, r: (f64, f64, f64, f64)| {
        println!(
            "{name:<44} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  {:>8.0} q/s",
            r.0, r.1, r.2, r.3
        )
    };
    // between on index `r` returning 1,000 documents.
    report(
        "between(index=r) 1,000 docs",
        latency(port, between_rounds(), Some(1000), |x| {
            let lo = x % 199_000;
            json!([182, [table(), lo, lo + 1000], {"index": "r"}])
        })
        .await,
    );
    report(
        "order_by(index=r).limit(10)",
        latency(
            port,
            200,
            Some(10),
            |_| json!([71, [[41, [table()], {"index": "r"}], 10]]),
        )
        .await,
    );
    report(
        "order_by(index=desc(r)).limit(10)",
        latency(
            port,
            200,
            Some(10),
            |_| json!([71, [[41, [table()], {"index": [74, ["r"]]}], 10]]),
        )
        .await,
    );
    report(
        "get_all(k, index=r)",
        latency(
            port,
            2000,
            Some(1),
            |x| json!([78, [table(), x % 200_000], {"index": "r"}]),
        )
        .await,
    );
    report(
        "get(k) by primary key",
        latency(port, 2000, None, |x| json!([16, [table(), x % 200_000]])).await,
    );
    report(
        "between(index=r) 100,000 docs .count()",
        latency(port, 10, None, |x| {
            let lo = x % 100_000;
            json!([43, [[182, [table(), lo, lo + 100_000], {"index": "r"}]]])
        })
        .await,
    );
    let t0 = Instant::now();
    let cnt = run(
        &c,
        json!([43, [[182, [table(), 50_000, 150_000], {"index": "r"}]]]),
    )
    .await;
    println!(
        "single count of 100,000-entry range: {cnt} in {:.1} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );
}

/// Queries per client for the `between` measurement (`BETWEEN_ROUNDS`, default 40).
fn between_rounds() -> usize {
    std::env::var("BETWEEN_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

/// A permutation of `0..n` (999,983 is prime), so that index order is not primary-key
/// order: an index read then touches documents all over the table, as in real use.
fn scramble(k: u64, n: u64) -> u64 {
    (k * 999_983) % n
}
