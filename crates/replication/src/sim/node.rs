//! A simulated Ponder node: one Raft group (the [`Replicated`]'s machine) on an
//! in-memory [`Disk`] that outlives crashes (and loses its unsynced writes on a power
//! loss), served over turmoil's TCP, writes proposed through a [`Proposer`], and an
//! operator task that hands leadership over when the test asks
//! ([`Cluster::transfer_to`]); and the client side of its write port, which carries a
//! command's bytes and answers the machine's reply bytes (postcard: test-only framing).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use storage::Engine;
use turmoil::net::{TcpListener, TcpStream};

use super::disk::Disk;
use super::{Replicated, TransferRecord};
use crate::openraft::{Config, ServerState, SnapshotPolicy};
use crate::*;

pub const RAFT_PORT: u16 = 9000;
pub const CLIENT_PORT: u16 = 9001;
pub const GROUP: GroupId = GroupId(1);
pub const PREFIX: &str = "raft.g1";

pub fn host_name(id: NodeId) -> String {
    format!("n{id}")
}

/// What outlives a node's crashes, and what the test observes.
pub struct Cluster<R: Replicated> {
    /// What is replicated.
    pub sim: Arc<R>,
    pub ids: Vec<NodeId>,
    pub disks: HashMap<NodeId, Arc<Disk>>,
    /// The node each host runs now (replaced at every restart).
    pub rafts: Mutex<HashMap<NodeId, Raft>>,
    /// Snapshot transfers that were installed by their receiver.
    pub snapshots_sent: AtomicU64,
    /// A leader transfer the test asks for: the node that leads takes it.
    pub transfer_to: Mutex<Option<NodeId>>,
    /// Transfers done: from, to, and the time taken or why it failed.
    pub transfers: Mutex<Vec<TransferRecord>>,
}

impl<R: Replicated> Cluster<R> {
    pub fn new(sim: Arc<R>, n: u64) -> Arc<Self> {
        let ids: Vec<NodeId> = (1..=n).collect();
        let disks = ids
            .iter()
            .map(|id| (*id, Arc::new(Disk::default())))
            .collect();
        Arc::new(Self {
            sim,
            ids,
            disks,
            rafts: Mutex::new(HashMap::new()),
            snapshots_sent: AtomicU64::new(0),
            transfer_to: Mutex::new(None),
            transfers: Mutex::new(Vec::new()),
        })
    }

    /// The replica's applied position and state; an error says why it cannot be read.
    pub fn replica_state(&self, id: NodeId) -> Result<(Option<LogId>, R::State), String> {
        let engine = &*self.disks[&id];
        let applied = applied_log_id(engine, PREFIX).map_err(|e| e.to_string())?;
        Ok((applied, self.sim.state(id, engine, PREFIX)?))
    }
}

/// The simulated network: one turmoil TCP connection per call.
pub struct SimTransport<R: Replicated> {
    cluster: Arc<Cluster<R>>,
}

impl<R: Replicated> Transport for SimTransport<R> {
    async fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        let done = matches!(request, RaftRequest::SnapshotDone { .. });
        let mut conn = TcpStream::connect(node.addr.as_str()).await?;
        let answer = call_on(&mut conn, group, target, &request).await?;
        if done && matches!(answer, RaftResponse::Snapshot(_)) {
            self.cluster.snapshots_sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer)
    }
}

fn config() -> Arc<Config> {
    let config = Config {
        cluster_name: "sim".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        // Small, so that a node that was away catches up from a snapshot.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(40),
        max_in_snapshot_log_to_keep: 5,
        purge_batch_size: 1,
        ..Default::default()
    };
    Arc::new(config.validate().expect("valid config"))
}

/// The host software of node `id`: opens its storage, starts Raft, serves peers and
/// clients until crashed.
pub async fn run_node<R: Replicated>(
    id: NodeId,
    cluster: Arc<Cluster<R>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let engine: Arc<dyn Engine> = cluster.disks[&id].clone();
    let log = LogStore::open(engine.clone(), PREFIX, Durability::Inline)?;
    let machine = cluster.sim.open(id, engine.clone(), PREFIX)?;
    let sm = StateMachineStore::open(engine, PREFIX, machine, Durability::Inline)?;
    let transport = Arc::new(SimTransport {
        cluster: cluster.clone(),
    });
    // Small chunks, so a snapshot takes several messages.
    let network = Network::new(transport.clone(), GROUP).with_chunk_bytes(512);
    let raft = Raft::new(id, config(), network, log, sm).await?;
    let proposer = Proposer::new(raft.clone());
    if id == 1 {
        let members: BTreeMap<NodeId, Node> = cluster
            .ids
            .iter()
            .map(|i| (*i, Node::new(format!("{}:{RAFT_PORT}", host_name(*i)))))
            .collect();
        // Refused once initialized (after a restart): that is expected.
        let _ = raft.initialize(members).await;
    }
    cluster.rafts.lock().insert(id, raft.clone());
    let router = Arc::new(Router::new());
    router.add_group(GROUP, raft.clone());
    tokio::spawn(operate(id, cluster.clone(), proposer.clone(), transport));

    let peers = TcpListener::bind(("0.0.0.0", RAFT_PORT)).await?;
    let clients = TcpListener::bind(("0.0.0.0", CLIENT_PORT)).await?;
    loop {
        // Biased: an unbiased select draws from tokio's RNG, which no seed controls.
        tokio::select! {
            biased;
            accepted = peers.accept() => {
                let (conn, _) = accepted?;
                let router = router.clone();
                tokio::spawn(async move {
                    // A broken connection only ends that connection.
                    let _ = router.serve(conn).await;
                });
            }
            accepted = clients.accept() => {
                let (conn, _) = accepted?;
                tokio::spawn(serve_client(conn, proposer.clone()));
            }
        }
    }
}

/// The operator: while this node leads, takes the transfer the test asks for and
/// records its outcome (in simulated time).
async fn operate<R: Replicated>(
    id: NodeId,
    cluster: Arc<Cluster<R>>,
    proposer: Proposer,
    transport: Arc<SimTransport<R>>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if proposer.raft().metrics().borrow().state != ServerState::Leader {
            continue;
        }
        // A request to hand leadership to this node is left to the node that leads (this
        // one may be a deposed leader that has not heard of its successor yet).
        let Some(to) = ({
            let mut request = cluster.transfer_to.lock();
            if *request == Some(id) {
                None
            } else {
                request.take()
            }
        }) else {
            continue;
        };
        let started = tokio::time::Instant::now();
        let outcome = proposer
            .transfer_leader(&*transport, GROUP, to, Duration::from_secs(2))
            .await
            .map(|_| started.elapsed())
            .map_err(|e| e.to_string());
        cluster.transfers.lock().push((id, to, outcome));
    }
}

/// The answer to a client's write.
#[derive(Debug, Serialize, Deserialize)]
pub enum WriteAnswer {
    /// Committed and applied: the machine's reply.
    Done(Vec<u8>),
    /// Not appended: this node does not lead.
    NotLeader(Option<NodeId>),
    /// Not appended: leadership is being handed to this node.
    Transferring(NodeId),
    /// Any other failure: the write may or may not have been applied.
    Failed(String),
}

/// Why a client's write got no answer.
#[derive(Debug)]
pub struct NoAnswer {
    /// The request may have reached the node (so the write may have been applied).
    pub maybe_sent: bool,
}

async fn serve_client(mut conn: TcpStream, proposer: Proposer) {
    let Ok(Some(body)) = codec::read_frame(&mut conn).await else {
        return;
    };
    let answer = match proposer.propose(Command(body)).await {
        Ok(reply) => WriteAnswer::Done(reply.0),
        Err(ProposeError::NotLeader { leader }) => WriteAnswer::NotLeader(leader),
        Err(ProposeError::Transferring { target }) => WriteAnswer::Transferring(target),
        Err(e) => WriteAnswer::Failed(e.to_string()),
    };
    if let Ok(bytes) = postcard::to_allocvec(&answer) {
        let _ = codec::write_frame(&mut conn, &bytes).await;
    }
}

/// Sends one write (a command's bytes) to node `id`.
pub async fn write_to(id: NodeId, command: &[u8]) -> Result<WriteAnswer, NoAnswer> {
    let attempt = async {
        let unsent = |_| NoAnswer { maybe_sent: false };
        let sent = |_| NoAnswer { maybe_sent: true };
        let mut conn = TcpStream::connect((host_name(id), CLIENT_PORT))
            .await
            .map_err(unsent)?;
        codec::write_frame(&mut conn, command).await.map_err(sent)?;
        let answer = codec::read_frame(&mut conn)
            .await
            .map_err(sent)?
            .ok_or(NoAnswer { maybe_sent: true })?;
        postcard::from_bytes(&answer).map_err(|_| NoAnswer { maybe_sent: true })
    };
    match tokio::time::timeout(Duration::from_secs(2), attempt).await {
        Ok(r) => r,
        Err(_) => Err(NoAnswer { maybe_sent: true }),
    }
}
