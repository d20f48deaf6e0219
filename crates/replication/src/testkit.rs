//! Pieces every test of a Raft group over loopback TCP needs, in one place: the
//! tests' Raft timing, a node's listening cluster port with its router, and opening a
//! group's member (log, state machine, network, `Raft`) and registering it.
//!
//! Used by the integration tests of this crate, `store` and `cluster`; nothing in a
//! server calls it. Failures panic with the step that failed: this is test code.

use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};
use storage::Engine;
use tokio::net::TcpListener;

use crate::{
    serve_tcp, ClusterId, Durability, GroupId, LogStore, Network, NodeId, PeerConfig, Raft, Router,
    StateMachine, StateMachineStore, TcpTransport, Transport,
};

/// The tests' Raft timing (heartbeats every 100 ms, elections after 400–800 ms); with
/// `snapshot_after`, a snapshot every that many entries and the log purged right after,
/// so that a member that was away catches up from a snapshot.
pub fn config(snapshot_after: Option<u64>) -> Arc<Config> {
    let mut c = Config {
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: 800,
        ..Default::default()
    };
    if let Some(n) = snapshot_after {
        c.snapshot_policy = SnapshotPolicy::LogsSinceLast(n);
        c.max_in_snapshot_log_to_keep = 0;
        c.purge_batch_size = 1;
    }
    Arc::new(c.validate().expect("a valid Raft configuration"))
}

/// Plain TCP between the nodes of the test cluster `name`.
pub fn peers(name: &str) -> PeerConfig {
    PeerConfig::plain(ClusterId::new(name).expect("a valid cluster id"))
}

/// A node's cluster port: listening on loopback, serving its router.
pub struct Port {
    /// Requests arriving on the port go to the groups registered here.
    pub router: Arc<Router>,
    /// The address the other nodes dial.
    pub addr: String,
}

/// Binds a cluster port on a free loopback port and serves `router` on it.
pub async fn listen(peers: PeerConfig) -> Port {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local address").to_string();
    let router = Arc::new(Router::new());
    tokio::spawn(serve_tcp(listener, router.clone(), peers));
    Port { router, addr }
}

/// A TCP transport for the test cluster `peers` (2 s to connect).
pub fn transport(peers: PeerConfig) -> Arc<TcpTransport> {
    Arc::new(TcpTransport::new(peers, Duration::from_secs(2)))
}

/// How one member of a group is opened.
pub struct Member<'a, T: Transport> {
    /// The node's id.
    pub id: NodeId,
    /// The group.
    pub group: GroupId,
    /// Where the group's log and state live (the same prefix for both).
    pub prefix: &'a str,
    /// The node's engine.
    pub engine: Arc<dyn Engine>,
    /// The node's transport.
    pub transport: Arc<T>,
    /// Raft's timing.
    pub config: Arc<Config>,
    /// Snapshot chunks of at most this many bytes (`None`: the default).
    pub chunk_bytes: Option<usize>,
}

impl<T: Transport> Member<'_, T> {
    /// Opens the log and `machine` on the engine (in-memory durability), starts the
    /// member and registers it with `router`.
    pub async fn open<M: StateMachine>(self, machine: M, router: &Router) -> Raft {
        let sm = StateMachineStore::open(
            self.engine.clone(),
            self.prefix,
            machine,
            Durability::Inline,
        )
        .expect("open the state machine");
        let log = LogStore::open(self.engine.clone(), self.prefix, Durability::Inline)
            .expect("open the log");
        let mut network = Network::new(self.transport, self.group);
        if let Some(n) = self.chunk_bytes {
            network = network.with_chunk_bytes(n);
        }
        let raft = Raft::new(self.id, self.config, network, log, sm)
            .await
            .expect("start Raft");
        router.add_group(self.group, raft.clone());
        raft
    }
}

/// The group's leader among `members` (member `i` is node `i + 1`; `None`: stopped), once
/// one of them knows it; panics after 10 s without one.
pub async fn leader<'a>(members: &[Option<&'a Raft>]) -> &'a Raft {
    for _ in 0..200 {
        for raft in members.iter().flatten() {
            if let Some(id) = raft.current_leader().await {
                let at = usize::try_from(id).ok().and_then(|id| id.checked_sub(1));
                if let Some(Some(leader)) = at.and_then(|i| members.get(i)) {
                    return leader;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader");
}
