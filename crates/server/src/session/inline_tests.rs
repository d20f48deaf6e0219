//! Single-document writes evaluated on the connection's task (`Session::start_inline`):
//! a hard write is answered only once the group commit covering it succeeded, a soft one
//! without waiting, and a write that fails in its function answers as RethinkDB does.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cluster::Cluster;
use proto::frame::Frame;
use reql::{Durability, TableAccess, TableOptions};
use serde_json::{json, Value as Json};
use storage::{Engine, Faulty, Memory};
use tokio::sync::mpsc::Receiver;

use super::Session;
use crate::exec::Pool;
use crate::outbox::{Outbox, Outgoing};
use crate::principal::Principal;
use crate::state::ServerState;

fn setup() -> (Arc<Faulty<Memory>>, Arc<Session>, Receiver<Outgoing>) {
    let faulty = Arc::new(Faulty::new(Memory::new()));
    let engine: Arc<dyn Engine> = faulty.clone();
    let cluster = Cluster::open(engine, "s").unwrap();
    cluster
        .table_create(
            "test",
            "t",
            TableOptions {
                primary_key: "id".into(),
                durability: Durability::Hard,
                shards: 1,
                replicas: reql::Replicas::count(1),
            },
        )
        .unwrap();
    let state = Arc::new(ServerState {
        cluster: cluster.clone(),
        server_id: "s".into(),
        pool: Arc::new(Pool::new(1).unwrap()),
        handshake_timeout: Duration::from_secs(5),
        query_memory: 1 << 30,
        optimizer: true,
    });
    let (out, rx) = Outbox::new();
    let who = Principal::new(&cluster, "admin", "test".into());
    (faulty, Session::new(state, out, who), rx)
}

/// Sends a START of `term` (wire JSON) with `optargs`; returns the answer's JSON.
async fn ask(s: &Arc<Session>, rx: &mut Receiver<Outgoing>, term: Json, optargs: Json) -> Json {
    let payload = json!([1, term, optargs]).to_string();
    let token = 7;
    s.handle(Frame {
        token,
        payload: Bytes::from(payload),
    })
    .await;
    let out = rx.recv().await.unwrap();
    assert_eq!(out.frame[..8], token.to_le_bytes());
    serde_json::from_slice(&out.frame[12..]).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `r.table("t").get(1).update(value)`.
fn update(value: Json) -> Json {
    json!([53, [[16, [[15, ["t"]], 1]], value]])
}

#[test]
fn a_hard_inline_write_is_answered_only_after_its_fsync() {
    let (faulty, s, mut rx) = setup();
    runtime().block_on(async {
        let ins = ask(
            &s,
            &mut rx,
            json!([56, [[15, ["t"]], {"id": 1, "n": 1}]]),
            json!({}),
        )
        .await;
        assert_eq!(ins["t"], 1, "{ins}");
        assert_eq!(ins["r"][0]["inserted"], 1);
        let term = update(json!({"n": 2}));
        let parsed = reql::compile_query(json!([1, term, {}]).to_string().as_bytes()).unwrap();
        assert!(reql::plan::inline_write(&parsed.term.unwrap().unwrap()));
        // Every fsync fails from here: the hard write is applied but never durable, so
        // it must not be acknowledged.
        faulty.fail_next_persists(1_000_000);
        let hard = ask(&s, &mut rx, term, json!({})).await;
        assert_ne!(hard["t"], 1, "acknowledged without its fsync: {hard}");
        // A soft write does not wait for the fsync.
        let soft = ask(
            &s,
            &mut rx,
            update(json!({"n": 3})),
            json!({"durability": "soft"}),
        )
        .await;
        assert_eq!(soft["t"], 1, "{soft}");
        assert_eq!(soft["r"][0]["replaced"], 1);
    });
}

#[test]
fn an_inline_update_failing_in_its_function_answers_like_the_pool() {
    let (_faulty, s, mut rx) = setup();
    runtime().block_on(async {
        ask(
            &s,
            &mut rx,
            json!([56, [[15, ["t"]], {"id": 1, "n": "x"}]]),
            json!({}),
        )
        .await;
        // update(lambda d: {"n": d["n"] + 1}): a string plus a number fails.
        let f = json!([69, [[2, [1]], {"n": [24, [[170, [[10, [1]], "n"]], 1]]}]]);
        let inline = ask(&s, &mut rx, update(f.clone()), json!({})).await;
        // The same update of the same document through get_all runs on the pool.
        let pooled = ask(
            &s,
            &mut rx,
            json!([53, [[78, [[15, ["t"]], 1]], f]]),
            json!({}),
        )
        .await;
        assert_eq!(inline, pooled);
        assert_eq!(inline["r"][0]["errors"], 1, "{inline}");
        assert_eq!(inline["r"][0]["replaced"], 0);
        // And the document is unchanged.
        let read = ask(&s, &mut rx, json!([16, [[15, ["t"]], 1]]), json!({})).await;
        assert_eq!(read["r"][0]["n"], "x");
    });
}
