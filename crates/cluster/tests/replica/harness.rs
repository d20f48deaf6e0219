//! The test harness: 3 nodes of one group on loopback TCP, each with its
//! `ReplicatedShard`, and a transport that counts client requests and can lose the
//! answer of a forwarded proposal or leave calls unanswered (a paused server).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cluster::replica::{ReadMode, ReplicatedShard, RouteError, RoutePolicy};
use datum::{Datum, Version};
use replication::openraft::Config;
use replication::*;
use storage::{Engine, Memory};
use store::{
    Applied, CacheBudget, GroupCommit, KeyRange, ReplicaOptions, ShardMachine, StoreChange,
};

pub const GROUP: GroupId = GroupId(7);
pub const PREFIX: &str = "raft.g7";

pub fn config() -> Arc<Config> {
    testkit::config(None)
}

pub fn peers() -> PeerConfig {
    testkit::peers("replica-routing-test")
}

/// The TCP transport, counting the client requests it sends; with `drop_answers` set,
/// a forwarded proposal is delivered but its answer is thrown away (the leader "died"
/// after applying it). With `silent` set every call it makes never answers, and so
/// does every call to node `silent_to` (0: none): a paused server, TCP still open.
pub struct Faulty {
    inner: TcpTransport,
    pub client_calls: AtomicUsize,
    pub drop_answers: AtomicBool,
    pub silent: AtomicBool,
    pub silent_to: AtomicU64,
}

impl Transport for Faulty {
    async fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        let propose = matches!(request, RaftRequest::Client(ClientRequest::Propose(_)));
        if matches!(request, RaftRequest::Client(_)) {
            self.client_calls.fetch_add(1, Ordering::SeqCst);
        }
        if self.silent.load(Ordering::SeqCst) || self.silent_to.load(Ordering::SeqCst) == target {
            return std::future::pending().await;
        }
        let answer = self.inner.call(target, node, group, request).await;
        if propose && self.drop_answers.load(Ordering::SeqCst) {
            return Err(TransportError::Closed);
        }
        answer
    }
}

pub struct TestNode {
    pub id: NodeId,
    router: Arc<Router>,
    addr: String,
    pub transport: Arc<Faulty>,
    pub handle: Option<ReplicatedShard<Faulty>>,
}

impl TestNode {
    pub fn h(&self) -> &ReplicatedShard<Faulty> {
        self.handle.as_ref().unwrap()
    }

    /// Stops this node's member of the group (its listener stays, refusing the group).
    pub async fn stop(&mut self) {
        self.router.remove_group(GROUP);
        let h = self.handle.take().unwrap();
        h.raft().unwrap().shutdown().await.unwrap();
    }
}

pub async fn start_node(id: NodeId, deadline: Duration, client: ClientPolicy) -> TestNode {
    let testkit::Port { router, addr } = testkit::listen(peers()).await;
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let opts = ReplicaOptions {
        prefix: PREFIX.into(),
        commit: GroupCommit::start(engine.clone()),
        cache: CacheBudget::default(),
        feeds: changefeed::Hub::new(),
        range: KeyRange::all(),
        indexes: vec![],
    };
    let machine = ShardMachine::open(engine.clone(), opts).unwrap();
    let shard = machine.shard().clone();
    let transport = Arc::new(Faulty {
        inner: TcpTransport::new(peers(), Duration::from_secs(1)),
        client_calls: AtomicUsize::new(0),
        drop_answers: AtomicBool::new(false),
        silent: AtomicBool::new(false),
        silent_to: AtomicU64::new(0),
    });
    let member = testkit::Member {
        id,
        group: GROUP,
        prefix: PREFIX,
        engine,
        transport: transport.clone(),
        config: config(),
        chunk_bytes: None,
    };
    let raft = member.open(machine, &router).await;
    let policy = RoutePolicy {
        deadline,
        ..RoutePolicy::default()
    };
    let handle = ReplicatedShard::new(
        GROUP,
        replication::Proposer::new(raft),
        shard,
        "id",
        transport.clone(),
        policy,
        client,
    );
    handle.register(&router);
    TestNode {
        id,
        router,
        addr,
        transport,
        handle: Some(handle),
    }
}

/// The client policy of the group's configuration (a commit timeout of 2 s).
pub fn client_policy() -> ClientPolicy {
    ClientPolicy::for_config(&config(), Duration::from_secs(2))
}

pub async fn start_group(deadline: Duration, client: ClientPolicy) -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, deadline, client).await);
    }
    let members: BTreeMap<NodeId, Node> = nodes
        .iter()
        .map(|n| (n.id, Node::new(n.addr.clone())))
        .collect();
    nodes[0]
        .h()
        .raft()
        .unwrap()
        .initialize(members)
        .await
        .unwrap();
    nodes
}

/// The index (in `nodes`) of the leader every running member agrees on.
pub async fn leader(nodes: &[TestNode]) -> usize {
    for _ in 0..200 {
        let running: Vec<&TestNode> = nodes.iter().filter(|n| n.handle.is_some()).collect();
        let mut seen = Vec::new();
        for n in &running {
            seen.push(n.h().raft().unwrap().current_leader().await);
        }
        if let Some(Some(l)) = seen.first().copied() {
            let agreed = seen.iter().all(|s| *s == Some(l));
            if let Some(i) = nodes.iter().position(|n| n.id == l && n.handle.is_some()) {
                if agreed
                    && nodes[i]
                        .h()
                        .raft()
                        .unwrap()
                        .ensure_linearizable()
                        .await
                        .is_ok()
                {
                    return i;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader");
}

pub fn doc(id: u32, v: &str) -> Datum {
    datum::from_json_slice(format!("{{\"id\":{id},\"v\":\"{v}\"}}").as_bytes()).unwrap()
}

pub fn key(id: u32) -> Datum {
    Datum::Number(f64::from(id))
}

pub async fn insert(h: &ReplicatedShard<Faulty>, id: u32, v: &str) -> Result<Applied, RouteError> {
    h.apply(
        &key(id),
        Some(Version::ABSENT),
        &StoreChange::Put(doc(id, v)),
    )
    .await
}

/// Waits until the local replica of `n` holds `d` under `id`.
pub async fn replicated(n: &TestNode, id: u32, d: &Datum) {
    for _ in 0..100 {
        if n.h().shard().unwrap().get(&key(id)).unwrap().as_ref() == Some(d) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("node {} did not get document {id}", n.id);
}

pub async fn collect(
    h: &ReplicatedShard<Faulty>,
    mode: ReadMode,
    lower: Bound<Datum>,
    upper: Bound<Datum>,
    reverse: bool,
) -> Vec<u32> {
    let mut range = h.range(mode, lower, upper, reverse, 7);
    let mut ids = Vec::new();
    while let Some(batch) = range.next_batch().await.unwrap() {
        assert!(!batch.is_empty() && batch.len() <= 7, "{}", batch.len());
        ids.extend(
            batch
                .iter()
                .map(|d| d.get("id").unwrap().as_f64().unwrap() as u32),
        );
    }
    ids
}
