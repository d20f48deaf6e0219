//! A replicated catalog's tables on Raft ([`TableGroups`]): every shard of a placed table
//! (`TableEntry::placement`) is a Raft group whose members are the shard's voting
//! replicas, each applying the shard's writes through `store::ShardMachine`. A node opens
//! the groups of the shards it holds a replica of, the shard's primary bootstraps the
//! group with its voters, and [`ReplicatedTable`] sends the table's writes to each
//! shard's leader (`crate::replica::ReplicatedShard`).
//!
//! Reads of documents (`get`, scans) follow the query's `read_mode`: `single` (the
//! default) reads each shard's primary, `majority` has the primary confirm with a quorum
//! first, `outdated` reads this node's replica (`TableHandle`), and so do counts;
//! key samples and changefeeds use this node's replica.
//!
//! A node holding no replica of a shard is the group's client (`ReplicatedShard::client`:
//! requests go to the voters, the leader found by trying them and following hints), with
//! an empty stand-in shard in the table's layout that nothing reads.
//!
//! Secondary indexes: every replica keeps its own copy of each index the catalog
//! defines, registered before its group starts (`index`, `crate::replica::ShardIndexes`).
//!
//! Changefeeds (`groups_feeds.rs`): a node polls the leaders of the shards it holds no
//! replica of into the table's hub, and ends its feeds when a shard's primary is lost.
//!
//! What is not here yet (docs/clustering.md, "Integration"): resharding of replicated
//! tables (refused),
//! non-voting replicas (not members), membership changes by `reconfigure`.
//!
//! Invariants: the catalog's apply task only opens machines (synchronous) and spawns the
//! groups' start on the runtime, never waits for them; a write waits for its shard's
//! group to be started on this node (bounded by the route's deadline); a group id is a
//! function of the table id and shard position, the same on every node.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use datum::{Datum, Version};
use replication::{ClientPolicy, GroupId, Host, Node, NodeId, Router, SharedTransport};
use store::{Applied, CacheBudget, GroupCommit, ReplicaOptions, ShardMachine, StoreChange};

use crate::catalog::TableEntry;
use crate::replica::{wait_for, Op, ReplicatedShard, RouteError, RoutePolicy, ShardIndexes};

#[path = "groups_index.rs"]
mod index;
pub(crate) use index::IndexName;
#[path = "groups_feeds.rs"]
mod feeds;

/// Where the other servers are: a server id's cluster address, if known.
pub type Addresses = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A node's groups of replicated table shards.
pub struct TableGroups {
    host: Arc<Host<SharedTransport>>,
    transport: Arc<SharedTransport>,
    router: Arc<Router>,
    runtime: tokio::runtime::Handle,
    me: String,
    addresses: Addresses,
    route: RoutePolicy,
    client: ClientPolicy,
    /// Where the empty stand-ins of shards this server holds no replica of live (an
    /// in-memory engine: a table's layout needs a shard per range; `TableHandle` reads
    /// through the routes instead).
    stand_ins: OnceLock<(Arc<dyn storage::Engine>, Arc<GroupCommit>)>,
}

/// The Raft group of shard `shard` of table `table_id` (never the catalog's group 0).
pub fn group_of(table_id: &str, shard: usize) -> GroupId {
    let base = replication::node_id(table_id).unwrap_or(1);
    GroupId(base.wrapping_add(shard as u64).max(1))
}

/// Where shard `shard` of table `table_id` keeps its log and state.
fn prefix_of(table_id: &str, shard: usize) -> String {
    format!("raft.t{table_id}.s{shard}")
}

impl TableGroups {
    /// The groups of the node with server id `me`, over its `host` (its router and the
    /// transport given here are the host's), with the routing limits of writes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        host: Arc<Host<SharedTransport>>,
        transport: Arc<SharedTransport>,
        router: Arc<Router>,
        runtime: tokio::runtime::Handle,
        me: &str,
        addresses: Addresses,
        route: RoutePolicy,
        client: ClientPolicy,
    ) -> Self {
        Self {
            host,
            transport,
            router,
            runtime,
            me: me.to_owned(),
            addresses,
            route,
            client,
            stand_ins: OnceLock::new(),
        }
    }

    /// An empty shard standing for one this server holds no replica of.
    fn stand_in(
        &self,
        name: String,
        cache: &CacheBudget,
        feeds: &Arc<changefeed::Hub>,
        range: store::KeyRange,
    ) -> Result<Arc<store::Shard>, store::StoreError> {
        let (engine, commit) = self.stand_ins.get_or_init(|| {
            let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
            let commit = GroupCommit::start(engine.clone());
            (engine, commit)
        });
        let shard = store::Shard::open_range(
            engine.clone(),
            &name,
            commit.clone(),
            cache.clone(),
            feeds.clone(),
            range,
        )?;
        Ok(Arc::new(shard))
    }

    /// The voters of a shard as route candidates (those whose address is known now).
    fn candidates(&self, voters: &[String]) -> Vec<(NodeId, Node)> {
        voters
            .iter()
            .filter_map(|v| {
                Some((
                    replication::node_id(v).ok()?,
                    Node::new((self.addresses)(v)?),
                ))
            })
            .collect()
    }

    /// Opens this node's replicas of `e`'s shards (its machines now, its groups on the
    /// runtime): the shards, in key order, for the table's layout, and the table's write
    /// path. An error when this node holds no replica of some shard.
    pub(crate) fn open(
        &self,
        engine: Arc<dyn storage::Engine>,
        e: &TableEntry,
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
        feeds: Arc<changefeed::Hub>,
    ) -> Result<(Vec<Arc<store::Shard>>, Arc<ReplicatedTable>), store::StoreError> {
        let ranges = crate::shards::Sharded::ranges(&e.splits)?;
        let mut shards = Vec::with_capacity(ranges.len());
        let mut slots = Vec::with_capacity(ranges.len());
        let mut remote = false;
        let mut indexes = Vec::with_capacity(ranges.len());
        for (i, (range, place)) in ranges.into_iter().zip(&e.placement).enumerate() {
            if !place.voting.contains(&self.me) {
                // Not a replica here: a client of the shard's group.
                let rs = ReplicatedShard::client(
                    group_of(&e.id, i),
                    self.candidates(&place.voting),
                    &range,
                    &e.primary_key,
                    self.transport.clone(),
                    self.route,
                );
                let name = format!("{}.s{i}", e.id);
                shards.push(self.stand_in(name, &cache, &feeds, range)?);
                slots.push(Arc::new(OnceLock::from(rs)));
                indexes.push(None);
                remote = true;
                continue;
            }
            let prefix = prefix_of(&e.id, i);
            let machine = ShardMachine::open(
                engine.clone(),
                ReplicaOptions {
                    prefix: prefix.clone(),
                    commit: commit.clone(),
                    cache: cache.clone(),
                    feeds: feeds.clone(),
                    range,
                    indexes: vec![],
                },
            )?;
            let shard = machine.shard().clone();
            let slot = Arc::new(OnceLock::new());
            let ix = ShardIndexes::new(shard.clone(), &prefix);
            // Registered before the group applies anything (it starts on the runtime).
            ix.follow(&index::defs_of(e))
                .map_err(store::StoreError::Corrupt)?;
            indexes.push(Some(ix.clone()));
            self.start(group_of(&e.id, i), prefix, machine, e, place, &ix, &slot);
            shards.push(shard);
            slots.push(slot);
        }
        let table = ReplicatedTable {
            slots,
            indexes,
            leader_built: Default::default(),
            runtime: self.runtime.clone(),
            wait: self.route.deadline,
            remote,
            feeds: Default::default(),
        };
        Ok((shards, Arc::new(table)))
    }

    /// Starts one shard's group on the runtime; its route lands in `slot` once started.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        group: GroupId,
        prefix: String,
        machine: ShardMachine,
        e: &TableEntry,
        place: &crate::placement::ShardPlacement,
        indexes: &Arc<ShardIndexes>,
        slot: &Arc<OnceLock<ReplicatedShard<SharedTransport>>>,
    ) {
        let (host, router, transport) = (
            self.host.clone(),
            self.router.clone(),
            self.transport.clone(),
        );
        let (addresses, policy, client) = (self.addresses.clone(), self.route, self.client);
        let primary = place.primary == self.me;
        let voters = place.voting.clone();
        let (indexes, slot, pk) = (indexes.clone(), slot.clone(), e.primary_key.clone());
        self.runtime.spawn(async move {
            let member = match host.open(group, &prefix, machine).await {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("could not open the group {group} of a table shard: {e}");
                    return;
                }
            };
            if primary {
                bootstrap(&host, group, &voters, &addresses, policy.deadline).await;
            }
            let rs = ReplicatedShard::indexed(
                group,
                member.raft,
                indexes,
                &pk,
                transport,
                policy,
                client,
            );
            rs.register(&router);
            let _ = slot.set(rs);
        });
    }

    /// Stops and drops this node's replicas of the table with `id` and `shards` shards.
    pub(crate) fn remove(&self, id: &str, shards: usize) {
        let host = self.host.clone();
        let groups: Vec<GroupId> = (0..shards).map(|i| group_of(id, i)).collect();
        self.runtime.spawn(async move {
            for g in groups {
                let _ = host.remove(g).await;
            }
        });
    }
}

/// Makes `voters` the group's first membership once every voter's address is known
/// (within `deadline`; a group already initialised is left as it is).
async fn bootstrap(
    host: &Host<SharedTransport>,
    group: GroupId,
    voters: &[String],
    addresses: &Addresses,
    deadline: Duration,
) {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let known: Option<BTreeMap<NodeId, Node>> = voters
            .iter()
            .map(|v| Some((replication::node_id(v).ok()?, Node::new(addresses(v)?))))
            .collect();
        if let Some(members) = known {
            if let Err(e) = host.bootstrap(group, members).await {
                tracing::warn!("could not bootstrap the group {group} of a table shard: {e}");
            }
            return;
        }
        if tokio::time::Instant::now() >= until {
            tracing::warn!("group {group}: the addresses of its voters are not all known");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a server has of one shard's group.
pub(crate) enum Local {
    /// Its member, started.
    Member(replication::Raft),
    /// A replica here whose group has not started yet.
    Starting,
    /// No replica here: a client of the group.
    Client,
}

/// A replicated table's write path: each shard's route to its leader.
pub struct ReplicatedTable {
    slots: Vec<Arc<OnceLock<ReplicatedShard<SharedTransport>>>>,
    /// This server's replicas' secondary indexes, by shard (none for a remote shard).
    indexes: Vec<Option<Arc<ShardIndexes>>>,
    /// The (shard, index id) pairs whose leader said the index is built (`index`).
    leader_built: parking_lot::Mutex<std::collections::BTreeSet<(usize, String)>>,
    runtime: tokio::runtime::Handle,
    /// How long a write waits for its shard's group to start here.
    wait: Duration,
    /// Whether this server holds no replica of some shard (reads of those are routed).
    remote: bool,
    /// The changefeeds on the table here (`groups_feeds.rs`).
    feeds: feeds::TableFeeds,
}

impl ReplicatedTable {
    /// Applies `change` to `key` in shard `shard` through the group's leader, from a
    /// synchronous caller (see `crate::replica::wait_for`).
    pub(crate) fn apply(
        &self,
        shard: usize,
        key: &Datum,
        expect: Option<Version>,
        change: StoreChange,
    ) -> reql::Result<Applied> {
        let slot = self.slot(shard)?;
        let (key, wait) = (key.clone(), self.wait);
        let answer = wait_for(&self.runtime, async move {
            let rs = Self::route(&slot, wait, Op::Write).await?;
            rs.apply(&key, expect, &change).await
        });
        match answer {
            Some(r) => r.map_err(|e| e.to_reql()),
            None => Err(RouteError::CommitUnknown("the server is stopping".into()).to_reql()),
        }
    }

    /// Applies several writes to distinct keys, `(shard, key, expect, change)` each, all
    /// proposed at once so that they share the groups' Raft rounds and fsyncs (one by
    /// one, each waits for its commit before the next is proposed); each answer as
    /// `apply` gives it, in the order of `ops`. The caller bounds how many there are.
    pub(crate) fn apply_all(
        &self,
        ops: Vec<(usize, Datum, Option<Version>, StoreChange)>,
    ) -> Vec<reql::Result<Applied>> {
        let count = ops.len();
        let mut jobs = Vec::with_capacity(count);
        let mut out: Vec<Option<reql::Result<Applied>>> = Vec::with_capacity(count);
        for (i, (shard, key, expect, change)) in ops.into_iter().enumerate() {
            match self.slot(shard) {
                Ok(slot) => {
                    jobs.push((i, slot, key, expect, change));
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let wait = self.wait;
        let answers = wait_for(&self.runtime, async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, slot, key, expect, change) in jobs {
                set.spawn(async move {
                    let rs = Self::route(&slot, wait, Op::Write).await;
                    let answer = match rs {
                        Ok(rs) => rs.apply(&key, expect, &change).await,
                        Err(e) => Err(e),
                    };
                    (i, answer)
                });
            }
            let mut answers = Vec::with_capacity(set.len());
            while let Some(joined) = set.join_next().await {
                // A task that panicked leaves its write's outcome unknown (no answer).
                if let Ok(answer) = joined {
                    answers.push(answer);
                }
            }
            answers
        });
        for (i, answer) in answers.unwrap_or_default() {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(answer.map_err(|e| e.to_reql()));
            }
        }
        out.into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    Err(RouteError::CommitUnknown("the server is stopping".into()).to_reql())
                })
            })
            .collect()
    }

    /// How many shards the table has.
    pub(crate) fn shards(&self) -> usize {
        self.slots.len()
    }

    /// Whether this server holds no replica of some shard.
    pub(crate) fn has_remote_shards(&self) -> bool {
        self.remote
    }

    /// What this server has of each shard's group, for `table_status`.
    pub(crate) fn members(&self) -> Vec<Local> {
        self.slots
            .iter()
            .map(|s| match s.get() {
                None => Local::Starting,
                Some(rs) => rs.raft().cloned().map_or(Local::Client, Local::Member),
            })
            .collect()
    }
}

/// The routing's read mode for ReQL's.
fn read_mode(mode: reql::ReadMode) -> crate::replica::ReadMode {
    match mode {
        reql::ReadMode::Single => crate::replica::ReadMode::Single,
        reql::ReadMode::Majority => crate::replica::ReadMode::Majority,
        reql::ReadMode::Outdated => crate::replica::ReadMode::Outdated,
    }
}

/// How many documents a replicated scan fetches per round trip.
const SCAN_BATCH: u32 = 256;

impl ReplicatedTable {
    /// The shard's route once its group started here (waiting at most `wait`).
    async fn route(
        slot: &OnceLock<ReplicatedShard<SharedTransport>>,
        wait: Duration,
        op: Op,
    ) -> Result<&ReplicatedShard<SharedTransport>, RouteError> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            if let Some(rs) = slot.get() {
                return Ok(rs);
            }
            if tokio::time::Instant::now() >= until {
                return Err(RouteError::PrimaryUnavailable {
                    op,
                    range: "[\"\", +inf)".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The document under `key` in shard `shard`, as the primary has it (`single`) or
    /// once a quorum confirmed the primary's leadership (`majority`).
    pub(crate) fn get(
        &self,
        shard: usize,
        key: &Datum,
        mode: reql::ReadMode,
    ) -> reql::Result<Option<Datum>> {
        let slot = self.slot(shard)?;
        let (key, wait, mode) = (key.clone(), self.wait, read_mode(mode));
        let answer = wait_for(&self.runtime, async move {
            let rs = Self::route(&slot, wait, Op::Read).await?;
            rs.get(&key, mode).await
        });
        answer
            .unwrap_or(Err(RouteError::LostContact(Op::Read)))
            .map_err(|e| e.to_reql())
    }

    /// As `get`, when this server answers at once (`ReplicatedShard::get_now`); None
    /// while the shard's group is not open here or the read must wait.
    pub(crate) fn get_now(
        &self,
        shard: usize,
        key: &Datum,
        mode: reql::ReadMode,
    ) -> Option<reql::Result<Option<Datum>>> {
        let slot = self.slots.get(shard)?;
        let answer = slot.get()?.get_now(key, read_mode(mode))?;
        Some(answer.map_err(|e| e.to_reql()))
    }

    /// How many documents lie between two bounds, over every shard, counted as `mode`
    /// says (each shard's primary for `single` and `majority`).
    pub(crate) fn count(
        &self,
        lower: &std::ops::Bound<Datum>,
        upper: &std::ops::Bound<Datum>,
        mode: reql::ReadMode,
    ) -> reql::Result<u64> {
        let slots = self.slots.clone();
        let (lower, upper) = (lower.clone(), upper.clone());
        let (wait, mode) = (self.wait, read_mode(mode));
        let answer = wait_for(&self.runtime, async move {
            let mut n = 0;
            for slot in &slots {
                let rs = Self::route(slot, wait, Op::Read).await?;
                n += rs.count(mode, &lower, &upper).await?;
            }
            Ok::<_, RouteError>(n)
        });
        answer
            .unwrap_or(Err(RouteError::LostContact(Op::Read)))
            .map_err(|e| e.to_reql())
    }

    fn slot(&self, shard: usize) -> reql::Result<Arc<OnceLock<ReplicatedShard<SharedTransport>>>> {
        self.slots
            .get(shard)
            .cloned()
            .ok_or_else(|| reql::error::internal("no such shard"))
    }

    /// The documents between two bounds, shard after shard in key order (reversed with
    /// `reverse`), read from each shard's primary in batches as the stream is consumed.
    pub(crate) fn scan(
        self: &Arc<Self>,
        lower: std::ops::Bound<Datum>,
        upper: std::ops::Bound<Datum>,
        reverse: bool,
        mode: reql::ReadMode,
    ) -> ReplicatedScan {
        let mut order: Vec<usize> = (0..self.slots.len()).collect();
        if reverse {
            order.reverse();
        }
        ReplicatedScan {
            table: self.clone(),
            order,
            at: 0,
            lower: lower.clone(),
            upper: upper.clone(),
            bounds: (lower, upper),
            reverse,
            mode: read_mode(mode),
            buffer: Default::default(),
            failed: false,
        }
    }
}

/// A scan of a replicated table (`ReplicatedTable::scan`): lazy, one batch per shard
/// round trip.
pub(crate) struct ReplicatedScan {
    table: Arc<ReplicatedTable>,
    /// The shards in the order they are read, and the one being read.
    order: Vec<usize>,
    at: usize,
    /// What remains of the current shard's range.
    lower: std::ops::Bound<Datum>,
    upper: std::ops::Bound<Datum>,
    /// The whole scan's bounds, for the next shard.
    bounds: (std::ops::Bound<Datum>, std::ops::Bound<Datum>),
    reverse: bool,
    mode: crate::replica::ReadMode,
    buffer: std::collections::VecDeque<Datum>,
    failed: bool,
}

impl ReplicatedScan {
    /// Fetches the current shard's next batch; `Ok(false)` once every shard is read.
    fn refill(&mut self) -> reql::Result<bool> {
        while let Some(&shard) = self.order.get(self.at) {
            let slot = self.table.slot(shard)?;
            let wait = self.table.wait;
            let (lower, upper, reverse) = (self.lower.clone(), self.upper.clone(), self.reverse);
            let mode = self.mode;
            let answer = wait_for(&self.table.runtime, async move {
                let rs = ReplicatedTable::route(&slot, wait, Op::Read).await?;
                let mut reader = rs.range(mode, lower, upper, reverse, SCAN_BATCH);
                let docs = reader.next_batch().await?;
                Ok::<_, RouteError>((docs, reader.lower, reader.upper, reader.done))
            });
            let (docs, lower, upper, done) = answer
                .unwrap_or(Err(RouteError::LostContact(Op::Read)))
                .map_err(|e| e.to_reql())?;
            if done || docs.is_none() {
                // On to the next shard, from the whole scan's bounds.
                self.at += 1;
                self.lower = self.bounds.0.clone();
                self.upper = self.bounds.1.clone();
            } else {
                self.lower = lower;
                self.upper = upper;
            }
            if let Some(docs) = docs {
                self.buffer.extend(docs);
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Iterator for ReplicatedScan {
    type Item = reql::Result<Datum>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(d) = self.buffer.pop_front() {
                return Some(Ok(d));
            }
            if self.failed {
                return None;
            }
            match self.refill() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
