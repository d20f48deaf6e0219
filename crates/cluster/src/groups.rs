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
//! Emergency repair (docs/clustering.md, "Emergency repair"): a repaired shard's group
//! is new (fresh incarnations, `ShardPlacement::lineage`): its seed copies its
//! server's abandoned copy's documents before its machine opens, starts the group alone
//! and seals them as a snapshot; a copy whose node id the lineage abandons is dropped
//! at once wherever it is found, never opened.
//!
//! A single server's tables converted at its first join (`founder`) start the same
//! way: this server is their shards' seed, with the documents copied from the tables'
//! local spaces.
//!
//! Resharding (docs/clustering.md, "Resharding"; the procedure is `crate::reshard`):
//! each generation of a table's shards has groups and storage of its own (shard `i` of
//! generation `g` is at position [`slot_of`]`(g, i)`), so a server holds the old shards
//! and the new ones side by side until the switch.
//!
//! Invariants: the catalog's apply task only opens machines (synchronous) and spawns the
//! groups' start on the runtime, never waits for them; a write waits for its shard's
//! group to be started on this node (bounded by the route's deadline); a group id is a
//! function of the table id and shard position, the same on every node.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use datum::{Datum, Version};
use replication::{ClientPolicy, GroupId, Host, Node, NodeId, Router, SharedTransport};
use store::{Applied, CacheBudget, GroupCommit, ReplicaOptions, ShardMachine, StoreChange};

use crate::catalog::TableEntry;
use crate::placement::ShardPlacement;
use crate::replica::{wait_for, Mark, Op, ReplicatedShard, RouteError, RoutePolicy, ShardIndexes};

#[path = "groups_index.rs"]
mod index;
pub(crate) use index::IndexName;
#[path = "groups_chunks.rs"]
mod chunks;
#[path = "groups_feeds.rs"]
mod feeds;
#[path = "groups_founder.rs"]
pub(crate) mod founder;
#[path = "groups_repair.rs"]
mod repair;

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
    /// One lock per group: the tasks that retire and start this server's copies of a
    /// group run one after the other (`settle`), so two never open copies at once.
    settling: parking_lot::Mutex<std::collections::HashMap<GroupId, Arc<tokio::sync::Mutex<()>>>>,
    /// Where the empty stand-ins of shards this server holds no replica of live (an
    /// in-memory engine: a table's layout needs a shard per range; `TableHandle` reads
    /// through the routes instead).
    stand_ins: OnceLock<(Arc<dyn storage::Engine>, Arc<GroupCommit>)>,
}

/// How far apart the positions of two generations' shards are (a table has at most 64
/// shards, so generations never overlap).
const GENERATION_STRIDE: usize = 64;

/// The position naming shard `shard` of a table's shards of generation `generation`
/// (its group, `group_of`, and its storage): generation 0 is where tables always were.
pub fn slot_of(generation: u64, shard: usize) -> usize {
    (generation as usize)
        .wrapping_mul(GENERATION_STRIDE)
        .wrapping_add(shard)
}

/// The Raft group of the shard at position `shard` (`slot_of`) of table `table_id`
/// (never the catalog's group 0).
pub fn group_of(table_id: &str, shard: usize) -> GroupId {
    let base = replication::node_id(table_id).unwrap_or(1);
    GroupId(base.wrapping_add(shard as u64).max(1))
}

/// Where incarnation `inc` of this server's replica of shard `shard` of table
/// `table_id` keeps its log and state (incarnation 0 where replicas were always kept).
fn prefix_of(table_id: &str, shard: usize, inc: u64) -> String {
    if inc == 0 {
        format!("raft.t{table_id}.s{shard}")
    } else {
        format!("raft.t{table_id}.i{inc}.s{shard}")
    }
}

/// The incarnations of shard `shard` of table `table_id` whose storage `engine` holds
/// (as `prefix_of` names it), ascending.
fn stored_incarnations(engine: &dyn storage::Engine, table_id: &str, shard: usize) -> Vec<u64> {
    let head = format!("raft.t{table_id}.");
    let parse = |rest: &str| -> Option<u64> {
        let (inc, rest) = match rest.strip_prefix('i') {
            Some(r) => {
                let (n, r) = r.split_once('.')?;
                (n.parse().ok()?, r)
            }
            None => (0, rest),
        };
        let n = rest.strip_prefix('s')?.split('.').next()?;
        (n.parse::<usize>().ok()? == shard).then_some(inc)
    };
    let mut incs: Vec<u64> = engine
        .space_names()
        .unwrap_or_default()
        .iter()
        .filter_map(|name| parse(name.strip_prefix(&head)?))
        .collect();
    incs.sort_unstable();
    incs.dedup();
    incs
}

/// How often a retiring replica looks whether its group let it go.
const RETIRE_POLL: Duration = Duration::from_millis(200);

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
            settling: Default::default(),
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

    /// The voters of a shard as route candidates. A voter whose address is not known
    /// yet (its server not connected again after a restart) stays a candidate with no
    /// address: the cluster transport dials a node's server where membership knows it
    /// (`replication::Resolving`), so the route reaches it once it is connected.
    fn candidates(&self, place: &ShardPlacement) -> Vec<(NodeId, Node)> {
        place
            .voting
            .iter()
            .filter_map(|v| {
                let address = (self.addresses)(v).unwrap_or_default();
                Some((place.member(v)?, Node::new(address)))
            })
            .collect()
    }

    /// Opens this node's replicas of `e`'s shards (its machines now, its groups on the
    /// runtime): the shards, in key order, for the table's layout, and the table's write
    /// path. Copies of other incarnations found in storage (a move not finished when
    /// the server stopped) are opened first and retired.
    pub(crate) fn open(
        &self,
        engine: Arc<dyn storage::Engine>,
        e: &TableEntry,
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
        feeds: Arc<changefeed::Hub>,
    ) -> Result<(Vec<Arc<store::Shard>>, Arc<ReplicatedTable>), store::StoreError> {
        self.build(engine, e, None, commit, cache, feeds)
    }

    /// The table `old` with the placement of `e` (same shards): a replica that stays
    /// (same incarnation) is kept as it is; a replica no longer placed here retires
    /// once its group made it a non-voter (the leader's moves), and one placed here
    /// anew opens once no other copy of the shard's group is open here.
    pub(crate) fn reopen(
        &self,
        engine: Arc<dyn storage::Engine>,
        e: &TableEntry,
        old: (&ReplicatedTable, &[Arc<store::Shard>]),
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
        feeds: Arc<changefeed::Hub>,
    ) -> Result<(Vec<Arc<store::Shard>>, Arc<ReplicatedTable>), store::StoreError> {
        self.build(engine, e, Some(old), commit, cache, feeds)
    }

    fn build(
        &self,
        engine: Arc<dyn storage::Engine>,
        e: &TableEntry,
        old: Option<(&ReplicatedTable, &[Arc<store::Shard>])>,
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
        feeds: Arc<changefeed::Hub>,
    ) -> Result<(Vec<Arc<store::Shard>>, Arc<ReplicatedTable>), store::StoreError> {
        let ranges = crate::shards::Sharded::ranges(&e.splits)?;
        let count = ranges.len();
        let mut shards = Vec::with_capacity(count);
        let mut slots = Vec::with_capacity(count);
        let mut local = Vec::with_capacity(count);
        let mut wanted = Vec::with_capacity(count);
        let mut remote = false;
        let mut indexes = Vec::with_capacity(count);
        for (i, (range, place)) in ranges.into_iter().zip(&e.placement).enumerate() {
            let pos = slot_of(e.generation, i);
            let group = group_of(&e.id, pos);
            let want = place.incarnation(&self.me);
            // Kept as it is: the same replica (or none) here, and for a client the
            // same voters to ask.
            if let Some((o, o_shards)) = old {
                let same_client = want.is_none()
                    && o.placement.get(i).is_some_and(|p| {
                        p.voting == place.voting && p.incarnations == place.incarnations
                    });
                if (want.is_some() && o.local.get(i) == Some(&want))
                    || (same_client && o.local.get(i) == Some(&None))
                {
                    shards.push(o_shards[i].clone());
                    slots.push(o.slots[i].clone());
                    local.push(want);
                    wanted.push(o.wanted[i].clone());
                    indexes.push(o.indexes[i].clone());
                    remote |= want.is_none();
                    continue;
                }
                // Replaced: what was started for the old plan stops where it waits.
                if let Some(w) = o.wanted.get(i) {
                    w.store(false, Ordering::SeqCst);
                }
            }
            let retiring: Vec<u64> = stored_incarnations(&*engine, &e.id, pos)
                .into_iter()
                .filter(|inc| Some(*inc) != want)
                .collect();
            let flag = Arc::new(AtomicBool::new(true));
            local.push(want);
            wanted.push(flag.clone());
            let Some(inc) = want else {
                // Not a replica here: a client of the shard's group.
                let rs = ReplicatedShard::client(
                    group,
                    self.candidates(place),
                    &range,
                    &e.primary_key,
                    self.transport.clone(),
                    self.route,
                );
                let name = format!("{}.s{pos}", e.id);
                shards.push(self.stand_in(name, &cache, &feeds, range.clone())?);
                slots.push(Arc::new(OnceLock::from(rs)));
                indexes.push(None);
                remote = true;
                let member = None;
                self.settle(
                    group,
                    (&e.id, pos, &place.lineage.abandoned),
                    retiring,
                    range,
                    (&cache, &commit),
                    member,
                    flag,
                );
                continue;
            };
            let prefix = prefix_of(&e.id, pos, inc);
            let me_id = replication::member_id(&self.me, inc).ok();
            let seeds = place.lineage.seed.is_some() && place.lineage.seed == me_id;
            if seeds {
                // This epoch's group starts from this server's abandoned copy (before
                // its machine opens on the copied documents).
                repair::seed_from_abandoned(&*engine, &e.id, pos, &prefix, &self.me, place)
                    .map_err(|e| store::StoreError::Corrupt(e.to_string()))?;
            }
            let machine = ShardMachine::open(
                engine.clone(),
                ReplicaOptions {
                    prefix: prefix.clone(),
                    commit: commit.clone(),
                    cache: cache.clone(),
                    feeds: feeds.clone(),
                    range: range.clone(),
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
            let start = Start {
                inc,
                prefix,
                machine,
                primary_key: e.primary_key.clone(),
                // Only the replicas a table was made with start its group; any later
                // replica is added by the group's leader (a fresh copy that started a
                // group of its own would split the shard in two).
                // A repaired shard's seed starts its new group alone: the others join
                // it empty (a voter without the documents must never lead it).
                bootstrap: if seeds {
                    Some(vec![(self.me.clone(), me_id)])
                } else {
                    (place.primary == self.me && inc == 0 && place.lineage.epoch == 0).then(|| {
                        place
                            .voting
                            .iter()
                            .map(|v| (v.clone(), place.member(v)))
                            .collect()
                    })
                },
                indexes: ix,
                slot: slot.clone(),
                seeds,
            };
            self.settle(
                group,
                (&e.id, pos, &place.lineage.abandoned),
                retiring,
                range,
                (&cache, &commit),
                Some(start),
                flag,
            );
            shards.push(shard);
            slots.push(slot);
        }
        let table = ReplicatedTable {
            generation: e.generation,
            slots,
            local,
            wanted,
            placement: e.placement.clone(),
            indexes,
            leader_built: Default::default(),
            runtime: self.runtime.clone(),
            wait: self.route.deadline,
            remote,
            feeds: Default::default(),
        };
        Ok((shards, Arc::new(table)))
    }

    /// On the runtime: retires this server's copies of `group` of incarnations
    /// `retiring` one after the other (each opened if it is not, kept until its group
    /// no longer counts it as a voter, then removed with its storage), then starts
    /// `start`'s member, unless `wanted` was cleared meanwhile (a newer placement).
    /// A copy whose node id is `abandoned` (a member of a group an emergency repair
    /// replaced) is dropped at once, never opened.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        group: GroupId,
        (table, shard, abandoned): (&str, usize, &[NodeId]),
        retiring: Vec<u64>,
        range: store::KeyRange,
        (cache, commit): (&CacheBudget, &Arc<GroupCommit>),
        start: Option<Start>,
        wanted: Arc<AtomicBool>,
    ) {
        if retiring.is_empty() && start.is_none() {
            return;
        }
        let (host, router, transport) = (
            self.host.clone(),
            self.router.clone(),
            self.transport.clone(),
        );
        let (addresses, policy, client) = (self.addresses.clone(), self.route, self.client);
        let me = self.me.clone();
        let (table, cache, commit) = (table.to_owned(), cache.clone(), commit.clone());
        let abandoned = abandoned.to_vec();
        let lock = self.settling.lock().entry(group).or_default().clone();
        self.runtime.spawn(async move {
            let _turn = lock.lock().await;
            let start_id = start
                .as_ref()
                .and_then(|s| replication::member_id(&me, s.inc).ok());
            // The copy open here (an earlier plan's), then those only in storage.
            let mut leaving: Vec<(NodeId, Option<u64>)> = Vec::new();
            if let Some(m) = host.member(group) {
                let id = m.raft.metrics().borrow().id;
                if Some(id) == start_id {
                    return; // Started already: nothing to do.
                }
                leaving.push((id, None));
            }
            for inc in retiring {
                match replication::member_id(&me, inc) {
                    Ok(id) if !leaving.iter().any(|(l, _)| *l == id) => {
                        leaving.push((id, Some(inc)))
                    }
                    _ => {}
                }
            }
            for (id, inc) in leaving {
                if abandoned.contains(&id) {
                    let dropped = match inc {
                        None => host.remove(group).await,
                        Some(inc) => replication::drop_group_storage(
                            &*host.engine(),
                            &prefix_of(&table, shard, inc),
                        ),
                    };
                    if let Err(e) = dropped {
                        tracing::warn!("group {group}: could not drop an abandoned copy: {e}");
                        return;
                    }
                    tracing::info!(
                        "group {group}: this server's abandoned copy (node {id}) dropped"
                    );
                    continue;
                }
                if let Some(inc) = inc {
                    let prefix = prefix_of(&table, shard, inc);
                    let range = range.clone();
                    let opened = open_retiring(&host, group, id, &prefix, range, (&cache, &commit));
                    if let Err(e) = opened.await {
                        tracing::warn!("group {group}: could not open a retiring copy: {e}");
                        return;
                    }
                }
                if !retired(&host, group, id).await {
                    return;
                }
                if let Err(e) = host.remove(group).await {
                    tracing::warn!("group {group}: could not remove a retired copy: {e}");
                    return;
                }
                tracing::info!("group {group}: this server's copy (node {id}) retired");
            }
            let (Some(start), Some(id)) = (start, start_id) else {
                return;
            };
            if !wanted.load(Ordering::SeqCst) {
                return;
            }
            let member = match host.open_as(group, id, &start.prefix, start.machine).await {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("could not open the group {group} of a table shard: {e}");
                    return;
                }
            };
            if let Some(voters) = &start.bootstrap {
                bootstrap(&host, group, voters, &addresses, policy.deadline).await;
            }
            if start.seeds {
                repair::seal(&host, group, &member.raft, policy.deadline).await;
            }
            let rs = ReplicatedShard::indexed(
                group,
                (*member.proposer).clone(),
                start.indexes,
                &start.primary_key,
                transport,
                policy,
                client,
            );
            rs.register(&router);
            let _ = start.slot.set(rs);
        });
    }

    /// Stops and drops this node's replicas of the table with `id` at positions `slots`
    /// (`slot_of`), and any storage of the table's (earlier incarnations and
    /// generations).
    pub(crate) fn remove(&self, id: &str, slots: Vec<usize>, engine: Arc<dyn storage::Engine>) {
        let host = self.host.clone();
        let groups: Vec<GroupId> = slots.iter().map(|&i| group_of(id, i)).collect();
        let head = format!("raft.t{id}.");
        self.runtime.spawn(async move {
            for g in groups {
                let _ = host.remove(g).await;
            }
            for name in engine.space_names().unwrap_or_default() {
                if name.starts_with(&head) {
                    let _ = engine.drop_space(&name);
                }
            }
        });
    }

    /// Stops and drops this node's replicas of the table with `id` at positions `slots`
    /// only (the shards a resharding replaced), every incarnation's storage of them.
    pub(crate) fn remove_slots(
        &self,
        id: &str,
        slots: Vec<usize>,
        engine: Arc<dyn storage::Engine>,
    ) {
        let host = self.host.clone();
        let id = id.to_owned();
        self.runtime.spawn(async move {
            for slot in slots {
                let _ = host.remove(group_of(&id, slot)).await;
                for inc in stored_incarnations(&*engine, &id, slot) {
                    let prefix = prefix_of(&id, slot, inc);
                    if let Err(e) = replication::drop_group_storage(&*engine, &prefix) {
                        tracing::warn!("table {id}: could not drop a replaced shard's copy: {e}");
                    }
                }
            }
        });
    }

    /// The positions of the shards of table `id` this node has storage of that belong
    /// to none of the `(generation, shards)` of `keep` (the table's shards and those of
    /// a resharding under way): what a resharding that finished while this server was
    /// away left behind.
    pub(crate) fn stale_slots(
        engine: &dyn storage::Engine,
        id: &str,
        keep: &[(u64, usize)],
    ) -> Vec<usize> {
        let head = format!("raft.t{id}.");
        let mut found: Vec<usize> = engine
            .space_names()
            .unwrap_or_default()
            .iter()
            .filter_map(|name| {
                let rest = name.strip_prefix(&head)?;
                let rest = match rest.strip_prefix('i') {
                    Some(r) => r.split_once('.')?.1,
                    None => rest,
                };
                rest.strip_prefix('s')?.split('.').next()?.parse().ok()
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        found.retain(|s| {
            !keep
                .iter()
                .any(|&(g, n)| (0..n).any(|i| slot_of(g, i) == *s))
        });
        found
    }
}

/// What starting this server's member of a shard's group needs.
struct Start {
    inc: u64,
    prefix: String,
    machine: ShardMachine,
    primary_key: String,
    /// The voters to bootstrap the group with (server id and node id), if this member
    /// starts the group.
    bootstrap: Option<Vec<(String, Option<NodeId>)>>,
    indexes: Arc<ShardIndexes>,
    slot: Arc<OnceLock<ReplicatedShard<SharedTransport>>>,
    /// It starts a repaired shard's group from the documents seeded into it: they must
    /// become a snapshot (`seal`) before anyone joins.
    seeds: bool,
}

/// Opens a copy of `group` that this server no longer holds a replica of (node `id`,
/// storage under `prefix`), so it can go on voting until its group lets it go. Its
/// changes reach no changefeed (they are the table's, seen through its replicas).
async fn open_retiring(
    host: &Host<SharedTransport>,
    group: GroupId,
    id: NodeId,
    prefix: &str,
    range: store::KeyRange,
    (cache, commit): (&CacheBudget, &Arc<GroupCommit>),
) -> Result<(), String> {
    let engine = host.engine();
    let commit = commit.clone();
    let machine = ShardMachine::open(
        engine,
        ReplicaOptions {
            prefix: prefix.to_owned(),
            commit,
            cache: cache.clone(),
            feeds: changefeed::Hub::new(),
            range,
            indexes: vec![],
        },
    )
    .map_err(|e| e.to_string())?;
    host.open_as(group, id, prefix, machine)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Waits until this server's copy of `group` (node `id`) is no voter in a membership
/// it has applied (so no quorum needs it any more): true then, false if the copy was
/// closed meanwhile.
async fn retired(host: &Host<SharedTransport>, group: GroupId, id: NodeId) -> bool {
    loop {
        let Some(m) = host.member(group) else {
            return false;
        };
        let metrics = m.raft.metrics().borrow().clone();
        if metrics.id != id {
            return false;
        }
        let config = &metrics.membership_config;
        let applied = config.log_id().map(|l| l.index) <= metrics.last_applied.map(|l| l.index);
        let voter = config.membership().voter_ids().any(|v| v == id);
        if applied && !voter {
            return true;
        }
        tokio::time::sleep(RETIRE_POLL).await;
    }
}

/// Makes `voters` (server id, node id) the group's first membership once every
/// voter's address is known (within `deadline`; a group already initialised is left
/// as it is).
async fn bootstrap(
    host: &Host<SharedTransport>,
    group: GroupId,
    voters: &[(String, Option<NodeId>)],
    addresses: &Addresses,
    deadline: Duration,
) {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let known: Option<BTreeMap<NodeId, Node>> = voters
            .iter()
            .map(|(v, id)| Some(((*id)?, Node::new(addresses(v)?))))
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
    /// The generation of the shards (`slot_of`).
    generation: u64,
    slots: Vec<Arc<OnceLock<ReplicatedShard<SharedTransport>>>>,
    /// This server's replica of each shard, by incarnation (none: a client).
    local: Vec<Option<u64>>,
    /// Per shard: cleared when a newer placement replaces this one's plan for it (a
    /// member still waiting to start then never does).
    wanted: Vec<Arc<AtomicBool>>,
    /// The placement this table was opened with.
    placement: Vec<ShardPlacement>,
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

    /// The generation of its shards.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The positions (`slot_of`) of its shards' groups and storage.
    pub(crate) fn group_slots(&self) -> Vec<usize> {
        (0..self.slots.len())
            .map(|i| slot_of(self.generation, i))
            .collect()
    }

    /// Marks every shard for the resharding towards `generation` through its log
    /// (`ReplicatedShard::mark`), all at once: Ok once each has the mark applied by its
    /// leader (frozen: their documents are final; open: no copy reaches them any more).
    pub(crate) fn mark(&self, mark: Mark, generation: u64) -> reql::Result<()> {
        let wait = self.wait;
        let asks = (0..self.slots.len()).map(|i| (i, ())).collect();
        let answers = self.ask_shards(asks, move |slot, ()| async move {
            let rs = Self::route(&slot, wait, Op::Write).await;
            Some(match rs {
                Ok(rs) => rs.mark(mark, generation).await,
                Err(e) => Err(e),
            })
        });
        for a in answers {
            a.unwrap_or(Err(RouteError::LostContact(Op::Write)))
                .map_err(|e| e.to_reql())?;
        }
        Ok(())
    }

    /// Whether `placement` is the one this table was opened with (replicas and
    /// incarnations).
    pub(crate) fn placed_as(&self, placement: &[ShardPlacement]) -> bool {
        self.placement == placement
    }

    /// The table is gone: nothing waiting to start for it starts.
    pub(crate) fn abandon(&self) {
        for w in &self.wanted {
            w.store(false, Ordering::SeqCst);
        }
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

    /// How far each of `members` (`(shard, member)`) has applied its shard's log, asked
    /// concurrently: `None` where a member did not answer within `limit`.
    pub(crate) fn applied_by(
        &self,
        members: &[(usize, NodeId)],
        limit: Duration,
    ) -> Vec<Option<u64>> {
        self.ask_shards(members.to_vec(), move |slot, m| async move {
            slot.get()?.applied_by(m, limit).await
        })
    }

    /// Asks for each shard's leader's view of its replication (`table_status`), for the
    /// shards in `shards`: futures to run on the runtime (`wait_all`), several tables'
    /// at once (`crate::Cluster::leader_views`); each `None` where no leader answered
    /// within `limit`, and `None` in place of a shard that does not exist.
    #[allow(clippy::type_complexity)]
    pub(crate) fn leader_view_asks(
        &self,
        shards: &[usize],
        limit: Duration,
    ) -> Vec<
        Option<impl std::future::Future<Output = Option<replication::Progress>> + Send + 'static>,
    > {
        let asks = shards.iter().map(|&i| (i, ())).collect();
        self.asks(asks, move |slot, ()| async move {
            let rs = slot.get()?;
            tokio::time::timeout(limit, rs.progress()).await.ok()?.ok()
        })
    }

    /// The runtime the table's groups run on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// `ask` of each `(shard, argument)` of `asks`, run concurrently on the runtime and
    /// waited for here (a synchronous caller); `None` for a shard that does not exist.
    fn ask_shards<A, R, F>(
        &self,
        asks: Vec<(usize, A)>,
        ask: impl Fn(Arc<OnceLock<ReplicatedShard<SharedTransport>>>, A) -> F,
    ) -> Vec<Option<R>>
    where
        R: Send + 'static,
        F: std::future::Future<Output = Option<R>> + Send + 'static,
    {
        wait_all(&self.runtime, self.asks(asks, ask))
    }

    /// The futures of `ask` for each `(shard, argument)` of `asks`: `None` for a shard
    /// that does not exist.
    fn asks<A, R, F>(
        &self,
        asks: Vec<(usize, A)>,
        ask: impl Fn(Arc<OnceLock<ReplicatedShard<SharedTransport>>>, A) -> F,
    ) -> Vec<Option<F>>
    where
        F: std::future::Future<Output = Option<R>>,
    {
        (asks.into_iter())
            .map(|(i, a)| self.slots.get(i).cloned().map(|slot| ask(slot, a)))
            .collect()
    }
}

/// Runs `futures` concurrently on `runtime` and waits for them here (a synchronous
/// caller): each one's answer, `None` in place of a missing one.
pub(crate) fn wait_all<R, F>(
    runtime: &tokio::runtime::Handle,
    futures: Vec<Option<F>>,
) -> Vec<Option<R>>
where
    R: Send + 'static,
    F: std::future::Future<Output = Option<R>> + Send + 'static,
{
    let n = futures.len();
    let asked = wait_for(runtime, async move {
        let tasks: Vec<_> = futures.into_iter().map(|f| f.map(tokio::spawn)).collect();
        let mut answers = Vec::with_capacity(tasks.len());
        for t in tasks {
            answers.push(match t {
                Some(t) => t.await.ok().flatten(),
                None => None,
            });
        }
        answers
    });
    asked.unwrap_or_else(|| (0..n).map(|_| None).collect())
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
        self.scan_as(lower, upper, reverse, read_mode(mode))
    }

    /// As `scan`, in any of the replicas' read modes (a resharding's `Final`).
    pub(crate) fn scan_as(
        self: &Arc<Self>,
        lower: std::ops::Bound<Datum>,
        upper: std::ops::Bound<Datum>,
        reverse: bool,
        mode: crate::replica::ReadMode,
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
            mode,
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
