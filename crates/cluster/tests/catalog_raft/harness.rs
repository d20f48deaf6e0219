//! What the catalog tests share: nodes with a `Cluster` on the replicated catalog, its
//! group and its proposer; proposing, reading records, waiting for convergence.
#![allow(dead_code)]
pub use std::collections::BTreeMap;
pub use std::ops::Bound;
pub use std::sync::Arc;
pub use std::time::Duration;

pub use cluster::replica::RoutePolicy;
pub use cluster::replicated::{
    catalog_route, decode_reply, encode_command, space_kinds, Outcome, RaftProposer,
};
pub use cluster::system::ServerRecord;
pub use cluster::{
    CatalogCommand, Cluster, ClusterOptions, Credentials, IndexDefSpec, TableChanges, TableDef,
};
pub use proto::handshake::ScramCredentials;
pub use replication::*;
pub use reql::{ReqlError, TableAccess};
pub use serde_json::json;
pub use storage::{Engine, Memory};

pub type RaftMetrics = replication::openraft::RaftMetrics<NodeId, Node>;

pub const GROUP: GroupId = GroupId(0);
pub const PREFIX: &str = "raft.g0";

pub fn peers() -> PeerConfig {
    testkit::peers("replicated-catalog-test")
}

/// One node: its engine, listener and router outlive a stop of its Raft and Cluster.
pub struct TestNode {
    pub engine: Arc<dyn Engine>,
    pub router: Arc<Router>,
    pub addr: String,
    pub raft: Option<Raft>,
    pub cluster: Option<Arc<Cluster>>,
}

impl TestNode {
    pub fn cluster(&self) -> &Arc<Cluster> {
        self.cluster.as_ref().unwrap()
    }
}

/// Opens the node's `Cluster` and catalog group on its engine (again, after a stop).
pub async fn start_group(id: NodeId, node: &mut TestNode) {
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

pub async fn start_node(id: NodeId) -> TestNode {
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

pub async fn leader(nodes: &[TestNode]) -> &Raft {
    let members: Vec<Option<&Raft>> = nodes.iter().map(|n| n.raft.as_ref()).collect();
    testkit::leader(&members).await
}

pub async fn propose(nodes: &[TestNode], cmd: &CatalogCommand) -> Result<Outcome, ReqlError> {
    let raft = leader(nodes).await;
    let reply = raft
        .client_write(Command(encode_command(cmd)))
        .await
        .unwrap();
    decode_reply(&reply.data.0)
}

/// Every record of a node's catalog, by kind, read from the group's current spaces.
pub fn records(n: &TestNode) -> Vec<(String, Vec<u8>, Vec<u8>)> {
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
pub fn served(c: &Cluster) -> Vec<String> {
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
pub async fn converge(nodes: &[TestNode], n: usize) -> Vec<String> {
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

pub fn creds(password: &str) -> Credentials {
    let mut rng = proto::handshake::OsRandom;
    (&ScramCredentials::generate(password, &mut rng)).into()
}

pub fn table(id: &str, db_id: &str, name: &str) -> CatalogCommand {
    CatalogCommand::CreateTable {
        table: TableDef::new(id, db_id, name),
    }
}

/// The group's first entries: what a single server creates on a new directory.
pub fn first_entries() -> [CatalogCommand; 2] {
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

/// A number field of a write's answer.
pub fn count(answer: &datum::Datum, field: &str) -> Option<f64> {
    answer.as_object()?.get(field)?.as_f64()
}

/// Runs `f` on a thread outside the runtime, as an evaluation thread runs a query.
pub async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// The other nodes, as a membership layer would report them.
pub struct Peers(pub Vec<ServerRecord>);

impl cluster::system::Membership for Peers {
    fn peers(&self) -> Vec<ServerRecord> {
        self.0.clone()
    }
    fn connected_to(&self) -> BTreeMap<String, bool> {
        self.0.iter().map(|r| (r.name.clone(), true)).collect()
    }
    fn configure(&self, _: &str, _: &str, _: &[String]) -> Result<(), String> {
        Err("not in this test".into())
    }
    fn heartbeat_written(&self, _: f64) {}
    fn peer_stats(&self) -> Vec<cluster::system::ServerStats> {
        Vec::new()
    }
    fn names(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|r| (r.id.clone(), r.name.clone()))
            .collect()
    }
}

/// Gives every node's `Cluster` the others as its connected peers.
pub fn introduce(nodes: &[TestNode]) {
    let records: Vec<ServerRecord> = nodes.iter().map(|n| n.cluster().local_record()).collect();
    for (i, n) in nodes.iter().enumerate() {
        let others = records.iter().enumerate().filter(|(j, _)| *j != i);
        let peers = Peers(others.map(|(_, r)| r.clone()).collect());
        n.cluster().set_membership(Arc::new(peers));
    }
}

/// Three nodes whose catalog group is initialised with all three as voters.
pub async fn three_nodes() -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    let members: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    let first = nodes[0].raft.as_ref().unwrap();
    first.initialize(members).await.unwrap();
    nodes
}

/// Proposes the catalog's first entries (database `test`, user `admin`).
pub async fn write_first_entries(nodes: &[TestNode]) {
    for cmd in first_entries() {
        assert!(propose(nodes, &cmd).await.is_ok());
    }
}

/// An index on field `v`.
pub fn v_index() -> reql::IndexSpec {
    reql::IndexSpec {
        function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
        multi: false,
        geo: false,
    }
}

/// `table_create` options: `shards` shards of `replicas` replicas, hard durability.
pub fn opts(shards: u32, replicas: u32) -> reql::TableOptions {
    reql::TableOptions {
        primary_key: "id".into(),
        durability: reql::Durability::Hard,
        shards,
        replicas: reql::Replicas::count(replicas),
    }
}
