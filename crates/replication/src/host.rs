//! A server's Raft groups: one [`Host`] per server opens, finds and closes its members of
//! every group (the catalog's, each replicated shard's), all over the server's one
//! [`Router`] (the receiving side of its cluster port) and one [`Transport`].
//!
//! Also the identities Raft needs from a server's: [`node_id`] derives a group member's
//! `u64` id from the server's UUID (the same on every server, with no table to agree
//! on), and [`Resolving`] dials a member at the address the membership layer knows for it
//! now, so a server that moved (a new `--canonical-address`) stays reachable although
//! Raft's membership still names its old address.
//!
//! [`seed`] starts a group from state a server already holds (a single server's catalog
//! or table becoming replicated): its records are copied into the group's first
//! generation before the machine is opened, and [`Host::seal_seed`] makes them a
//! snapshot and purges the log behind it, so every member that joins later receives the
//! seeded state by snapshot and never replays a log that lacks it.
//!
//! Invariants: at most one member per group is open (a second `open` is refused, not
//! replaced); the member registry's lock is never held across an `.await`; a closed
//! group is unregistered from the router before its Raft stops, so no request reaches a
//! stopped member.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use openraft::Config;
use parking_lot::Mutex;
use storage::{Engine, WriteBatch};

use crate::durability::Durability;
use crate::error::{ReplicationError, TransportError};
use crate::fence::Proposer;
use crate::log_store::LogStore;
use crate::network::{Network, RaftRequest, RaftResponse, Transport};
use crate::router::Router;
use crate::sm_store::{applied_log_id, state_spaces, StateMachineStore};
use crate::state_machine::StateMachine;
use crate::types::{GroupId, Node, NodeId, Raft};

type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;

/// Errors of the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `open` of a group that has a member here already.
    #[error("group {0} is already open on this server")]
    AlreadyOpen(GroupId),
    /// The group has no member on this server.
    #[error("group {0} is not open on this server")]
    NotOpen(GroupId),
    /// `seed` of a group that already has state.
    #[error("group under `{0}` already has state: it cannot be seeded")]
    NotEmpty(String),
    /// The group's storage failed.
    #[error(transparent)]
    Storage(#[from] ReplicationError),
    /// Raft refused or failed (initialising, snapshotting, stopping).
    #[error("Raft: {0}")]
    Raft(String),
}

impl From<storage::StorageError> for HostError {
    fn from(e: storage::StorageError) -> Self {
        HostError::Storage(e.into())
    }
}

/// A server id that is not a UUID.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a server id (a UUID)")]
pub struct NodeIdError(String);

/// The Raft node id of the server with UUID `server_id`: its first 8 bytes, big-endian
/// (random v4 UUIDs collide there with probability 2^-64 per pair). Never 0, which
/// openraft-adjacent code uses as "no node" (`call_service`).
pub fn node_id(server_id: &str) -> Result<NodeId, NodeIdError> {
    let hex: String = server_id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(NodeIdError(server_id.to_owned()));
    }
    let id = u64::from_str_radix(&hex[..16], 16).map_err(|_| NodeIdError(server_id.to_owned()))?;
    // A UUID whose first half is zero is not a random one; still a valid id, moved off 0.
    Ok(id.max(1))
}

/// The bits of a node id that name its server ([`member_id`] keeps them).
const SERVER_BITS: u64 = 0xFFFF_FFFF_0000_0000;

/// The node id of incarnation `incarnation` of a server's replica in a group: the
/// server's [`node_id`] for incarnation 0 (a replica placed when its table was made),
/// else the server's upper 32 bits with the incarnation's lower 32 (never 0 there). A
/// replica dropped and placed on the server again is a new incarnation: Raft assumes a
/// member never forgets what it acknowledged, so a fresh copy must not answer under
/// the old copy's id.
pub fn member_id(server_id: &str, incarnation: u64) -> Result<NodeId, NodeIdError> {
    let base = node_id(server_id)?;
    if incarnation == 0 {
        return Ok(base);
    }
    let low = (incarnation & !SERVER_BITS).max(1);
    Ok((base & SERVER_BITS) | low)
}

/// Whether two node ids are members of the same server (any incarnations).
pub fn same_server(a: NodeId, b: NodeId) -> bool {
    a & SERVER_BITS == b & SERVER_BITS
}

/// Where the membership layer says a node is now (`None`: not known; the address in
/// Raft's membership is used).
pub trait Resolve: Send + Sync + 'static {
    /// The current address of `node`.
    fn address(&self, node: NodeId) -> Option<String>;
}

/// A transport that dials each node at its current address ([`Resolve`]).
pub struct Resolving<T, R> {
    inner: Arc<T>,
    resolve: R,
}

impl<T: Transport, R: Resolve> Resolving<T, R> {
    /// `inner`, dialing the addresses `resolve` knows.
    pub fn new(inner: Arc<T>, resolve: R) -> Self {
        Self { inner, resolve }
    }
}

impl<T: Transport, R: Resolve> Transport for Resolving<T, R> {
    async fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        match self.resolve.address(target) {
            Some(addr) if addr != node.addr => {
                let current = Node::new(addr);
                self.inner.call(target, &current, group, request).await
            }
            _ => self.inner.call(target, node, group, request).await,
        }
    }
}

/// One group's member on this server.
#[derive(Clone)]
pub struct Member {
    /// Its Raft.
    pub raft: Raft,
    /// The one way to propose to it (fenced during a leadership transfer).
    pub proposer: Arc<Proposer>,
    /// Where its log and state live.
    pub prefix: String,
}

/// A server's Raft groups.
pub struct Host<T: Transport> {
    me: NodeId,
    engine: Arc<dyn Engine>,
    router: Arc<Router>,
    transport: Arc<T>,
    config: Arc<Config>,
    durability: Durability,
    members: Mutex<HashMap<GroupId, Member>>,
}

impl<T: Transport> Host<T> {
    /// The groups of node `me`, stored in `engine`, served by `router`, reaching the
    /// other members through `transport`, all with Raft timing `config`.
    pub fn new(
        me: NodeId,
        engine: Arc<dyn Engine>,
        router: Arc<Router>,
        transport: Arc<T>,
        config: Arc<Config>,
        durability: Durability,
    ) -> Self {
        Self {
            me,
            engine,
            router,
            transport,
            config,
            durability,
            members: Mutex::new(HashMap::new()),
        }
    }

    /// This server's node id.
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// Where the groups keep their logs and state.
    pub fn engine(&self) -> Arc<dyn Engine> {
        self.engine.clone()
    }

    /// Opens this server's member of `group`, its log and state under `prefix` (created
    /// if missing; an existing member resumes from them), and registers it with the
    /// router. A new group does nothing until [`Host::bootstrap`] or a leader adds it.
    pub async fn open<M: StateMachine>(
        &self,
        group: GroupId,
        prefix: &str,
        machine: M,
    ) -> Result<Member, HostError> {
        self.open_as(group, self.me, prefix, machine).await
    }

    /// As [`Host::open`], the member being node `id` (an incarnation of this server's
    /// replica, [`member_id`]) rather than this server's own node id.
    pub async fn open_as<M: StateMachine>(
        &self,
        group: GroupId,
        id: NodeId,
        prefix: &str,
        machine: M,
    ) -> Result<Member, HostError> {
        if self.members.lock().contains_key(&group) {
            return Err(HostError::AlreadyOpen(group));
        }
        let sm = StateMachineStore::open(self.engine.clone(), prefix, machine, self.durability)?;
        let log = LogStore::open(self.engine.clone(), prefix, self.durability)?;
        let network = Network::new(self.transport.clone(), group);
        let raft = Raft::new(id, self.config.clone(), network, log, sm)
            .await
            .map_err(|e| HostError::Raft(e.to_string()))?;
        let member = Member {
            raft: raft.clone(),
            proposer: Arc::new(Proposer::new(raft.clone())),
            prefix: prefix.to_owned(),
        };
        let inserted = {
            let mut members = self.members.lock();
            let free = !members.contains_key(&group);
            if free {
                members.insert(group, member.clone());
            }
            free
        };
        if !inserted {
            // Opened concurrently: keep the first, stop this one.
            let _ = raft.shutdown().await;
            return Err(HostError::AlreadyOpen(group));
        }
        self.router.add_member(group, (*member.proposer).clone());
        Ok(member)
    }

    /// This server's member of `group`, if open.
    pub fn member(&self, group: GroupId) -> Option<Member> {
        self.members.lock().get(&group).cloned()
    }

    /// The groups open here, ascending.
    pub fn groups(&self) -> Vec<GroupId> {
        let mut g: Vec<GroupId> = self.members.lock().keys().copied().collect();
        g.sort();
        g
    }

    /// Makes `voters` the first membership of `group` if it has none yet (true), or
    /// leaves it as it is (false). Call it on one server only: the one that decided the
    /// group's creation; the others learn it from that server's first heartbeat.
    pub async fn bootstrap(
        &self,
        group: GroupId,
        voters: BTreeMap<NodeId, Node>,
    ) -> Result<bool, HostError> {
        let m = self.member(group).ok_or(HostError::NotOpen(group))?;
        if m.raft
            .is_initialized()
            .await
            .map_err(|e| HostError::Raft(e.to_string()))?
        {
            return Ok(false);
        }
        match m.raft.initialize(voters).await {
            Ok(()) => Ok(true),
            Err(openraft::error::RaftError::APIError(
                openraft::error::InitializeError::NotAllowed(_),
            )) => Ok(false),
            Err(e) => Err(HostError::Raft(e.to_string())),
        }
    }

    /// After [`seed`] and [`Host::bootstrap`] of a single-voter group on this server:
    /// waits until the bootstrap entry is applied, makes the current state (the seeded
    /// records included) a snapshot and purges the log up to it, within `timeout`.
    pub async fn seal_seed(
        &self,
        group: GroupId,
        timeout: std::time::Duration,
    ) -> Result<(), HostError> {
        let m = self.member(group).ok_or(HostError::NotOpen(group))?;
        let raft_err = |e: &dyn std::fmt::Display| HostError::Raft(e.to_string());
        let until = |f: fn(&RaftMetrics, u64) -> bool, at: u64, what: &'static str| {
            let wait = m.raft.wait(Some(timeout));
            async move {
                wait.metrics(move |x| f(x, at), what)
                    .await
                    .map_err(|e| raft_err(&e))
            }
        };
        let metrics = until(
            |x, _| x.last_applied.is_some(),
            0,
            "the bootstrap entry applied",
        )
        .await?;
        let applied = metrics
            .last_applied
            .ok_or_else(|| HostError::Raft("nothing applied".into()))?
            .index;
        m.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| raft_err(&e))?;
        let snapshot = |x: &RaftMetrics, at| x.snapshot.is_some_and(|s| s.index >= at);
        until(snapshot, applied, "the seed's snapshot").await?;
        m.raft
            .trigger()
            .purge_log(applied)
            .await
            .map_err(|e| raft_err(&e))?;
        let purged = |x: &RaftMetrics, at| x.purged.is_some_and(|p| p.index >= at);
        until(purged, applied, "the log purged behind the seed").await?;
        Ok(())
    }

    /// Stops this server's member of `group` (its storage is kept: `open` resumes it).
    pub async fn close(&self, group: GroupId) -> Result<Member, HostError> {
        let m = self
            .members
            .lock()
            .remove(&group)
            .ok_or(HostError::NotOpen(group))?;
        self.router.remove_group(group);
        m.raft
            .shutdown()
            .await
            .map_err(|e| HostError::Raft(e.to_string()))?;
        Ok(m)
    }

    /// Stops this server's member of `group` and drops its log and state (it left the
    /// group, or the group was deleted).
    pub async fn remove(&self, group: GroupId) -> Result<(), HostError> {
        let m = self.close(group).await?;
        drop_group_spaces(&*self.engine, &m.prefix)?;
        Ok(())
    }

    /// Stops every member (their storage is kept).
    pub async fn shutdown(&self) {
        for g in self.groups() {
            let _ = self.close(g).await;
        }
    }
}

/// Drops every space of the group stored under `prefix` (log, metadata, every
/// generation of state).
/// Drops the storage of a group under `prefix` that has no open member (what a seed
/// left behind when the conversion it began never finished).
pub fn drop_group_storage(engine: &dyn Engine, prefix: &str) -> Result<(), HostError> {
    drop_group_spaces(engine, prefix)
}

fn drop_group_spaces(engine: &dyn Engine, prefix: &str) -> Result<(), HostError> {
    let dotted = format!("{prefix}.");
    for name in engine.space_names()? {
        if name.starts_with(&dotted) {
            engine.drop_space(&name)?;
        }
    }
    Ok(())
}

/// Copies every record of `sources` (`(kind, space)` pairs: the machine's space kind and
/// the space holding that state today) into the state of the group stored under
/// `prefix`, which must not have applied anything yet. Returns how many records were
/// copied. Batches of at most `batch_bytes`; a crash part-way leaves a group that has
/// applied nothing, which a retry overwrites.
pub fn seed(
    engine: &dyn Engine,
    prefix: &str,
    sources: &[(String, String)],
    batch_bytes: usize,
) -> Result<u64, HostError> {
    let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    seed_range(engine, prefix, sources, all, batch_bytes)
}

/// [`seed`] copying only the records of `sources` whose keys are within `range` (a
/// shard's key range of a single server's table, whose shards share one space).
pub fn seed_range(
    engine: &dyn Engine,
    prefix: &str,
    sources: &[(String, String)],
    range: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
    batch_bytes: usize,
) -> Result<u64, HostError> {
    if applied_log_id(engine, prefix)?.is_some() {
        return Err(HostError::NotEmpty(prefix.to_owned()));
    }
    let kinds: Vec<String> = sources.iter().map(|(k, _)| k.clone()).collect();
    let targets = state_spaces(engine, prefix, &kinds)?;
    let mut copied = 0u64;
    for ((_, source), target) in sources.iter().zip(&targets) {
        engine.create_space(target)?;
        let snap = engine.snapshot();
        let mut batch = WriteBatch::new();
        let mut bytes = 0usize;
        for kv in snap.range(source, range.0.clone(), range.1.clone(), false)? {
            let (k, v) = kv?;
            bytes += k.len() + v.len();
            batch.put(target, k.to_vec(), v.to_vec());
            copied += 1;
            if bytes >= batch_bytes {
                engine.apply(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        engine.apply(batch)?;
    }
    engine.persist()?;
    Ok(copied)
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
