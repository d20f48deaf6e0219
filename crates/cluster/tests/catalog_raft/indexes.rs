//! Secondary indexes of replicated tables: an index created through one node while
//! another writes is built by every replica and read through every node in each
//! `read_mode`, merged over both shards in index order; RethinkDB's errors for a
//! duplicate, a missing and a dropped index; a rename and a drop reach every node; a
//! server holding no replica reads an index through the shard's group; the optimizer's
//! statistics are the leaders' counts summed over the shards, through every node.

use super::harness::*;
use super::tables::{doc, host_tables, one_shard_on_two, put, three_nodes_and_a_table};
use datum::Datum;
use reql::ReadMode;

pub(super) const MODES: [ReadMode; 3] = [ReadMode::Single, ReadMode::Majority, ReadMode::Outdated];

/// Waits until `db.table`'s indexes on node `n` are `names`, all ready.
pub(super) async fn ready_on(n: &TestNode, table: &'static str, names: &[&str]) {
    let want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    for _ in 0..400 {
        let c = n.cluster().clone();
        let status = blocking(move || c.table("d", table).unwrap().index_status()).await;
        if let Ok(s) = status {
            let got: Vec<String> = s.iter().map(|s| s.name.clone()).collect();
            if got == want && s.iter().all(|s| s.ready) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("indexes {want:?} of d.{table} never ready");
}

/// Index `name`'s statistics (entries, unkeyed) as node `n` reads them in `mode`.
async fn stats(
    n: &TestNode,
    table: &'static str,
    mode: ReadMode,
    name: &'static str,
) -> (Option<u64>, Option<reql::Unkeyed>) {
    let c = n.cluster().clone();
    let all = blocking(move || c.table_read_mode("d", table, mode)?.index_statistics()).await;
    let s = all.unwrap().into_iter().find(|s| s.name == name).unwrap();
    (s.entries, s.unkeyed)
}

pub(super) fn ids(docs: Vec<Datum>) -> Vec<String> {
    docs.iter()
        .map(|d| d.get("id").and_then(Datum::as_str).unwrap().to_string())
        .collect()
}

/// The documents of index `name` between `lo` and `hi` (all when `None`), as node `n`
/// reads them in `mode`.
pub(super) async fn read(
    n: &TestNode,
    table: &'static str,
    mode: ReadMode,
    name: &'static str,
    value: Option<&'static str>,
    reverse: bool,
) -> reql::Result<Vec<Datum>> {
    let c = n.cluster().clone();
    blocking(move || {
        let t = c.table_read_mode("d", table, mode)?;
        let b = match value {
            Some(v) => Bound::Included(Datum::from(v)),
            None => Bound::Unbounded,
        };
        t.index_scan(name, b.clone(), b, reverse)?.collect()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_a_replicated_table_is_built_read_renamed_and_dropped() {
    let (nodes, _hosts, _) = three_nodes_and_a_table().await;
    // Ids over both shards (shard 0 holds keys below "80"), written through node 0
    // while node 1 creates the index.
    let key = |i: u32| format!("{:02x}", i * 6);
    let c0 = nodes[0].cluster().clone();
    let writer = tokio::task::spawn_blocking(move || {
        let t = c0.table("d", "r").unwrap();
        for i in 0..40 {
            let v = format!("v{}", i % 4);
            t.apply(put(&key(i), &v)).unwrap();
        }
    });
    let c1 = nodes[1].cluster().clone();
    blocking(move || c1.table("d", "r").unwrap().index_create("v", v_index()))
        .await
        .unwrap();
    writer.await.unwrap();
    for n in &nodes {
        ready_on(n, "r", &["v"]).await;
    }
    let ones: Vec<String> = (0..40).filter(|i| i % 4 == 1).map(key).collect();
    for n in &nodes {
        for mode in MODES {
            let got = read(n, "r", mode, "v", Some("v1"), false).await.unwrap();
            assert_eq!(ids(got), ones, "{mode:?}");
            // The whole index, merged over both shards: by value, then primary key.
            let all = read(n, "r", mode, "v", None, false).await.unwrap();
            let mut want: Vec<(String, String)> =
                (0..40).map(|i| (format!("v{}", i % 4), key(i))).collect();
            want.sort();
            let got: Vec<(String, String)> = all
                .iter()
                .map(|d| {
                    let v = d.get("v").and_then(Datum::as_str).unwrap().to_string();
                    (v, d.get("id").and_then(Datum::as_str).unwrap().to_string())
                })
                .collect();
            assert_eq!(got, want, "{mode:?}");
            let back = read(n, "r", mode, "v", None, true).await.unwrap();
            assert_eq!(back.len(), 40);
            assert_eq!(back.first(), all.last());
        }
        let c = n.cluster().clone();
        let counted = blocking(move || {
            let t = c.table("d", "r").unwrap();
            let two = Bound::Included(Datum::from("v2"));
            t.index_count_upto("v", two.clone(), two, u64::MAX)
        })
        .await;
        assert_eq!(counted.unwrap(), 10);
    }
    // Writes after the build are in every replica's copy.
    let c2 = nodes[2].cluster().clone();
    blocking(move || c2.table("d", "r").unwrap().apply(put("ff", "v9")).unwrap()).await;
    for n in &nodes {
        let got = read(n, "r", ReadMode::Single, "v", Some("v9"), false).await;
        assert_eq!(got.unwrap(), vec![doc("ff", "v9")]);
    }
    // The optimizer's statistics: both shards' leaders' counts, summed, through every
    // node; none for `outdated` reads (a replica there may be behind the leaders), and
    // none in `index_status`, which every index read asks for.
    let none = reql::Unkeyed::default();
    let nulls = reql::Unkeyed { null: 1, ..none };
    for n in &nodes {
        for mode in [ReadMode::Single, ReadMode::Majority] {
            let got = stats(n, "r", mode, "v").await;
            assert_eq!(got, (Some(41), Some(none)), "{mode:?}");
        }
        assert_eq!(stats(n, "r", ReadMode::Outdated, "v").await, (None, None));
        let c = n.cluster().clone();
        let plain = blocking(move || c.table("d", "r").unwrap().index_status()).await;
        assert_eq!(plain.unwrap()[0].unkeyed, None);
    }
    // A value the index cannot hold (null) is counted by its shard's leader at once.
    let c0 = nodes[0].cluster().clone();
    blocking(move || {
        let d = datum::from_json_value(&serde_json::json!({"id": "01", "v": null})).unwrap();
        let op = reql::WriteOp {
            key: Datum::from("01"),
            expect: Some(datum::Version::ABSENT),
            change: reql::Change::Put(d),
        };
        c0.table("d", "r").unwrap().apply(op).unwrap()
    })
    .await;
    for n in &nodes {
        let got = stats(n, "r", ReadMode::Single, "v").await;
        assert_eq!(got, (Some(41), Some(nulls)));
    }

    // RethinkDB's errors.
    let c = nodes[2].cluster().clone();
    let dup = blocking(move || c.table("d", "r").unwrap().index_create("v", v_index())).await;
    assert_eq!(
        dup.unwrap_err().message,
        "Index `v` already exists on table `d.r`."
    );
    let missing = read(&nodes[0], "r", ReadMode::Single, "nope", None, false).await;
    assert_eq!(
        missing.unwrap_err().message,
        "Index `nope` was not found on table `d.r`."
    );

    // Renamed through node 2: every node reads it under its new name only.
    let c = nodes[2].cluster().clone();
    blocking(move || c.table("d", "r").unwrap().index_rename("v", "w", false))
        .await
        .unwrap();
    for n in &nodes {
        ready_on(n, "r", &["w"]).await;
        let got = read(n, "r", ReadMode::Outdated, "w", Some("v1"), false).await;
        assert_eq!(ids(got.unwrap()), ones);
        let old = read(n, "r", ReadMode::Single, "v", None, false).await;
        assert!(old.unwrap_err().message.contains("was not found"));
    }
    // Dropped through node 0: gone everywhere, and a second drop is RethinkDB's error.
    let c = nodes[0].cluster().clone();
    blocking(move || c.table("d", "r").unwrap().index_drop("w"))
        .await
        .unwrap();
    let c = nodes[1].cluster().clone();
    let again = blocking(move || c.table("d", "r").unwrap().index_drop("w")).await;
    assert_eq!(
        again.unwrap_err().message,
        "Index `w` does not exist on table `d.r`."
    );
    for n in &nodes {
        ready_on(n, "r", &[]).await;
        // Each server drops its copies when it follows the catalog, which may be just
        // after its index_status already shows the drop.
        let mut names = n.engine.space_names().unwrap();
        for _ in 0..200 {
            if !names.iter().any(|s| s.contains(".idx.")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            names = n.engine.space_names().unwrap();
        }
        assert!(!names.iter().any(|s| s.contains(".idx.")), "{names:?}");
        assert_eq!(n.cluster().follow_failures(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_replica_reads_an_index_through_the_group() {
    let nodes = three_nodes().await;
    introduce(&nodes);
    let _hosts = host_tables(&nodes);
    write_first_entries(&nodes).await;
    let outside = one_shard_on_two(&nodes).await;
    let c = nodes[outside].cluster().clone();
    blocking(move || {
        let t = c.table("d", "two").unwrap();
        for (id, v) in [("a", "x"), ("b", "y"), ("c", "x")] {
            t.apply(put(id, v)).unwrap();
        }
        t.index_create("v", v_index()).unwrap();
    })
    .await;
    ready_on(&nodes[outside], "two", &["v"]).await;
    for mode in MODES {
        let got = read(&nodes[outside], "two", mode, "v", Some("x"), false).await;
        assert_eq!(ids(got.unwrap()), ["a", "c"], "{mode:?}");
    }
    // Its statistics come from the leader too.
    let got = stats(&nodes[outside], "two", ReadMode::Single, "v").await;
    assert_eq!(got, (Some(3), Some(reql::Unkeyed::default())));
}
