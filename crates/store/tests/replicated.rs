//! A shard replicated by a 3-node Raft group (in-memory engines, loopback TCP): writes
//! proposed to the leader, with conflicts and a secondary index, leave the same
//! documents, index entries and counts on every replica; a malformed command is
//! refused; a follower that was stopped while the others went on (and purged their log)
//! catches up from a snapshot and ends with the same state, counts included.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use datum::{Datum, Version};

type RaftMetrics = replication::openraft::RaftMetrics<NodeId, Node>;
use replication::*;
use storage::{Engine, Memory};
use store::{
    decode_reply, encode_command, track_entries, Applied, CacheBudget, GroupCommit, KeyRange,
    ReplicaIndex, ReplicaOptions, ReplyError, SecondaryIndex, Shard, ShardMachine, StoreChange,
};

const GROUP: GroupId = GroupId(3);
const PREFIX: &str = "raft.g3";

mod common;
use common::Field;

/// One node: its engine, listener and router outlive a stop of its Raft.
struct TestNode {
    engine: Arc<dyn Engine>,
    router: Arc<Router>,
    addr: String,
    raft: Option<Raft>,
    shard: Option<Arc<Shard>>,
    index: Option<Arc<SecondaryIndex>>,
}

impl TestNode {
    fn shard(&self) -> &Arc<Shard> {
        self.shard.as_ref().unwrap()
    }
}

/// Opens the node's group on its engine (again, after a stop) and registers it.
async fn start_group(id: NodeId, node: &mut TestNode) {
    let engine = node.engine.clone();
    let opts = ReplicaOptions {
        prefix: PREFIX.into(),
        commit: GroupCommit::start(engine.clone()),
        cache: CacheBudget::default(),
        feeds: changefeed::Hub::new(),
        range: KeyRange::all(),
        indexes: vec![ReplicaIndex {
            id: "v".into(),
            func: Arc::new(Field),
            multi: false,
        }],
    };
    let machine = ShardMachine::open(engine.clone(), opts).unwrap();
    let (shard, index) = (machine.shard().clone(), machine.index("v").unwrap().clone());
    track_entries(std::slice::from_ref(&shard), &index).unwrap();
    let member = testkit::Member {
        id,
        group: GROUP,
        prefix: PREFIX,
        engine,
        transport: testkit::transport(peers()),
        config: testkit::config(Some(20)),
        chunk_bytes: Some(512),
    };
    node.raft = Some(member.open(machine, &node.router).await);
    node.shard = Some(shard);
    node.index = Some(index);
}

/// The cluster port's settings of every node: plain TCP, one cluster.
fn peers() -> PeerConfig {
    testkit::peers("replicated-shard-test")
}

async fn start_node(id: NodeId) -> TestNode {
    let testkit::Port { router, addr } = testkit::listen(peers()).await;
    let mut node = TestNode {
        engine: Arc::new(Memory::new()),
        router,
        addr,
        raft: None,
        shard: None,
        index: None,
    };
    start_group(id, &mut node).await;
    node
}

/// Everything a replica holds: documents, index entries (value, primary key,
/// document), and the counts kept in memory.
#[derive(Debug, PartialEq)]
struct State {
    docs: Vec<String>,
    entries: Vec<(Vec<u8>, Vec<u8>, String)>,
    count: u64,
    entry_count: Option<u64>,
    unkeyed: Option<[u64; 3]>,
    sample: Vec<Vec<u8>>,
}

fn state(n: &TestNode) -> State {
    let (shard, index) = (n.shard(), n.index.as_ref().unwrap());
    let docs = shard
        .scan(Bound::Unbounded, Bound::Unbounded, false)
        .unwrap();
    let docs = docs.map(|d| d.unwrap().to_json_string()).collect();
    let pairs = shard
        .index_pairs(index, &Bound::Unbounded, &Bound::Unbounded, false)
        .unwrap();
    let entries = pairs
        .map(|p| {
            let (e, d) = p.unwrap();
            (e.value().to_vec(), e.pk().to_vec(), d.to_json_string())
        })
        .collect();
    State {
        docs,
        entries,
        count: shard.count(),
        entry_count: index.entry_count(),
        unkeyed: index.unkeyed_counts(),
        sample: shard.sampled_keys(),
    }
}

async fn leader(nodes: &[TestNode]) -> &Raft {
    let members: Vec<Option<&Raft>> = nodes.iter().map(|n| n.raft.as_ref()).collect();
    testkit::leader(&members).await
}

/// Proposes a command to the leader; the decoded reply.
async fn propose(nodes: &[TestNode], command: Vec<u8>) -> Result<Applied, ReplyError> {
    let raft = leader(nodes).await;
    let reply = raft.client_write(Command(command)).await.unwrap();
    decode_reply(&reply.data.0)
}

fn doc(id: u32, v: &str) -> Datum {
    datum::from_json_slice(format!("{{\"id\":{id},\"v\":{v}}}").as_bytes()).unwrap()
}

fn put(id: u32, v: &str, expect: Option<Version>) -> Vec<u8> {
    let key = Datum::Number(f64::from(id));
    encode_command(&key, expect, &StoreChange::Put(doc(id, v))).unwrap()
}

fn delete(id: u32) -> Vec<u8> {
    encode_command(&Datum::Number(f64::from(id)), None, &StoreChange::Delete).unwrap()
}

async fn converge(nodes: &[TestNode], docs: usize) -> State {
    for _ in 0..200 {
        let states: Vec<State> = nodes.iter().map(state).collect();
        if states[0].docs.len() == docs && states.iter().all(|s| *s == states[0]) {
            return states.into_iter().next().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let states: Vec<State> = nodes.iter().map(state).collect();
    panic!("replicas did not converge on {docs} documents: {states:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_shard_converges_and_a_stopped_follower_catches_up_by_snapshot() {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    let members: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    let first = nodes[0].raft.as_ref().unwrap();
    first.initialize(members).await.unwrap();

    for i in 0..30 {
        let r = propose(&nodes, put(i, &(i % 4).to_string(), Some(Version::ABSENT))).await;
        assert!(
            matches!(r, Ok(Applied::Done((None, Some(_), None)))),
            "{r:?}"
        );
    }
    // A document without the indexed field has no entry.
    let bare = Datum::from_pairs([("id", Datum::Number(30.0))]);
    let key = Datum::Number(30.0);
    let command = encode_command(&key, None, &StoreChange::Put(bare)).unwrap();
    let r = propose(&nodes, command).await;
    assert!(r.is_ok());
    // An insert of an existing key, and an update from a stale version, conflict.
    let r = propose(&nodes, put(0, "9", Some(Version::ABSENT))).await;
    assert!(
        matches!(&r, Ok(Applied::Conflict(Some(c))) if *c == doc(0, "0")),
        "{r:?}"
    );
    let stale = Some(Version::of(Some(&doc(1, "5"))));
    let r = propose(&nodes, put(1, "7", stale)).await;
    assert!(matches!(r, Ok(Applied::Conflict(_))), "{r:?}");
    let seen = Some(Version::of(Some(&doc(1, "1"))));
    let r = propose(&nodes, put(1, "7", seen)).await;
    assert!(matches!(&r, Ok(Applied::Done((Some(o), Some(_), None))) if *o == doc(1, "1")));
    let r = propose(&nodes, delete(2)).await;
    assert!(
        matches!(r, Ok(Applied::Done((Some(_), None, None)))),
        "{r:?}"
    );
    // A malformed command is refused, and changes nothing.
    let r = propose(&nodes, b"not a command".to_vec()).await;
    assert!(matches!(r, Err(ReplyError::Refused(_))), "{r:?}");

    let s = converge(&nodes, 30).await;
    assert_eq!(s.count, 30);
    assert_eq!((s.entries.len(), s.entry_count), (29, Some(29)));
    assert_eq!(
        s.entries
            .iter()
            .filter(|e| e.2.contains(r#""v":7"#))
            .count(),
        1
    );

    // Stop a follower; the others go on past a snapshot that purges their logs.
    let leader_id = leader(&nodes).await.current_leader().await.unwrap();
    let stopped = (1..=3u64).find(|&id| id != leader_id).unwrap();
    let n = &mut nodes[stopped as usize - 1];
    n.router.remove_group(GROUP);
    n.raft.take().unwrap().shutdown().await.unwrap();
    let spaces_before = n.shard().space();
    for i in 100..160 {
        let r = propose(&nodes, put(i, &(i % 5).to_string(), Some(Version::ABSENT))).await;
        assert!(r.is_ok(), "{r:?}");
    }
    for i in 3..13 {
        assert!(propose(&nodes, delete(i)).await.is_ok());
    }
    // The leader purges its log past the stopped node's once no replication uses it.
    let raft = leader(&nodes).await;
    let wait = raft.wait(Some(Duration::from_secs(10)));
    let purged = |m: &RaftMetrics| m.purged.is_some_and(|p| p.index > 60);
    wait.metrics(purged, "the log purged").await.unwrap();

    // Restarted on its engine (its log ends before the purge): sent the snapshot. Its
    // shard opened on the stale state; the install moves it and rebuilds its counts.
    start_group(stopped, &mut nodes[stopped as usize - 1]).await;
    let s = converge(&nodes, 80).await;
    assert_ne!(nodes[stopped as usize - 1].shard().space(), spaces_before);
    assert_eq!(
        (s.count, s.entries.len(), s.entry_count),
        (80, 79, Some(79))
    );

    for n in &nodes {
        n.raft.as_ref().unwrap().shutdown().await.unwrap();
    }
}
