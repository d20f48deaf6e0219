//! Fault injection at the storage seam: a write the engine could not apply is reported
//! as an error, and a write whose sync failed is never acknowledged as durable.

use std::sync::Arc;

use datum::Datum;
use reql::{Change, Durability, TableAccess, TableOptions};
use storage::{Engine, Faulty, Memory};

use crate::Cluster;

fn setup() -> (Arc<Faulty<Memory>>, Arc<Cluster>) {
    let faulty = Arc::new(Faulty::new(Memory::new()));
    let engine: Arc<dyn Engine> = faulty.clone();
    let c = Cluster::open(engine, "s").unwrap();
    c.table_create(
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
    (faulty, c)
}

fn doc(i: f64) -> Datum {
    Datum::from_pairs([("id", Datum::Number(i))])
}

#[test]
fn failed_apply_is_an_error_and_writes_nothing() {
    let (faulty, c) = setup();
    let t = c.table("test", "t").unwrap();
    faulty.fail_next_applies(1);
    let r = reql::write_op::overwrite(t.as_ref(), &Datum::Number(1.0), Change::Put(doc(1.0)));
    assert!(r.is_err(), "an unapplied write must not succeed");
    assert!(t.get(&Datum::Number(1.0)).unwrap().is_none());
    assert_eq!(t.count().unwrap(), 0);
    // The next write goes through.
    let (_, new, ticket) =
        reql::write_op::overwrite(t.as_ref(), &Datum::Number(2.0), Change::Put(doc(2.0))).unwrap();
    assert!(new.is_some() && ticket.is_some());
}

#[test]
fn failed_sync_is_never_acknowledged() {
    let (faulty, c) = setup();
    let t = c.table("test", "t").unwrap();
    let (_, _, ticket) =
        reql::write_op::overwrite(t.as_ref(), &Datum::Number(1.0), Change::Put(doc(1.0))).unwrap();
    faulty.fail_next_persists(1_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let waited = rt.block_on(c.wait_durable(ticket.unwrap()));
    assert!(
        waited.is_err(),
        "a write whose fsync failed was acknowledged"
    );
}
