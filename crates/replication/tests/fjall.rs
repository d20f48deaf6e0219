//! A 3-node group on fjall over loopback TCP, fsyncing on the blocking pool as a server
//! would: a node stopped and reopened from its directory keeps its log, vote and state,
//! and catches up with what was written while it was away.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use replication::kv::{read_map, KvCommand, KvMachine};
use replication::openraft::storage::RaftLogStorage;
use replication::openraft::{Config, SnapshotPolicy};
use replication::*;
use storage::{Engine, Fjall};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const GROUP: GroupId = GroupId(7);
const PREFIX: &str = "raft.g7";

struct RunningNode {
    engine: Arc<dyn Engine>,
    raft: Raft,
    server: JoinHandle<std::io::Result<()>>,
}

fn config() -> Arc<Config> {
    let c = Config {
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: 800,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(30),
        max_in_snapshot_log_to_keep: 10,
        ..Default::default()
    };
    Arc::new(c.validate().unwrap())
}

async fn start(id: NodeId, dir: &Path, listener: TcpListener) -> RunningNode {
    let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir, 8 << 20).unwrap());
    let log = LogStore::open(engine.clone(), PREFIX, Durability::Blocking).unwrap();
    let sm = StateMachineStore::open(
        engine.clone(),
        PREFIX,
        KvMachine::default(),
        Durability::Blocking,
    )
    .unwrap();
    let peers = PeerConfig::plain(ClusterId::new("fjall-test").unwrap());
    let transport = TcpTransport::new(peers.clone(), Duration::from_secs(2));
    let network = Network::new(Arc::new(transport), GROUP);
    let raft = Raft::new(id, config(), network, log, sm).await.unwrap();
    let router = Arc::new(Router::new());
    router.add_group(GROUP, raft.clone());
    let server = tokio::spawn(serve_tcp(listener, router, peers));
    RunningNode {
        engine,
        raft,
        server,
    }
}

async fn listen() -> (TcpListener, String) {
    for port in 27600..27700u16 {
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)).await {
            return (l, format!("127.0.0.1:{port}"));
        }
    }
    panic!("no free port in 27600..27700");
}

fn map_of(engine: &dyn Engine) -> BTreeMap<String, String> {
    let spaces = state_spaces(engine, PREFIX, &[KvMachine::KIND.to_owned()]).unwrap();
    read_map(engine, &spaces[0]).unwrap()
}

async fn write(nodes: &[Option<RunningNode>], range: std::ops::Range<u32>) {
    for i in range {
        let cmd = KvCommand::Put {
            key: format!("k{i:03}"),
            value: format!("v{i}"),
        };
        let bytes = cmd.encode().unwrap();
        // Ask any live node who leads; retry through elections.
        let mut done = false;
        for _ in 0..100 {
            let live = nodes.iter().flatten().next().unwrap();
            if let Some(l) = live.raft.current_leader().await {
                if let Some(Some(n)) = nodes.get(l as usize - 1) {
                    if n.raft.client_write(Command(bytes.clone())).await.is_ok() {
                        done = true;
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(done, "write {i} was never acknowledged");
    }
}

async fn converge(nodes: &[Option<RunningNode>], expected: usize) {
    for _ in 0..200 {
        let maps: Vec<_> = nodes.iter().flatten().map(|n| map_of(&*n.engine)).collect();
        if maps[0].len() == expected && maps.iter().all(|m| *m == maps[0]) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("replicas did not converge on {expected} keys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reopened_from_fjall_keeps_its_state_and_catches_up() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut addrs = Vec::new();
    let mut nodes = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let (listener, addr) = listen().await;
        addrs.push(addr);
        nodes.push(Some(start(i as u64 + 1, dir.path(), listener).await));
    }
    let members: BTreeMap<NodeId, Node> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u64 + 1, Node::new(a.clone())))
        .collect();
    let first = nodes[0].as_ref().unwrap();
    first.raft.initialize(members).await.unwrap();
    first
        .raft
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.current_leader.is_some(), "a leader")
        .await
        .unwrap();
    write(&nodes, 0..40).await;
    converge(&nodes, 40).await;

    // Stop node 3 (its listener and connections go with the server task) and release
    // its fjall database.
    let stopped = nodes[2].take().unwrap();
    let vote_before = stopped.raft.metrics().borrow().vote;
    stopped.raft.shutdown().await.unwrap();
    stopped.server.abort();
    let _ = stopped.server.await;
    let engine = stopped.engine;
    drop(stopped.raft);
    drop(engine);

    // The others go on; enough entries to be snapshotted and purged past node 3.
    write(&nodes, 40..120).await;

    // Its directory holds its vote and state (read before any node runs on it).
    {
        let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dirs[2].path(), 8 << 20).unwrap());
        let mut log = LogStore::open(engine.clone(), PREFIX, Durability::Blocking).unwrap();
        let vote = log.read_vote().await.unwrap().expect("a saved vote");
        assert!(vote.leader_id().term >= vote_before.leader_id().term);
        let state = map_of(&*engine);
        assert!(state.len() >= 40, "node 3 kept {} keys", state.len());
    }

    // Reopened on the same address, it catches up.
    let listener = TcpListener::bind(addrs[2].as_str()).await.unwrap();
    let reopened = start(3, dirs[2].path(), listener).await;
    nodes[2] = Some(reopened);
    converge(&nodes, 120).await;

    for n in nodes.into_iter().flatten() {
        n.raft.shutdown().await.unwrap();
        n.server.abort();
    }
}
