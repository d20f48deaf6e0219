//! A simulated Ponder node: several Raft groups (each the [`Replicated`]'s machine
//! under its own prefix) on one in-memory [`Disk`] that outlives crashes (and loses
//! its unsynced writes on a power loss), as a server keeps every group on one engine;
//! one [`Router`] serves every group on the node's Raft port and one transport carries
//! every group's calls (turmoil TCP); writes proposed through a [`Proposer`]; and an
//! operator task per group that hands leadership over when the test asks
//! ([`Group::transfer_to`]) and moves the membership to [`Group::want`]; and the client
//! side of its write port, which carries a group's index and a command's bytes and
//! answers the machine's reply bytes (postcard: test-only framing).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use storage::Engine;
use turmoil::net::{TcpListener, TcpStream};

use super::disk::Disk;
use super::{Mover, Placement, Replicated, TransferRecord};
use crate::openraft::{Config, ServerState, SnapshotPolicy};
use crate::*;

pub const RAFT_PORT: u16 = 9000;
pub const CLIENT_PORT: u16 = 9001;

pub fn host_name(id: NodeId) -> String {
    format!("n{id}")
}

fn address(id: NodeId) -> Node {
    Node::new(format!("{}:{RAFT_PORT}", host_name(id)))
}

/// One group: its nodes' Rafts, the placement it is moved to, what was asked of it and
/// done.
pub struct Group {
    pub id: GroupId,
    /// Its storage prefix on every node's engine.
    pub prefix: String,
    /// The Raft of the group each host runs now (replaced at every restart).
    pub rafts: Mutex<BTreeMap<NodeId, Raft>>,
    /// A leader transfer the test asks for: the node that leads takes it.
    pub transfer_to: Mutex<Option<NodeId>>,
    /// Transfers done: from, to, and the time taken or why it failed.
    pub transfers: Mutex<Vec<TransferRecord>>,
    /// The placement the group's leader moves its membership to (with [`Plan::mover`]).
    pub want: Mutex<Placement>,
    /// Membership changes made, and failed.
    pub changes: Mutex<(u32, u32)>,
}

/// What outlives a node's crashes, and what the test observes.
pub struct Cluster<R: Replicated> {
    /// What is replicated.
    pub sim: Arc<R>,
    /// Every host, the spare included.
    pub ids: Vec<NodeId>,
    /// The groups' first voters (every host but the spare).
    pub founders: BTreeSet<NodeId>,
    pub disks: HashMap<NodeId, Arc<Disk>>,
    pub groups: Vec<Group>,
    /// Snapshot transfers that were installed by their receiver.
    pub snapshots_sent: AtomicU64,
    pub mover: Option<Mover>,
}

impl<R: Replicated> Cluster<R> {
    /// Hosts 1..=3 found `groups` groups; host 4, a spare, joins one only if moved there.
    pub fn new(sim: Arc<R>, groups: usize, mover: Option<Mover>) -> Arc<Self> {
        let founders: BTreeSet<NodeId> = (1..=3).collect();
        let ids: Vec<NodeId> = match mover {
            Some(_) => (1..=4).collect(),
            None => founders.iter().copied().collect(),
        };
        let disks = ids
            .iter()
            .map(|id| (*id, Arc::new(Disk::default())))
            .collect();
        let groups = (0..groups as u64)
            .map(|g| Group {
                id: GroupId(g),
                prefix: format!("raft.g{g}"),
                rafts: Mutex::new(BTreeMap::new()),
                transfer_to: Mutex::new(None),
                transfers: Mutex::new(Vec::new()),
                want: Mutex::new(Placement {
                    voters: founders.clone(),
                    learners: BTreeSet::new(),
                }),
                changes: Mutex::new((0, 0)),
            })
            .collect();
        Arc::new(Self {
            sim,
            ids,
            founders,
            disks,
            groups,
            snapshots_sent: AtomicU64::new(0),
            mover,
        })
    }

    /// Replica `id`'s applied position and state in group `g`; an error says why it
    /// cannot be read.
    pub fn replica_state(&self, g: usize, id: NodeId) -> Result<(Option<LogId>, R::State), String> {
        let engine = &*self.disks[&id];
        let prefix = &self.groups[g].prefix;
        let applied = applied_log_id(engine, prefix).map_err(|e| e.to_string())?;
        Ok((applied, self.sim.state(id, engine, prefix)?))
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

/// The host software of node `id`: opens every group's storage on its one engine,
/// starts their Rafts behind one router and one transport, serves peers and clients
/// until crashed.
pub async fn run_node<R: Replicated>(
    id: NodeId,
    cluster: Arc<Cluster<R>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let engine: Arc<dyn Engine> = cluster.disks[&id].clone();
    let transport = Arc::new(SimTransport {
        cluster: cluster.clone(),
    });
    let router = Arc::new(Router::new());
    let mut proposers = Vec::new();
    for (g, group) in cluster.groups.iter().enumerate() {
        let log = LogStore::open(engine.clone(), &group.prefix, Durability::Inline)?;
        let machine = cluster.sim.open(id, engine.clone(), &group.prefix)?;
        let sm =
            StateMachineStore::open(engine.clone(), &group.prefix, machine, Durability::Inline)?;
        // Small chunks, so a snapshot takes several messages.
        let network = Network::new(transport.clone(), group.id).with_chunk_bytes(512);
        let raft = Raft::new(id, config(), network, log, sm).await?;
        if cluster.founders.first() == Some(&id) {
            let members: BTreeMap<NodeId, Node> =
                cluster.founders.iter().map(|i| (*i, address(*i))).collect();
            // Refused once initialized (after a restart): that is expected.
            let _ = raft.initialize(members).await;
        }
        group.rafts.lock().insert(id, raft.clone());
        router.add_group(group.id, raft.clone());
        let proposer = Proposer::new(raft);
        tokio::spawn(operate(
            id,
            g,
            cluster.clone(),
            proposer.clone(),
            transport.clone(),
        ));
        proposers.push(proposer);
    }
    let proposers = Arc::new(proposers);

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
                tokio::spawn(serve_client(conn, proposers.clone()));
            }
        }
    }
}

/// The operator of node `id` for group `g`, the server's controller in small: while
/// this node leads, takes the transfer the test asks for, then makes the next
/// membership change towards the group's placement (through [`Plan::mover`], the
/// cluster's own code), recording outcomes (in simulated time).
async fn operate<R: Replicated>(
    id: NodeId,
    g: usize,
    cluster: Arc<Cluster<R>>,
    proposer: Proposer,
    transport: Arc<SimTransport<R>>,
) {
    let group = &cluster.groups[g];
    let mut round = 0u32;
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if proposer.raft().metrics().borrow().state != ServerState::Leader {
            continue;
        }
        // A request to hand leadership to this node is left to the node that leads (this
        // one may be a deposed leader that has not heard of its successor yet).
        let request = {
            let mut request = group.transfer_to.lock();
            if *request == Some(id) {
                None
            } else {
                request.take()
            }
        };
        if let Some(to) = request {
            let started = tokio::time::Instant::now();
            let outcome = proposer
                .transfer_leader(&*transport, group.id, to, Duration::from_secs(2))
                .await
                .map(|_| started.elapsed())
                .map_err(|e| e.to_string());
            group.transfers.lock().push((id, to, outcome));
            continue;
        }
        // Membership changes every 100 ms, as a controller's rounds.
        round += 1;
        let Some(mover) = cluster.mover.as_ref().filter(|_| round.is_multiple_of(10)) else {
            continue;
        };
        let want = group.want.lock().clone();
        let nodes = cluster.ids.iter().map(|i| (*i, address(*i))).collect();
        if let Some(done) = mover(proposer.raft().clone(), want, nodes).await {
            let mut changes = group.changes.lock();
            match done {
                Ok(_) => changes.0 += 1,
                Err(_) => changes.1 += 1,
            }
        }
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

async fn serve_client(mut conn: TcpStream, proposers: Arc<Vec<Proposer>>) {
    let Ok(Some(body)) = codec::read_frame(&mut conn).await else {
        return;
    };
    let Ok((g, command)) = postcard::from_bytes::<(usize, Vec<u8>)>(&body) else {
        return;
    };
    let Some(proposer) = proposers.get(g) else {
        return;
    };
    let answer = match proposer.propose(Command(command)).await {
        Ok(reply) => WriteAnswer::Done(reply.0),
        Err(ProposeError::NotLeader { leader }) => WriteAnswer::NotLeader(leader),
        Err(ProposeError::Transferring { target }) => WriteAnswer::Transferring(target),
        Err(e) => WriteAnswer::Failed(e.to_string()),
    };
    if let Ok(bytes) = postcard::to_allocvec(&answer) {
        let _ = codec::write_frame(&mut conn, &bytes).await;
    }
}

/// Sends one write (a command's bytes) of group `g` to node `id`.
pub async fn write_to(id: NodeId, g: usize, command: &[u8]) -> Result<WriteAnswer, NoAnswer> {
    let Ok(body) = postcard::to_allocvec(&(g, command)) else {
        return Err(NoAnswer { maybe_sent: false });
    };
    let command = &body;
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
