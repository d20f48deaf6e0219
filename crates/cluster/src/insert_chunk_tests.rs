//! A bulk insert through a real table (`TableHandle::apply_all`, one storage batch per
//! chunk: `store::Shard::apply_many`) answers as RethinkDB does: new keys inserted,
//! stored keys by the `conflict` option, a document that fails a check reported alone,
//! `return_changes`, and changefeed events in the documents' order.

use std::sync::Arc;

use datum::Datum;
use reql::{Durability, TableAccess, Val};

use crate::Cluster;

fn setup() -> Arc<Cluster> {
    crate::test_cluster::with_table("s", Durability::Hard, 2)
}

/// Runs one query (its wire JSON) and returns its datum.
fn run(c: &Arc<Cluster>, query: &str) -> Datum {
    let q = reql::compile_query(query.as_bytes()).unwrap();
    let term = q.term.unwrap().unwrap();
    let access: Arc<dyn TableAccess> = c.clone();
    let ctx = Arc::new(reql::QueryCtx::new(access, "test".into(), 0.0));
    match reql::eval(&ctx, &reql::Env::default(), &term).unwrap() {
        Val::Datum(d) => d,
        _ => panic!("not a datum"),
    }
}

/// `r.table("t").insert(docs, opts)` as the driver sends it.
fn insert(c: &Arc<Cluster>, docs: &str, opts: &str) -> Datum {
    run(
        c,
        &format!(r#"[1,[56,[[15,[[14,["test"]],"t"]],[2,{docs}]],{opts}],{{}}]"#),
    )
}

fn num(d: &Datum, key: &str) -> f64 {
    d.get(key).and_then(Datum::as_f64).unwrap_or(-1.0)
}

fn stored(c: &Arc<Cluster>, id: f64) -> Option<String> {
    let t = c.table("test", "t").unwrap();
    t.get(&Datum::Number(id))
        .unwrap()
        .map(|d| d.to_json_string())
}

#[test]
fn a_mixed_chunk_inserts_the_valid_documents_and_reports_the_rest() {
    let c = setup();
    insert(&c, r#"[{"id":2,"v":20},{"id":4,"v":40}]"#, "{}");
    let t = c.table("test", "t").unwrap();
    let req = changefeed::Request::whole_table(changefeed::Options::default());
    let mut feed = t.subscribe(req).unwrap();
    // New keys, two stored keys, a document that is not an object, a key that
    // cannot be a primary key (an object), and one more new key.
    let docs = r#"[{"id":1,"v":1},{"id":2,"v":2},{"id":3,"v":3},5,{"id":{"a":1}},{"id":4,"v":4},{"id":6,"v":6}]"#;
    let r = insert(&c, docs, r#"{"return_changes":true}"#);
    assert_eq!(num(&r, "inserted"), 3.0, "{}", r.to_json_string());
    assert_eq!(num(&r, "errors"), 4.0, "{}", r.to_json_string());
    // Documents refused before any write report first, as RethinkDB's batched insert
    // validates them all before it writes.
    let first = r
        .get("first_error")
        .and_then(|e| e.as_str().map(str::to_owned));
    assert_eq!(
        first.as_deref(),
        Some("Expected type OBJECT but found NUMBER.")
    );
    let again = insert(&c, r#"[{"id":7},{"id":2,"v":2}]"#, "{}");
    let first = again
        .get("first_error")
        .and_then(|e| e.as_str().map(str::to_owned));
    assert_eq!(
        first.as_deref(),
        Some("Duplicate primary key `id`:\n{\n\t\"id\":\t2,\n\t\"v\":\t20\n}\n{\n\t\"id\":\t2,\n\t\"v\":\t2\n}")
    );
    // Only the inserted documents' changes, in order (errors have none without
    // `return_changes: "always"`).
    let changes = r.get("changes").and_then(Datum::as_array).unwrap();
    let new_ids: Vec<f64> = changes
        .iter()
        .map(|ch| num(ch.get("new_val").unwrap(), "id"))
        .collect();
    assert_eq!(new_ids, vec![1.0, 3.0, 6.0]);
    assert_eq!(stored(&c, 2.0).as_deref(), Some(r#"{"id":2,"v":20}"#));
    assert_eq!(stored(&c, 3.0).as_deref(), Some(r#"{"id":3,"v":3}"#));
    assert_eq!(t.count().unwrap(), 6);
    let mut events = Vec::new();
    while let Some(d) = feed.next_doc() {
        events.push(num(d.unwrap().get("new_val").unwrap(), "id"));
    }
    assert_eq!(events, vec![1.0, 3.0, 6.0, 7.0]);
}

#[test]
fn stored_keys_follow_the_conflict_option() {
    let c = setup();
    insert(&c, r#"[{"id":1,"v":1,"w":1},{"id":2,"v":2,"w":2}]"#, "{}");
    let r = insert(
        &c,
        r#"[{"id":1,"v":10},{"id":3,"v":30}]"#,
        r#"{"conflict":"replace","return_changes":true}"#,
    );
    assert_eq!(
        (num(&r, "replaced"), num(&r, "inserted")),
        (1.0, 1.0),
        "{}",
        r.to_json_string()
    );
    let changes = r.get("changes").and_then(Datum::as_array).unwrap();
    assert_eq!(
        changes[0].to_json_string(),
        r#"{"new_val":{"id":1,"v":10},"old_val":{"id":1,"v":1,"w":1}}"#
    );
    assert_eq!(stored(&c, 1.0).as_deref(), Some(r#"{"id":1,"v":10}"#));
    let r = insert(
        &c,
        r#"[{"id":2,"v":20},{"id":4,"v":40},{"id":3,"v":30}]"#,
        r#"{"conflict":"update"}"#,
    );
    assert_eq!(
        (
            num(&r, "replaced"),
            num(&r, "inserted"),
            num(&r, "unchanged")
        ),
        (1.0, 1.0, 1.0),
        "{}",
        r.to_json_string()
    );
    assert_eq!(stored(&c, 2.0).as_deref(), Some(r#"{"id":2,"v":20,"w":2}"#));
    assert_eq!(stored(&c, 4.0).as_deref(), Some(r#"{"id":4,"v":40}"#));
}
