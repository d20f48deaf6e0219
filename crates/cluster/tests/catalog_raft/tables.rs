//! Placed tables replicated on Raft (`cluster::groups`): each shard of a table created
//! with three replicas through one node becomes a group on the three nodes; writes
//! through any node's `TableHandle` reach every node's replica, and reads and scans
//! and counts through any node see them (from the primaries); a conflicting insert
//! gets the current document; dropping the table drops every node's groups; when a
//! shard's leader is lost, writes through the survivors go on under a new leader, and
//! `read_mode` `majority` and `outdated` read the primary's and the local copy; a
//! changefeed on any replica's node sees the writes made through the others; a server
//! holding no replica reads and writes through the shard's group.

use super::harness::*;
use cluster::groups::TableGroups;
use datum::Datum;
use reql::{Applied, Change, ReadMode, WriteOp};

/// Hosts each node's placed tables on a `replication::Host` over its router.
pub(super) fn host_tables(nodes: &[TestNode]) -> Vec<Arc<Host<SharedTransport>>> {
    host_tables_of(nodes, &(0..nodes.len()).collect::<Vec<_>>())
}

/// [`host_tables`] on the nodes at `which` only (each knowing every node's address).
pub(super) fn host_tables_of(
    nodes: &[TestNode],
    which: &[usize],
) -> Vec<Arc<Host<SharedTransport>>> {
    let mut hosts = Vec::new();
    let addrs: Arc<BTreeMap<String, String>> = Arc::new(
        nodes
            .iter()
            .map(|n| (n.cluster().local_record().id, n.addr.clone()))
            .collect(),
    );
    for n in which.iter().map(|&i| &nodes[i]) {
        let c = n.cluster();
        let me = c.local_record().id;
        let transport = Arc::new(SharedTransport::new(testkit::transport(peers())));
        let host = Arc::new(Host::new(
            node_id(&me).unwrap(),
            n.engine.clone(),
            n.router.clone(),
            transport.clone(),
            testkit::config(None),
            Durability::Inline,
        ));
        hosts.push(host.clone());
        let addrs = addrs.clone();
        let groups = TableGroups::new(
            host,
            transport,
            n.router.clone(),
            tokio::runtime::Handle::current(),
            &me,
            Arc::new(move |id: &str| addrs.get(id).cloned()),
            RoutePolicy::default(),
            ClientPolicy::for_config(&testkit::config(None), Duration::from_secs(5)),
        );
        assert!(c.set_table_groups(groups).unwrap());
    }
    hosts
}

pub(super) fn doc(id: &str, v: &str) -> Datum {
    datum::from_json_value(&json!({"id": id, "v": v})).unwrap()
}

pub(super) fn put(id: &str, v: &str) -> WriteOp {
    WriteOp {
        key: Datum::from(id),
        expect: Some(datum::Version::ABSENT),
        change: Change::Put(doc(id, v)),
    }
}

/// The document under `id` in a node's own replica of table `table_id` (shard `shard`).
fn local(n: &TestNode, table_id: &str, shard: usize, id: &str) -> Option<Datum> {
    let prefix = format!("raft.t{table_id}.s{shard}");
    let spaces = state_spaces(&*n.engine, &prefix, &["docs".to_string()]).unwrap();
    let key = datum::keys::encode_primary(&Datum::from(id)).unwrap();
    let bytes = n.engine.get(&spaces[0], &key).unwrap()?;
    Some(datum::from_json_slice(&bytes).unwrap())
}

/// Waits until every node's own replica holds `want` under `id` (in one of the shards).
async fn everywhere(nodes: &[TestNode], table_id: &str, id: &str, want: Option<Datum>) {
    for _ in 0..200 {
        let held = |n: &TestNode| (0..2).find_map(|s| local(n, table_id, s, id));
        if nodes.iter().all(|n| held(n) == want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("document {id} never became {want:?} in every replica");
}

fn group_spaces(n: &TestNode) -> usize {
    let names = n.engine.space_names().unwrap();
    names.iter().filter(|s| s.starts_with("raft.t")).count()
}

/// Three nodes, each hosting its placed tables, and table `d.r` of 2 shards with 3
/// replicas created through node 2: the nodes, their hosts and the table's id.
pub(super) async fn three_nodes_and_a_table(
) -> (Vec<TestNode>, Vec<Arc<Host<SharedTransport>>>, String) {
    let nodes = three_nodes().await;
    introduce(&nodes);
    let hosts = host_tables(&nodes);
    write_first_entries(&nodes).await;
    let c = nodes[1].cluster().clone();
    blocking(move || {
        c.db_create("d").unwrap();
        c.table_create("d", "r", opts(2, 3)).unwrap();
    })
    .await;
    converge(&nodes, 5).await;

    let table_id = nodes[0].cluster().table_config("d", "r").unwrap();
    let table_id = table_id
        .get("id")
        .and_then(|i| i.as_str())
        .unwrap()
        .to_string();
    (nodes, hosts, table_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_three_replicas_is_replicated_by_its_groups() {
    let (nodes, _hosts, table_id) = three_nodes_and_a_table().await;
    // Writes through each node, to keys of both shards.
    // Shard 0 holds keys below "80", shard 1 the others.
    for (i, id) in [(0usize, "1"), (1, "2"), (2, "3"), (0, "a0"), (2, "f9")] {
        let c = nodes[i].cluster().clone();
        let r = blocking(move || c.table("d", "r").unwrap().apply(put(id, "a"))).await;
        assert!(matches!(r, Ok(Applied::Done(None, Some(_), None))), "{r:?}");
    }
    for id in ["1", "2", "3", "a0", "f9"] {
        everywhere(&nodes, &table_id, id, Some(doc(id, "a"))).await;
    }
    assert_eq!(local(&nodes[1], &table_id, 1, "a0"), Some(doc("a0", "a")));
    assert_eq!(local(&nodes[1], &table_id, 0, "a0"), None);
    // Reads go to the shards' primaries: every node reads every write at once, and a
    // scan reads the shards in key order, both ways.
    for n in &nodes {
        let c = n.cluster().clone();
        let (got, asc, desc) = blocking(move || {
            let t = c.table("d", "r").unwrap();
            let ids = |reverse| -> Vec<Datum> {
                let all = t.scan(Bound::Unbounded, Bound::Unbounded, reverse).unwrap();
                all.map(|d| d.unwrap().get("id").unwrap().clone()).collect()
            };
            (t.get(&Datum::from("a0")).unwrap(), ids(false), ids(true))
        })
        .await;
        assert_eq!(got, Some(doc("a0", "a")));
        let c = n.cluster().clone();
        let (all, some) = blocking(move || {
            let t = c.table("d", "r").unwrap();
            let from = Bound::Included(Datum::from("2"));
            (
                t.count().unwrap(),
                t.count_range(from, Bound::Unbounded).unwrap(),
            )
        })
        .await;
        assert_eq!((all, some), (5, 4));
        let want: Vec<Datum> = ["1", "2", "3", "a0", "f9"].map(Datum::from).to_vec();
        assert_eq!(asc, want);
        assert_eq!(desc, want.iter().rev().cloned().collect::<Vec<_>>());
    }
    // An insert of a key that exists conflicts, with the current document.
    let c = nodes[2].cluster().clone();
    let r = blocking(move || c.table("d", "r").unwrap().apply(put("1", "b"))).await;
    assert!(
        matches!(&r, Ok(Applied::Conflict(Some(d))) if *d == doc("1", "a")),
        "{r:?}"
    );
    // Resharding it: `reshard.rs`; moving its replicas is tested with real processes
    // (tests/test_cluster_moves.py).
    for n in &nodes {
        assert!(group_spaces(n) > 0);
        assert_eq!(n.cluster().follow_failures(), 0);
    }

    // Dropped: every node's groups and their storage go.
    let c = nodes[0].cluster().clone();
    blocking(move || c.table_drop("d", "r")).await.unwrap();
    for n in &nodes {
        for _ in 0..100 {
            if group_spaces(n) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(group_spaces(n), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_when_a_shard_leader_is_lost() {
    let (nodes, hosts, table_id) = three_nodes_and_a_table().await;
    let c = nodes[0].cluster().clone();
    blocking(move || c.table("d", "r").unwrap().apply(put("1", "a")).unwrap()).await;
    // The node leading shard 0 loses its replicas (as a crashed server would).
    let group = cluster::groups::group_of(&table_id, 0);
    let mut lost = None;
    for _ in 0..100 {
        for (i, h) in hosts.iter().enumerate() {
            if let Some(m) = h.member(group) {
                if m.raft.current_leader().await == Some(h.me()) {
                    lost = Some(i);
                }
            }
        }
        if lost.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lost = lost.expect("shard 0 has a leader");
    hosts[lost].close(group).await.unwrap();
    // Through a survivor: the write waits for a new leader and succeeds; the other
    // survivor reads it from the new primary.
    let (a, b) = match lost {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    let c = nodes[a].cluster().clone();
    let r = blocking(move || c.table("d", "r").unwrap().apply(put("2", "after"))).await;
    assert!(matches!(r, Ok(Applied::Done(None, Some(_), None))), "{r:?}");
    let c = nodes[b].cluster().clone();
    let got = blocking(move || c.table("d", "r").unwrap().get(&Datum::from("2")).unwrap()).await;
    assert_eq!(got, Some(doc("2", "after")));
    let c = nodes[b].cluster().clone();
    let got = blocking(move || c.table("d", "r").unwrap().get(&Datum::from("1")).unwrap()).await;
    assert_eq!(got, Some(doc("1", "a")));

    // read_mode: `majority` through a survivor sees the write; `outdated` on the node
    // whose replica stopped reads that replica as it is, without it.
    let c = nodes[b].cluster().clone();
    let got = blocking(move || {
        let t = c.table_read_mode("d", "r", ReadMode::Majority).unwrap();
        t.get(&Datum::from("2")).unwrap()
    })
    .await;
    assert_eq!(got, Some(doc("2", "after")));
    let c = nodes[lost].cluster().clone();
    let (two, one) = blocking(move || {
        let t = c.table_read_mode("d", "r", ReadMode::Outdated).unwrap();
        (
            t.get(&Datum::from("2")).unwrap(),
            t.get(&Datum::from("1")).unwrap(),
        )
    })
    .await;
    assert_eq!((two, one), (None, Some(doc("1", "a"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changefeed_on_any_replica_sees_writes_made_through_another_node() {
    let (nodes, _hosts, _) = three_nodes_and_a_table().await;
    let c = nodes[2].cluster().clone();
    let mut feed = blocking(move || {
        let req = changefeed::Request::whole_table(changefeed::Options::default());
        c.table("d", "r").unwrap().subscribe(req).unwrap()
    })
    .await;
    for (i, id) in [(0usize, "1"), (1, "f9")] {
        let c = nodes[i].cluster().clone();
        blocking(move || c.table("d", "r").unwrap().apply(put(id, "fed")).unwrap()).await;
    }
    // Node 3 applies both entries to its replicas, which publish to its feeds.
    let mut seen = Vec::new();
    for _ in 0..200 {
        while let Some(change) = feed.next_doc() {
            seen.push(change.unwrap());
        }
        if seen.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Two shards, two groups: node 3 may apply them in either order.
    let mut new_ids: Vec<String> = seen
        .iter()
        .map(|c| {
            c.get("new_val")
                .unwrap()
                .get("id")
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    new_ids.sort();
    assert_eq!(new_ids, ["1", "f9"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_replica_routes_to_the_shards_group() {
    let nodes = three_nodes().await;
    introduce(&nodes);
    let _hosts = host_tables(&nodes);
    write_first_entries(&nodes).await;
    let outside = one_shard_on_two(&nodes).await;
    let c = nodes[outside].cluster().clone();
    let (put_one, got, outdated, all, n, feed) = blocking(move || {
        let t = c.table("d", "two").unwrap();
        let put_one = t.apply(put("k", "v"));
        let got = t.get(&Datum::from("k")).unwrap();
        let o = c.table_read_mode("d", "two", ReadMode::Outdated).unwrap();
        let outdated = o.get(&Datum::from("k")).unwrap();
        let all: Vec<Datum> = t
            .scan(Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .map(|d| d.unwrap())
            .collect();
        // A feed here is fed by a session on the shard's leader: the initial value,
        // then a write made after it opened.
        let req = changefeed::Request::whole_table(changefeed::Options {
            include_initial: true,
            ..Default::default()
        });
        let mut sub = t.subscribe(req).unwrap();
        let n = t.count().unwrap();
        t.apply(put("k2", "w")).unwrap();
        let mut feed = Vec::new();
        for _ in 0..3000 {
            match sub.next_doc() {
                Some(d) => feed.push(d.unwrap().to_json_string()),
                None if feed.len() >= 2 => break,
                None => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        (put_one, got, outdated, all, n, feed)
    })
    .await;
    assert!(
        matches!(put_one, Ok(Applied::Done(None, Some(_), None))),
        "{put_one:?}"
    );
    assert_eq!(got, Some(doc("k", "v")));
    // No replica here: `outdated` is read from a member too.
    assert_eq!(outdated, Some(doc("k", "v")));
    assert_eq!((all, n), (vec![doc("k", "v")], 1));
    let k2 = r#"{"new_val":{"id":"k2","v":"w"},"old_val":null}"#;
    assert_eq!(feed, [r#"{"new_val":{"id":"k","v":"v"}}"#, k2]);
    for n in &nodes {
        assert_eq!(n.cluster().follow_failures(), 0);
    }
}

/// Creates `d.two`, one shard on two of the three `nodes`, and waits for every node to
/// apply it: the index of the node that holds no replica.
pub(crate) async fn one_shard_on_two(nodes: &[TestNode]) -> usize {
    let c = nodes[0].cluster().clone();
    let placed = blocking(move || {
        c.db_create("d").unwrap();
        c.table_create("d", "two", opts(1, 2)).unwrap();
        let cfg = c.table_config("d", "two").unwrap();
        let shard = cfg.get("shards").unwrap().as_array().unwrap()[0].clone();
        let replicas = shard.get("replicas").unwrap().as_array().unwrap().to_vec();
        replicas
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    })
    .await;
    converge(nodes, 5).await;
    (0..3)
        .find(|&i| !placed.contains(&nodes[i].cluster().local_record().name))
        .unwrap()
}
