//! `replication::Host` on loopback: three servers' hosts run a group opened on each and
//! bootstrapped on one; members close, reopen and leave; a group seeded from a space a
//! server already held reaches a member added later by snapshot; `Resolving` dials a
//! node at its current address, also behind `SharedTransport`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use replication::kv::{read_map, KvCommand, KvMachine};
use replication::testkit;
use replication::*;
use storage::{Engine, Memory, WriteBatch};

struct Server {
    host: Host<TcpTransport>,
    engine: Arc<dyn Engine>,
    addr: String,
}

async fn server(id: NodeId) -> Server {
    let peers = testkit::peers("host-test");
    let port = testkit::listen(peers.clone()).await;
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let host = Host::new(
        id,
        engine.clone(),
        port.router.clone(),
        testkit::transport(peers),
        testkit::config(None),
        Durability::Inline,
    );
    Server {
        host,
        engine,
        addr: port.addr,
    }
}

fn voters(servers: &[&Server]) -> BTreeMap<NodeId, Node> {
    servers
        .iter()
        .map(|s| (s.host.me(), Node::new(s.addr.clone())))
        .collect()
}

fn put(key: &str, value: &str) -> Command {
    Command(
        KvCommand::Put {
            key: key.into(),
            value: value.into(),
        }
        .encode()
        .unwrap(),
    )
}

fn state(s: &Server, prefix: &str) -> BTreeMap<String, String> {
    let spaces = state_spaces(&*s.engine, prefix, &[KvMachine::KIND.to_owned()]).unwrap();
    read_map(&*s.engine, &spaces[0]).unwrap_or_default()
}

/// Waits until `s`'s state of the group under `prefix` is `want`.
async fn converges(s: &Server, prefix: &str, want: &BTreeMap<String, String>) {
    for _ in 0..200 {
        if &state(s, prefix) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        &state(s, prefix),
        want,
        "node {} never converged",
        s.host.me()
    );
}

async fn leader_of(servers: &[&Server], g: GroupId) -> Arc<Proposer> {
    for _ in 0..200 {
        for s in servers {
            if let Some(m) = s.host.member(g) {
                if m.raft.current_leader().await == Some(s.host.me()) {
                    return m.proposer;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader of {g}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_on_three_hosts_replicates_closes_reopens_and_leaves() {
    let (a, b, c) = (server(11).await, server(22).await, server(33).await);
    let g = GroupId(5);
    let prefix = "raft.g5";
    for s in [&a, &b, &c] {
        s.host.open(g, prefix, KvMachine::default()).await.unwrap();
    }
    // A second member of one group on one server is refused.
    assert!(matches!(
        a.host.open(g, prefix, KvMachine::default()).await,
        Err(HostError::AlreadyOpen(_))
    ));
    assert!(a.host.bootstrap(g, voters(&[&a, &b, &c])).await.unwrap());
    // Bootstrapping again (or elsewhere) changes nothing.
    assert!(!a.host.bootstrap(g, voters(&[&a])).await.unwrap());
    let leader = leader_of(&[&a, &b, &c], g).await;
    leader.propose(put("k1", "v1")).await.unwrap();
    let want = BTreeMap::from([("k1".to_owned(), "v1".to_owned())]);
    for s in [&a, &b, &c] {
        converges(s, prefix, &want).await;
    }
    assert_eq!(a.host.groups(), vec![g]);

    // A member closed and reopened resumes from its storage and catches up.
    c.host.close(g).await.unwrap();
    assert!(c.host.member(g).is_none());
    let leader = leader_of(&[&a, &b], g).await;
    leader.propose(put("k2", "v2")).await.unwrap();
    c.host.open(g, prefix, KvMachine::default()).await.unwrap();
    let want = BTreeMap::from([
        ("k1".to_owned(), "v1".to_owned()),
        ("k2".to_owned(), "v2".to_owned()),
    ]);
    converges(&c, prefix, &want).await;

    // Removing a member drops its storage.
    c.host.remove(g).await.unwrap();
    let left: Vec<String> = c
        .engine
        .space_names()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("raft.g5."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(matches!(c.host.close(g).await, Err(HostError::NotOpen(_))));
    for s in [&a, &b, &c] {
        s.host.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_group_reaches_a_later_member_by_snapshot() {
    let (a, b) = (server(1).await, server(2).await);
    // State `a` held before the group existed.
    a.engine.create_space("old").unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..300 {
        batch.put("old", format!("key{i:03}"), format!("value{i}"));
    }
    a.engine.apply(batch).unwrap();
    let g = GroupId(9);
    let prefix = "raft.g9";
    let sources = [(KvMachine::KIND.to_owned(), "old".to_owned())];
    assert_eq!(seed(&*a.engine, prefix, &sources, 1024).unwrap(), 300);
    a.host.open(g, prefix, KvMachine::default()).await.unwrap();
    assert!(a.host.bootstrap(g, voters(&[&a])).await.unwrap());
    a.host.seal_seed(g, Duration::from_secs(10)).await.unwrap();
    // A group that applied something cannot be seeded again.
    assert!(matches!(
        seed(&*a.engine, prefix, &sources, 1024),
        Err(HostError::NotEmpty(_))
    ));

    let leader = leader_of(&[&a], g).await;
    leader.propose(put("after", "seed")).await.unwrap();
    b.host.open(g, prefix, KvMachine::default()).await.unwrap();
    let raft = a.host.member(g).unwrap().raft;
    raft.add_learner(b.host.me(), Node::new(b.addr.clone()), true)
        .await
        .unwrap();
    let mut want = state(&a, prefix);
    assert_eq!(want.len(), 301);
    assert_eq!(want.get("key042").map(String::as_str), Some("value42"));
    converges(&b, prefix, &want).await;
    // Promoted to voter, it takes part in commits.
    raft.change_membership([a.host.me(), b.host.me()], false)
        .await
        .unwrap();
    leader.propose(put("both", "voters")).await.unwrap();
    want.insert("both".into(), "voters".into());
    converges(&b, prefix, &want).await;
    a.host.shutdown().await;
    b.host.shutdown().await;
}

/// Knows where node 2 is now.
struct Moved(Arc<Mutex<Option<String>>>);

impl Resolve for Moved {
    fn address(&self, node: NodeId) -> Option<String> {
        (node == 2).then(|| self.0.lock().clone()).flatten()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolving_dials_the_current_address() {
    let b = server(2).await;
    b.host
        .open(GroupId(3), "raft.g3", KvMachine::default())
        .await
        .unwrap();
    b.host.bootstrap(GroupId(3), voters(&[&b])).await.unwrap();
    let now = Arc::new(Mutex::new(None));
    let t = Resolving::new(
        testkit::transport(testkit::peers("host-test")),
        Moved(now.clone()),
    );
    let stale = Node::new("127.0.0.1:1");
    let ask = || t.call(2, &stale, GroupId(3), RaftRequest::Service(vec![]));
    // Unknown to the resolver: the stale address is dialed, and fails.
    assert!(ask().await.is_err());
    *now.lock() = Some(b.addr.clone());
    // Known: the request reaches the node (which has no service: a refusal, not a
    // transport error).
    match ask().await {
        Ok(RaftResponse::Refused(_)) => {}
        other => panic!("{other:?}"),
    }
    b.host.shutdown().await;
}
