//! The catalog replicated by a 3-node Raft group (in-memory engines, loopback TCP),
//! each node a `Cluster` following it (`Cluster::open_replicated`): catalog commands
//! proposed to the leader leave byte-identical catalogs on every node, and every node
//! opens, renames and drops the tables and registers the indexes; an invalid command
//! gets the error a single server gives; a node stopped while the others went on (and
//! purged their logs) catches up from a snapshot, with the same catalog and tables.
//! Through `TableAccess` on any node (the catalog's `RaftProposer`), `db_create`,
//! `table_create`, `index_create`, `index_rename`, `table_drop` and `db_drop` change
//! every node's catalog, with a single server's answers and errors.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use cluster::replica::RoutePolicy;
use cluster::replicated::{
    catalog_route, decode_reply, encode_command, space_kinds, Outcome, RaftProposer,
};
use cluster::{
    CatalogCommand, Cluster, ClusterOptions, Credentials, IndexDefSpec, TableChanges, TableDef,
};
use proto::handshake::ScramCredentials;
use replication::*;
use reql::{ReqlError, TableAccess};
use serde_json::json;
use storage::{Engine, Memory};

type RaftMetrics = replication::openraft::RaftMetrics<NodeId, Node>;

const GROUP: GroupId = GroupId(0);
const PREFIX: &str = "raft.g0";

fn peers() -> PeerConfig {
    testkit::peers("replicated-catalog-test")
}

/// One node: its engine, listener and router outlive a stop of its Raft and Cluster.
struct TestNode {
    engine: Arc<dyn Engine>,
    router: Arc<Router>,
    addr: String,
    raft: Option<Raft>,
    cluster: Option<Arc<Cluster>>,
}

impl TestNode {
    fn cluster(&self) -> &Arc<Cluster> {
        self.cluster.as_ref().unwrap()
    }
}

/// Opens the node's `Cluster` and catalog group on its engine (again, after a stop).
async fn start_group(id: NodeId, node: &mut TestNode) {
    let engine = node.engine.clone();
    let (cluster, machine) = Cluster::open_replicated(
        engine.clone(),
        ClusterOptions::new(&format!("s{id}")),
        PREFIX,
    )
    .unwrap();
    let transport = testkit::transport(peers());
    let config = testkit::config(Some(10));
    let member = testkit::Member {
        id,
        group: GROUP,
        prefix: PREFIX,
        engine,
        transport: transport.clone(),
        config: config.clone(),
        chunk_bytes: Some(256),
    };
    let raft = member.open(machine, &node.router).await;
    let client = ClientPolicy::for_config(&config, Duration::from_secs(5));
    let route = catalog_route(
        GROUP,
        raft.clone(),
        transport,
        RoutePolicy::default(),
        client,
    );
    route.register(&node.router);
    let runtime = tokio::runtime::Handle::current();
    assert!(cluster.set_catalog_proposer(Arc::new(RaftProposer::new(Arc::new(route), runtime))));
    node.raft = Some(raft);
    node.cluster = Some(cluster);
}

async fn start_node(id: NodeId) -> TestNode {
    let testkit::Port { router, addr } = testkit::listen(peers()).await;
    let mut node = TestNode {
        engine: Arc::new(Memory::new()),
        router,
        addr,
        raft: None,
        cluster: None,
    };
    start_group(id, &mut node).await;
    node
}

async fn leader(nodes: &[TestNode]) -> &Raft {
    let members: Vec<Option<&Raft>> = nodes.iter().map(|n| n.raft.as_ref()).collect();
    testkit::leader(&members).await
}

async fn propose(nodes: &[TestNode], cmd: &CatalogCommand) -> Result<Outcome, ReqlError> {
    let raft = leader(nodes).await;
    let reply = raft
        .client_write(Command(encode_command(cmd)))
        .await
        .unwrap();
    decode_reply(&reply.data.0)
}

/// Every record of a node's catalog, by kind, read from the group's current spaces.
fn records(n: &TestNode) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let kinds = space_kinds();
    let spaces = state_spaces(&*n.engine, PREFIX, &kinds).unwrap();
    let snap = n.engine.snapshot();
    let mut out = Vec::new();
    for (kind, space) in kinds.iter().zip(&spaces) {
        for kv in snap
            .range(space, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
        {
            let (k, v) = kv.unwrap();
            out.push((kind.clone(), k.to_vec(), v.to_vec()));
        }
    }
    out
}

/// What a node's `Cluster` serves: databases, tables per database with their indexes.
fn served(c: &Cluster) -> Vec<String> {
    let mut out = Vec::new();
    for db in c.db_list().unwrap() {
        for t in c.table_list(&db).unwrap() {
            if db == "rethinkdb" {
                continue;
            }
            let h = c.table(&db, &t).unwrap();
            let idx: Vec<String> = h
                .index_status()
                .unwrap()
                .into_iter()
                .map(|s| s.name)
                .collect();
            out.push(format!("{db}.{t}{idx:?}"));
        }
        out.push(db);
    }
    out
}

/// Waits until every running node has the same records (`n` of them) and serves the
/// same tables; returns what they serve.
async fn converge(nodes: &[TestNode], n: usize) -> Vec<String> {
    for _ in 0..200 {
        let recs: Vec<_> = nodes.iter().map(records).collect();
        let serve: Vec<_> = nodes.iter().map(|n| served(n.cluster())).collect();
        if recs[0].len() == n
            && recs.iter().all(|r| *r == recs[0])
            && serve.iter().all(|s| *s == serve[0])
        {
            return serve.into_iter().next().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recs: Vec<_> = nodes.iter().map(|n| records(n).len()).collect();
    let serve: Vec<_> = nodes.iter().map(|n| served(n.cluster())).collect();
    panic!("the catalogs did not converge on {n} records: {recs:?} {serve:#?}");
}

fn creds(password: &str) -> Credentials {
    let mut rng = proto::handshake::OsRandom;
    (&ScramCredentials::generate(password, &mut rng)).into()
}

fn table(id: &str, db_id: &str, name: &str) -> CatalogCommand {
    CatalogCommand::CreateTable {
        table: TableDef {
            id: id.into(),
            db_id: db_id.into(),
            name: name.into(),
            primary_key: "id".into(),
            durability: "hard".into(),
            shards: 1,
            replicas: 1,
            split_points: vec![],
        },
    }
}

/// The group's first entries: what a single server creates on a new directory.
fn first_entries() -> [CatalogCommand; 2] {
    [
        CatalogCommand::CreateDb {
            id: "00000000-0000-0000-0000-000000000001".into(),
            name: "test".into(),
        },
        CatalogCommand::PutUser {
            name: "admin".into(),
            credentials: creds(""),
            has_password: false,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_catalog_converges_and_a_stopped_node_catches_up_by_snapshot() {
    use CatalogCommand as C;
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
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

    let first = first_entries();
    let commands = [
        C::CreateDb {
            id: "d1".into(),
            name: "d".into(),
        },
        table("t1", "d1", "t"),
        table("t2", "d1", "gone"),
        C::CreateIndex {
            table: "t1".into(),
            index: "i1".into(),
            name: "v".into(),
            spec: IndexDefSpec {
                function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
                multi: false,
                geo: false,
            },
        },
        C::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("u".into()),
                ..Default::default()
            },
        },
        C::RenameIndex {
            table: "t1".into(),
            old: "v".into(),
            new: "w".into(),
            overwrite: false,
        },
        C::DropTable { id: "t2".into() },
        C::PutUser {
            name: "bob".into(),
            credentials: creds("pw"),
            has_password: true,
        },
        C::SetPermissions {
            user: "bob".into(),
            scope: cluster::auth::Scope::Table("t1".into()),
            perms: cluster::auth::Perms {
                read: Some(true),
                ..Default::default()
            },
        },
    ];
    for cmd in first.iter().chain(&commands) {
        let r = propose(&nodes, cmd).await;
        assert!(r.is_ok(), "{cmd:?}: {r:?}");
    }
    // A duplicate name: the error a single server gives, and nothing changes.
    let single = Cluster::open(Arc::new(Memory::new()), "single").unwrap();
    single.db_create("d").unwrap();
    let expected = single.db_create("d").unwrap_err();
    let dup = C::CreateDb {
        id: "d2".into(),
        name: "d".into(),
    };
    let err = propose(&nodes, &dup).await.unwrap_err();
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    let opts = || reql::TableOptions {
        primary_key: "id".into(),
        durability: reql::Durability::Hard,
        shards: 1,
        replicas: reql::Replicas::count(1),
    };
    single.table_create("d", "u", opts()).unwrap();
    let expected = single.table_create("d", "u", opts()).unwrap_err();
    let err = propose(&nodes, &table("t9", "d1", "u")).await.unwrap_err();
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    single.shutdown();

    // db d and test, table u, the format record; users admin and bob.
    let serve = converge(&nodes, 6).await;
    assert_eq!(serve, ["d.u[\"w\"]", "d", "rethinkdb", "test"]);
    for n in &nodes {
        let c = n.cluster();
        assert!(c.table("d", "gone").is_err());
        assert_eq!(c.follow_failures(), 0);
    }

    // Stop a follower (its Cluster too, as a process would); the others go on past a
    // snapshot that purges their logs.
    let leader_id = leader(&nodes).await.current_leader().await.unwrap();
    let stopped = (1..=3u64).find(|&id| id != leader_id).unwrap();
    let n = &mut nodes[stopped as usize - 1];
    n.router.remove_group(GROUP);
    n.raft.take().unwrap().shutdown().await.unwrap();
    n.cluster.take().unwrap().shutdown();
    let spaces_before = state_spaces(&*n.engine, PREFIX, &space_kinds()).unwrap();
    for i in 0..15 {
        let r = propose(&nodes, &table(&format!("x{i}"), "d1", &format!("x{i}"))).await;
        assert!(r.is_ok(), "{r:?}");
    }
    for i in 0..10 {
        assert!(propose(
            &nodes,
            &C::DropTable {
                id: format!("x{i}")
            }
        )
        .await
        .is_ok());
    }
    let more = [
        C::RenameDb {
            id: "d1".into(),
            name: "e".into(),
        },
        C::DeleteUser { name: "bob".into() },
        C::SetWriteHook {
            table: "t1".into(),
            function: Some(json!([69, [[2, [1, 2, 3]], [10, [3]]]])),
        },
    ];
    for cmd in &more {
        assert!(propose(&nodes, cmd).await.is_ok(), "{cmd:?}");
    }
    let raft = leader(&nodes).await;
    let wait = raft.wait(Some(Duration::from_secs(10)));
    let purged = |m: &RaftMetrics| m.purged.is_some_and(|p| p.index > 20);
    wait.metrics(purged, "the log purged").await.unwrap();

    // Restarted on its engine (its log ends before the purge): sent the snapshot. Its
    // Cluster opened the stale catalog; the install moves it and reconciles its tables.
    start_group(stopped, &mut nodes[stopped as usize - 1]).await;
    let serve = converge(&nodes, 10).await;
    let mut expected: Vec<String> = (10..15).map(|i| format!("e.x{i}[]")).collect();
    expected.insert(0, "e.u[\"w\"]".into());
    expected.extend(["e", "rethinkdb", "test"].map(String::from));
    let mut serve_sorted = serve.clone();
    serve_sorted.sort();
    expected.sort();
    assert_eq!(serve_sorted, expected);
    let n = &nodes[stopped as usize - 1];
    let spaces_after = state_spaces(&*n.engine, PREFIX, &space_kinds()).unwrap();
    assert_ne!(spaces_after, spaces_before, "not caught up by a snapshot");
    let restarted = n.cluster();
    assert_eq!(restarted.follow_failures(), 0);
    assert!(restarted.table("d", "u").is_err());
    for n in &nodes {
        let hook = n.cluster().table("e", "u").unwrap().write_hook().unwrap();
        assert!(hook.is_some(), "the write hook is not followed");
    }

    for n in &nodes {
        n.raft.as_ref().unwrap().shutdown().await.unwrap();
        n.cluster().shutdown();
    }
}

/// A number field of a write's answer.
fn count(answer: &datum::Datum, field: &str) -> Option<f64> {
    answer.as_object()?.get(field)?.as_f64()
}

/// Runs `f` on a thread outside the runtime, as an evaluation thread runs a query.
async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_access_on_any_node_changes_every_nodes_catalog() {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    let members: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    let first = nodes[0].raft.as_ref().unwrap();
    first.initialize(members).await.unwrap();
    for cmd in first_entries() {
        assert!(propose(&nodes, &cmd).await.is_ok());
    }
    let leader_id = leader(&nodes).await.current_leader().await.unwrap();
    let follower = (1..=3u64).find(|&id| id != leader_id).unwrap() as usize - 1;
    let on = |i: usize| nodes[i].cluster().clone();
    let opts = || reql::TableOptions {
        primary_key: "id".into(),
        durability: reql::Durability::Hard,
        shards: 1,
        replicas: reql::Replicas::count(1),
    };
    let single = Cluster::open(Arc::new(Memory::new()), "single").unwrap();

    // Through a follower: forwarded to the leader, and applied here before the answer.
    let c = on(follower);
    let (created, listed) = blocking(move || {
        let created = c.db_create("d").unwrap();
        (created, c.db_list().unwrap())
    })
    .await;
    assert_eq!(count(&created, "dbs_created"), Some(1.0));
    assert!(listed.contains(&"d".to_string()), "{listed:?}");
    let c = on(follower);
    let t = blocking(move || {
        c.table_create("d", "t", opts())
            .map(|_| c.table("d", "t").is_ok())
    })
    .await;
    assert_eq!(t, Ok(true));

    // Errors are a single server's, through any node.
    single.db_create("d").unwrap();
    single.table_create("d", "t", opts()).unwrap();
    let expected = single.table_create("d", "t", opts()).unwrap_err();
    for i in 0..3 {
        let c = on(i);
        let err = blocking(move || c.table_create("d", "t", opts()).unwrap_err()).await;
        assert_eq!(
            (&err.kind, &err.message),
            (&expected.kind, &expected.message)
        );
    }
    let expected = single.db_create("d").unwrap_err();
    let c = on(2);
    let err = blocking(move || c.db_create("d").unwrap_err()).await;
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    single.shutdown();

    // An index created through one node, renamed through another: on every node.
    let c = on(0);
    blocking(move || {
        let spec = reql::IndexSpec {
            function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
            multi: false,
            geo: false,
        };
        c.table("d", "t").unwrap().index_create("v", spec)
    })
    .await
    .unwrap();
    let c = on(1);
    blocking(move || c.table("d", "t").unwrap().index_rename("v", "w", false))
        .await
        .unwrap();
    let c = on(2);
    blocking(move || c.table_create("d", "gone", opts()).map(|_| ()))
        .await
        .unwrap();
    let serve = converge(&nodes, 6).await;
    assert_eq!(serve, ["d.gone[]", "d.t[\"w\"]", "d", "rethinkdb", "test"]);

    let c = on(follower);
    let dropped = blocking(move || c.table_drop("d", "gone")).await.unwrap();
    assert_eq!(count(&dropped, "tables_dropped"), Some(1.0));
    let serve = converge(&nodes, 5).await;
    assert_eq!(serve, ["d.t[\"w\"]", "d", "rethinkdb", "test"]);
    let c = on(leader_id as usize - 1);
    blocking(move || c.db_drop("d")).await.unwrap();
    let serve = converge(&nodes, 3).await;
    assert_eq!(serve, ["rethinkdb", "test"]);
    for n in &nodes {
        assert_eq!(n.cluster().follow_failures(), 0);
    }
}
