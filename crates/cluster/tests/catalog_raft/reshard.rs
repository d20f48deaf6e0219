//! Resharding a replicated table (`cluster::reshard`, docs/clustering.md "Resharding")
//! on three in-process nodes: a table of 2 shards and 3 replicas with 80 documents and
//! an index is resharded to 3, 1 and 4 shards through different nodes, then rebalanced;
//! after each, every node reads every document (scans, counts, the index in each
//! `read_mode`), writes go on, and no node keeps storage of an old generation. A
//! resharding whose new shards are on a stopped node is abandoned by the next
//! `reconfigure` (docs/clustering.md, "Abandoning a resharding").

use super::harness::*;
use super::indexes::{ids, read, ready_on, MODES};
use super::tables::{put, three_nodes_and_a_table};
use datum::Datum;
use reql::Applied;

/// Waits until node `n` serves `d.r` with `shards` shards.
async fn serves(n: &TestNode, shards: usize) {
    for _ in 0..400 {
        let c = n.cluster().clone();
        let (cfg, status) =
            blocking(move || (c.table_config("d", "r"), c.table_status("d", "r"))).await;
        let got = cfg
            .unwrap()
            .get("shards")
            .and_then(Datum::as_array)
            .map(|a| a.len());
        let resharding = status.ok().and_then(|s| {
            s.get("status")?
                .get("ready_for_writes")
                .and_then(Datum::as_bool)
        });
        if got == Some(shards) && resharding == Some(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("d.r never had {shards} shards on a node");
}

/// The shard positions (`groups::slot_of`) of table `id` a node has storage of.
fn stored_slots(n: &TestNode, id: &str) -> Vec<usize> {
    let head = format!("raft.t{id}.");
    let mut slots: Vec<usize> = (n.engine.space_names().unwrap().iter())
        .filter_map(|s| {
            let rest = s.strip_prefix(&head)?;
            let rest = match rest.strip_prefix('i') {
                Some(r) => r.split_once('.')?.1,
                None => rest,
            };
            rest.strip_prefix('s')?.split('.').next()?.parse().ok()
        })
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_table_is_resharded_with_its_documents_and_index() {
    let (nodes, _hosts, table_id) = three_nodes_and_a_table().await;
    let key = |i: u32| format!("{:02x}", i * 3);
    let c0 = nodes[0].cluster().clone();
    blocking(move || {
        let t = c0.table("d", "r").unwrap();
        for i in 0..80 {
            t.apply(put(&key(i), &format!("v{}", i % 4))).unwrap();
        }
        t.index_create("v", v_index()).unwrap();
    })
    .await;
    for n in &nodes {
        ready_on(n, "r", &["v"]).await;
    }
    let ones: Vec<String> = (0..80).filter(|i| i % 4 == 1).map(key).collect();
    let mut written = 80;
    for (generation, (shards, through)) in [(3u32, 1usize), (1, 2), (4, 0)].into_iter().enumerate()
    {
        let c = nodes[through].cluster().clone();
        let replicas = reql::Replicas::count(3);
        let res = blocking(move || c.reconfigure("d", "r", shards, &replicas, false)).await;
        assert!(res.is_ok(), "{res:?}");
        for n in &nodes {
            serves(n, shards as usize).await;
            let c = n.cluster().clone();
            let (count, scanned) = blocking(move || {
                let t = c.table("d", "r").unwrap();
                let all = t.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap();
                (t.count().unwrap(), all.count())
            })
            .await;
            assert_eq!((count, scanned), (written, written as usize));
            ready_on(n, "r", &["v"]).await;
            for mode in MODES {
                let got = read(n, "r", mode, "v", Some("v1"), false).await.unwrap();
                assert_eq!(ids(got), ones, "{mode:?}");
            }
            assert_eq!(n.cluster().follow_failures(), 0);
        }
        // Writable through every node, into the new shards.
        for (i, n) in nodes.iter().enumerate() {
            let c = n.cluster().clone();
            let id = format!("z{generation}{i}");
            let r = blocking(move || c.table("d", "r").unwrap().apply(put(&id, "new"))).await;
            assert!(matches!(r, Ok(Applied::Done(None, Some(_), None))), "{r:?}");
            written += 1;
        }
        // Every node dropped its copies of the old generation.
        let first = cluster::groups::slot_of(generation as u64 + 1, 0);
        let want: Vec<usize> = (first..first + shards as usize).collect();
        for n in &nodes {
            for _ in 0..200 {
                if stored_slots(n, &table_id) == want {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(stored_slots(n, &table_id), want);
        }
    }
    // A rebalance keeps the count and the documents.
    let c = nodes[1].cluster().clone();
    blocking(move || c.rebalance("d", "r")).await.unwrap();
    for n in &nodes {
        serves(n, 4).await;
        let c = n.cluster().clone();
        let count = blocking(move || c.table("d", "r").unwrap().count().unwrap()).await;
        assert_eq!(count, written);
    }
}

/// A resharding whose new shards are all on a node that stopped cannot finish: the
/// table refuses writes. A `reconfigure` through a survivor that no longer sees that
/// node abandons it: the old shards take writes again with every document, a late
/// `FinishReshard` is refused, and no survivor keeps storage of the new shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resharding_whose_new_shards_lost_their_node_is_abandoned() {
    let (mut nodes, hosts, table_id) = three_nodes_and_a_table().await;
    let key = |i: u32| format!("{:02x}", i * 5);
    let c0 = nodes[0].cluster().clone();
    blocking(move || {
        let t = c0.table("d", "r").unwrap();
        for i in 0..40 {
            t.apply(put(&key(i), "a")).unwrap();
        }
    })
    .await;
    // Node 3 is tagged `lost` as the others see it, then stops.
    let records: Vec<ServerRecord> = nodes.iter().map(|n| n.cluster().local_record()).collect();
    let mut lost = records[2].clone();
    lost.tags = vec!["lost".into()];
    let view = |i: usize, with_lost: bool| {
        let mut peers = vec![records[1 - i].clone()];
        peers.extend(with_lost.then(|| lost.clone()));
        Arc::new(Peers(peers))
    };
    for (i, n) in nodes[..2].iter().enumerate() {
        n.cluster().set_membership(view(i, true));
    }
    let n = &mut nodes[2];
    n.router.remove_group(GROUP);
    n.raft.take().unwrap().shutdown().await.unwrap();
    n.cluster.take().unwrap().shutdown();
    hosts[2].shutdown().await;
    // Every new shard on the stopped node: the copy cannot reach them.
    let c = nodes[0].cluster().clone();
    let on_lost = reql::Replicas {
        by_tag: [("lost".to_string(), 1)].into(),
        primary_tag: "lost".into(),
        nonvoting_tags: Default::default(),
    };
    let res = blocking(move || c.reconfigure("d", "r", 3, &on_lost, false)).await;
    assert!(res.is_err(), "{res:?}");
    let c = nodes[1].cluster().clone();
    let refused = blocking(move || c.table("d", "r").unwrap().apply(put("frozen", "a"))).await;
    assert!(refused.is_err(), "{refused:?}");
    // The survivors no longer see node 3; a reconfigure back to 2 shards on them
    // abandons the resharding.
    for (i, n) in nodes[..2].iter().enumerate() {
        n.cluster().set_membership(view(i, false));
    }
    let c = nodes[0].cluster().clone();
    let two = reql::Replicas::count(2);
    let res = blocking(move || c.reconfigure("d", "r", 2, &two, false)).await;
    assert!(res.is_ok(), "{res:?}");
    let late = CatalogCommand::FinishReshard {
        id: table_id.clone(),
        generation: 1,
    };
    assert!(propose(&nodes, &late).await.is_err());
    for (i, n) in nodes[..2].iter().enumerate() {
        serves(n, 2).await;
        let c = n.cluster().clone();
        let id = format!("z{i}");
        let r = blocking(move || c.table("d", "r").unwrap().apply(put(&id, "new"))).await;
        assert!(matches!(r, Ok(Applied::Done(None, Some(_), None))), "{r:?}");
    }
    let mut want: Vec<String> = (0..40).map(key).chain(["z0".into(), "z1".into()]).collect();
    want.sort();
    for n in &nodes[..2] {
        let c = n.cluster().clone();
        let got = blocking(move || {
            let t = c.table("d", "r").unwrap();
            let all = t.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap();
            let ids = all.map(|d| d.unwrap().get("id").unwrap().as_str().unwrap().to_string());
            ids.collect::<Vec<_>>()
        })
        .await;
        assert_eq!(got, want);
        // Only the old generation's storage is left (the abandoned one's was dropped).
        for _ in 0..200 {
            if stored_slots(n, &table_id) == [0, 1] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(stored_slots(n, &table_id), [0, 1]);
    }
    // The next resharding takes a generation past the abandoned one.
    let c = nodes[1].cluster().clone();
    let two = reql::Replicas::count(2);
    let res = blocking(move || c.reconfigure("d", "r", 3, &two, false)).await;
    assert!(res.is_ok(), "{res:?}");
    let first = cluster::groups::slot_of(2, 0);
    for n in &nodes[..2] {
        serves(n, 3).await;
        let c = n.cluster().clone();
        let count = blocking(move || c.table("d", "r").unwrap().count().unwrap()).await;
        assert_eq!(count, 42);
        for _ in 0..200 {
            if stored_slots(n, &table_id) == (first..first + 3).collect::<Vec<_>>() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            stored_slots(n, &table_id),
            (first..first + 3).collect::<Vec<_>>()
        );
    }
}
