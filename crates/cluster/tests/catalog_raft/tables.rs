//! Placed tables replicated on Raft (`cluster::groups`): each shard of a table created
//! with three replicas through one node becomes a group on the three nodes; writes
//! through any node's `TableHandle` reach every node's replica; a conflicting insert
//! gets the current document; dropping the table drops every node's groups.

use super::harness::*;
use cluster::groups::TableGroups;
use datum::Datum;
use reql::{Applied, Change, WriteOp};

/// Hosts each node's placed tables on a `replication::Host` over its router.
fn host_tables(nodes: &[TestNode]) {
    let addrs: Arc<BTreeMap<String, String>> = Arc::new(
        nodes
            .iter()
            .map(|n| (n.cluster().local_record().id, n.addr.clone()))
            .collect(),
    );
    for n in nodes {
        let c = n.cluster();
        let me = c.local_record().id;
        let transport = Arc::new(SharedTransport::new(testkit::transport(peers())));
        let host = Host::new(
            node_id(&me).unwrap(),
            n.engine.clone(),
            n.router.clone(),
            transport.clone(),
            testkit::config(None),
            Durability::Inline,
        );
        let addrs = addrs.clone();
        let groups = TableGroups::new(
            Arc::new(host),
            transport,
            n.router.clone(),
            tokio::runtime::Handle::current(),
            &me,
            Arc::new(move |id: &str| addrs.get(id).cloned()),
            RoutePolicy::default(),
            ClientPolicy::for_config(&testkit::config(None), Duration::from_secs(5)),
        );
        assert!(c.set_table_groups(groups));
    }
}

fn doc(id: u32, v: &str) -> Datum {
    datum::from_json_value(&json!({"id": id, "v": v})).unwrap()
}

fn put(id: u32, v: &str) -> WriteOp {
    WriteOp {
        key: Datum::Number(id.into()),
        expect: Some(datum::Version::ABSENT),
        change: Change::Put(doc(id, v)),
    }
}

/// Waits until every node's replica holds `want` under `id`.
async fn everywhere(nodes: &[TestNode], table: &str, id: u32, want: Option<Datum>) {
    for _ in 0..200 {
        let now: Vec<Option<Datum>> = nodes
            .iter()
            .map(|n| {
                let t = n.cluster().table("d", table).unwrap();
                t.get(&Datum::Number(id.into())).unwrap()
            })
            .collect();
        if now.iter().all(|d| *d == want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("document {id} of {table} never became {want:?} everywhere");
}

fn group_spaces(n: &TestNode) -> usize {
    let names = n.engine.space_names().unwrap();
    names.iter().filter(|s| s.starts_with("raft.t")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_three_replicas_is_replicated_by_its_groups() {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    introduce(&nodes);
    host_tables(&nodes);
    let members: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    nodes[0]
        .raft
        .as_ref()
        .unwrap()
        .initialize(members)
        .await
        .unwrap();
    for cmd in first_entries() {
        assert!(propose(&nodes, &cmd).await.is_ok());
    }
    let c = nodes[1].cluster().clone();
    blocking(move || {
        c.db_create("d").unwrap();
        let opts = reql::TableOptions {
            primary_key: "id".into(),
            durability: reql::Durability::Hard,
            shards: 2,
            replicas: reql::Replicas::count(3),
        };
        c.table_create("d", "r", opts).unwrap();
    })
    .await;
    converge(&nodes, 5).await;

    // Writes through each node, to keys of both shards.
    for (i, id) in [(0usize, 1u32), (1, 2), (2, 3), (0, 4000), (2, 9999)] {
        let c = nodes[i].cluster().clone();
        let r = blocking(move || c.table("d", "r").unwrap().apply(put(id, "a"))).await;
        assert!(matches!(r, Ok(Applied::Done(None, Some(_), None))), "{r:?}");
    }
    for id in [1, 2, 3, 4000, 9999] {
        everywhere(&nodes, "r", id, Some(doc(id, "a"))).await;
    }
    // An insert of a key that exists conflicts, with the current document.
    let c = nodes[2].cluster().clone();
    let r = blocking(move || c.table("d", "r").unwrap().apply(put(1, "b"))).await;
    assert!(
        matches!(&r, Ok(Applied::Conflict(Some(d))) if *d == doc(1, "a")),
        "{r:?}"
    );
    // An index on a replicated table is refused for now, with a clear error.
    let c = nodes[0].cluster().clone();
    let err = blocking(move || {
        let spec = reql::IndexSpec {
            function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
            multi: false,
            geo: false,
        };
        c.table("d", "r").unwrap().index_create("v", spec)
    })
    .await
    .unwrap_err();
    assert!(err.message.contains("not supported yet"), "{}", err.message);
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
