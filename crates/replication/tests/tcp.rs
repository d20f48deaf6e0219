//! The TCP transport on loopback: two groups share one connection per peer, a node
//! added later catches up from a snapshot streamed in chunks, and leadership moves
//! between the nodes (leader transfer) under a write load.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use replication::kv::{read_map, KvCommand, KvMachine};
use replication::openraft::Config;
use replication::*;
use std::sync::atomic::{AtomicBool, Ordering};
use storage::{Engine, Memory};
use tokio::net::TcpListener;

/// Binds a free loopback port (the nodes learn each other's addresses after binding).
async fn bind() -> (TcpListener, String) {
    let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

struct TestNode {
    engine: Arc<dyn Engine>,
    transport: Arc<TcpTransport>,
    rafts: HashMap<GroupId, Raft>,
    addr: String,
}

fn config() -> Arc<Config> {
    testkit::config(Some(20))
}

async fn start_node(id: NodeId, groups: &[GroupId]) -> TestNode {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let peers = testkit::peers("tcp-test");
    let transport = Arc::new(TcpTransport::new(peers.clone(), Duration::from_secs(2)));
    let router = Arc::new(Router::new());
    let mut rafts = HashMap::new();
    for &g in groups {
        let prefix = format!("raft.{g}");
        let log = LogStore::open(engine.clone(), &prefix, Durability::Inline).unwrap();
        let sm = StateMachineStore::open(
            engine.clone(),
            &prefix,
            KvMachine::default(),
            Durability::Inline,
        )
        .unwrap();
        let network = Network::new(transport.clone(), g).with_chunk_bytes(256);
        let raft = Raft::new(id, config(), network, log, sm).await.unwrap();
        router.add_group(g, raft.clone());
        rafts.insert(g, raft);
    }
    let (listener, addr) = bind().await;
    tokio::spawn(serve_tcp(listener, router, peers));
    TestNode {
        engine,
        transport,
        rafts,
        addr,
    }
}

fn map_of(node: &TestNode, g: GroupId) -> BTreeMap<String, String> {
    let prefix = format!("raft.{g}");
    let spaces = state_spaces(&*node.engine, &prefix, &[KvMachine::KIND.to_owned()]).unwrap();
    read_map(&*node.engine, &spaces[0]).unwrap()
}

async fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..200 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_share_connections_and_a_late_node_catches_up_from_a_snapshot() {
    let groups = [GroupId(1), GroupId(2)];
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, &groups).await);
    }
    let members: BTreeMap<NodeId, Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (i as u64 + 1, Node::new(n.addr.clone())))
        .collect();
    for g in groups {
        nodes[0].rafts[&g]
            .initialize(members.clone())
            .await
            .unwrap();
    }
    for g in groups {
        let raft = &nodes[0].rafts[&g];
        raft.wait(Some(Duration::from_secs(10)))
            .metrics(|m| m.current_leader.is_some(), "a leader")
            .await
            .unwrap();
        for i in 0..60 {
            let leader = raft.current_leader().await.unwrap();
            let cmd = KvCommand::Put {
                key: format!("{g}-k{i}"),
                value: format!("v{i}"),
            };
            let leader = &nodes[leader as usize - 1].rafts[&g];
            leader
                .client_write(Command(cmd.encode().unwrap()))
                .await
                .unwrap();
        }
    }
    for g in groups {
        wait_until("the replicas converge", || {
            let m = map_of(&nodes[0], g);
            m.len() == 60 && nodes.iter().all(|n| map_of(n, g) == m)
        })
        .await;
    }
    // Two groups, two peers: one connection to each peer.
    for n in &nodes {
        assert!(
            n.transport.connection_count() <= 2,
            "{}",
            n.transport.connection_count()
        );
    }

    // A fourth node joins group 1 as a learner: the log it would need is purged (20
    // entries per snapshot, none kept), so it is sent the snapshot, in 256-byte chunks.
    let late = start_node(4, &groups[..1]).await;
    let g = groups[0];
    let leader_id = nodes[0].rafts[&g].current_leader().await.unwrap();
    let leader = &nodes[leader_id as usize - 1].rafts[&g];
    let purged = leader.metrics().borrow().purged;
    assert!(
        purged.is_some_and(|p| p.index > 1),
        "the leader's log is purged ({purged:?}), so a new node needs the snapshot"
    );
    leader
        .add_learner(4, Node::new(late.addr.clone()), true)
        .await
        .unwrap();
    wait_until("the learner catches up", || {
        map_of(&late, g) == map_of(&nodes[0], g)
    })
    .await;
    for n in nodes.iter().chain([&late]) {
        for r in n.rafts.values() {
            r.shutdown().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_around_the_group_under_writes_over_tcp() {
    let g = GroupId(7);
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, &[g]).await);
    }
    let members: BTreeMap<NodeId, Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (i as u64 + 1, Node::new(n.addr.clone())))
        .collect();
    nodes[0].rafts[&g].initialize(members).await.unwrap();
    let proposers: Vec<Proposer> = nodes
        .iter()
        .map(|n| Proposer::new(n.rafts[&g].clone()))
        .collect();
    let leader_of = |proposers: &[Proposer]| {
        proposers
            .iter()
            .map(|p| p.raft().metrics().borrow().clone())
            .filter(|m| m.state == replication::openraft::ServerState::Leader)
            .max_by_key(|m| m.current_term)
            .map(|m| m.id)
    };
    wait_until("a leader", || leader_of(&proposers).is_some()).await;

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (proposers, stop) = (proposers.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{i:05}");
                let cmd = KvCommand::Put {
                    key: key.clone(),
                    value: "v".into(),
                };
                let at = leader_of(&proposers).unwrap_or(1);
                match proposers[at as usize - 1]
                    .propose(Command(cmd.encode().unwrap()))
                    .await
                {
                    Ok(_) => {
                        acked.push(key);
                        i += 1;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
            acked
        })
    };
    // Each node in turn, then back to node 1; the leaders have led longer than the
    // lease (800 ms) when asked, as a configured primary that returns finds them.
    let mut times = Vec::new();
    for target in [2, 3, 1] {
        tokio::time::sleep(Duration::from_millis(900)).await;
        let leader = leader_of(&proposers).unwrap();
        if leader == target {
            continue;
        }
        let p = &proposers[leader as usize - 1];
        let done = p
            .transfer_leader(
                &*nodes[leader as usize - 1].transport,
                g,
                target,
                Duration::from_secs(5),
            )
            .await
            .unwrap_or_else(|e| panic!("n{leader} -> n{target}: {e}"));
        times.push(done.elapsed);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = writer.await.unwrap();
    assert_eq!(leader_of(&proposers), Some(1));
    assert!(acked.len() > 20, "only {} writes acknowledged", acked.len());
    wait_until("the replicas converge", || {
        let m = map_of(&nodes[0], g);
        nodes.iter().all(|n| map_of(n, g) == m)
    })
    .await;
    let map = map_of(&nodes[0], g);
    let lost: Vec<_> = acked.iter().filter(|k| !map.contains_key(*k)).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    eprintln!(
        "TCP transfers under writes ({} acknowledged): {times:?}",
        acked.len()
    );
    for p in &proposers {
        p.raft().shutdown().await.unwrap();
    }
}
