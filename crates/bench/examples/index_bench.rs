//! Secondary-index benchmark (issue 4): loads N documents, times an index build on the
//! populated table, then measures at 16 concurrent clients: `between` on an index
//! returning 1,000 documents, `order_by(index=).limit(10)`, `get_all` on an index
//! against `get` by primary key, and `count()` of an indexed range of 100,000 entries.
//!
//! `cargo run --release -p bench --example index_bench -- PORT [DOCS] [keep|reuse]`;
//! with `SERVER_PID` set, each line also gives the server's CPU time per query.

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

/// How a measurement loads the server: `clients` connections each run `per_client`
/// queries, back to back (closed loop) or, with `every`, each at its scheduled time
/// (open loop: a query sent late because the previous answer was slow counts from its
/// scheduled time, so there is no coordinated omission).
#[derive(Clone, Copy)]
struct Load {
    clients: usize,
    per_client: usize,
    every: Option<Duration>,
}

impl Load {
    const fn closed(per_client: usize) -> Load {
        Load {
            clients: CLIENTS,
            per_client,
            every: None,
        }
    }
}

/// Runs a load, checking the row count when `want` is given; returns p50, p99 and max in
/// ms and queries per second.
async fn latency(
    port: u16,
    load: Load,
    want: Option<usize>,
    make: fn(u64) -> Value,
) -> (f64, f64, f64, f64, Option<f64>) {
    let cpu0 = server_cpu();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..load.clients {
        tasks.push(tokio::spawn(async move {
            let conn = Connection::connect("127.0.0.1", port)
                .await
                .expect("connect");
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let first = Instant::now()
                + load
                    .every
                    .map_or(Duration::ZERO, |e| e * c as u32 / load.clients as u32);
            for i in 0..load.per_client {
                let q = make((c * 7919 + i * 104_729) as u64);
                let t0 = match load.every {
                    Some(e) => {
                        let due = first + e * i as u32;
                        if Instant::now() < due {
                            // On time: the clock starts when the timer fires (it may
                            // fire up to a millisecond late; that is not the server's).
                            tokio::time::sleep_until(due.into()).await;
                            Instant::now()
                        } else {
                            // Behind schedule: the wait for the previous answer counts.
                            due
                        }
                    }
                    None => Instant::now(),
                };
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
    let n = (load.clients * load.per_client) as f64;
    let qps = n / start.elapsed().as_secs_f64();
    let cpu_us = cpu0.zip(server_cpu()).map(|(a, b)| (b - a) * 1e6 / n);
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    (ms(0.5), ms(0.99), all.max() as f64 / 1000.0, qps, cpu_us)
}

/// The server's CPU seconds so far, when `SERVER_PID` names it.
fn server_cpu() -> Option<f64> {
    let pid: u32 = std::env::var("SERVER_PID").ok()?.parse().ok()?;
    Some(bench::procstat::cpu_secs(pid))
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
        run(c, json!([56, [table(), [2, docs]], {"durability": "soft"}])).await;
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
    let report = |name: &str, r: (f64, f64, f64, f64, Option<f64>)| {
        let cpu =
            r.4.map_or(String::new(), |us| format!("  server {us:>7.1} µs/q"));
        println!(
            "{name:<46} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  {:>8.0} q/s{cpu}",
            r.0, r.1, r.2, r.3
        )
    };
    // between on index `r` returning 1,000 documents: one client alone, 16 clients at
    // paced total rates, then 16 clients back to back (the server saturated).
    fn between(x: u64) -> Value {
        let lo = x % 199_000;
        json!([182, [table(), lo, lo + 1000], {"index": "r"}])
    }
    let alone = Load {
        clients: 1,
        ..Load::closed(between_rounds())
    };
    report(
        "between(index=r) 1,000 docs, 1 client",
        latency(port, alone, Some(1000), between).await,
    );
    for rate in between_rates() {
        // Each of the 16 clients runs for about 5 seconds at its share of the rate.
        let every = Duration::from_secs_f64(CLIENTS as f64 / rate);
        let load = Load {
            clients: CLIENTS,
            per_client: ((rate * 5.0) as usize / CLIENTS).max(10),
            every: Some(every),
        };
        report(
            &format!("between(index=r) 1,000 docs, 16 at {rate} q/s"),
            latency(port, load, Some(1000), between).await,
        );
    }
    report(
        "between(index=r) 1,000 docs, 16 closed loop",
        latency(port, Load::closed(between_rounds()), Some(1000), between).await,
    );
    if std::env::var("ONLY_BETWEEN").is_ok_and(|v| !v.is_empty()) {
        return;
    }
    report(
        "order_by(index=r).limit(10)",
        latency(
            port,
            Load::closed(200),
            Some(10),
            |_| json!([71, [[41, [table()], {"index": "r"}], 10]]),
        )
        .await,
    );
    report(
        "order_by(index=desc(r)).limit(10)",
        latency(
            port,
            Load::closed(200),
            Some(10),
            |_| json!([71, [[41, [table()], {"index": [74, ["r"]]}], 10]]),
        )
        .await,
    );
    report(
        "get_all(k, index=r)",
        latency(
            port,
            Load::closed(point_rounds()),
            Some(1),
            |x| json!([78, [table(), x % 200_000], {"index": "r"}]),
        )
        .await,
    );
    report(
        "get(k) by primary key",
        latency(port, Load::closed(point_rounds()), None, |x| {
            json!([16, [table(), x % 200_000]])
        })
        .await,
    );
    report(
        "between(index=r) 100,000 docs .count()",
        latency(port, Load::closed(10), None, |x| {
            let lo = x % 100_000;
            json!([43, [[182, [table(), lo, lo + 100_000], {"index": "r"}]]])
        })
        .await,
    );
    let t0 = Instant::now();
    let cnt = run(
        c,
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

/// Total rates (queries per second over all 16 clients) for the paced `between` runs
/// (`BETWEEN_RATES`, comma-separated; default 200,400,600).
fn between_rates() -> Vec<f64> {
    std::env::var("BETWEEN_RATES")
        .unwrap_or_else(|_| "200,400,600".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .filter(|r: &f64| *r > 0.0)
        .collect()
}

/// Queries per client for `get_all` and `get` (`POINT_ROUNDS`, default 2000).
fn point_rounds() -> usize {
    std::env::var("POINT_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}
