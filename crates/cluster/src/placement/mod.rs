//! Table placement: which servers hold each shard's replicas and which is its primary,
//! for `table_create` and `reconfigure` (RethinkDB's `table_generate_config`,
//! `src/clustering/administration/tables/generate_config.cc`). Pure: servers, their
//! load, the table's current placement and the request in; shards or RethinkDB's error
//! out. No randomness; every tie is broken by a stable order.
//!
//! Follows RethinkDB in: the checks and their order and texts (`validate_params`: zero
//! replicas, the shard limits, a primary tag without replicas, a non-voting tag without
//! a count, two tags sharing a server; then, tag by tag in name order, more replicas
//! than servers with the tag); the costs (a primary costs 10, a secondary 8; a server's
//! load from other tables is `8 × replicas + 2 × primaries`); the greedy choice of
//! `pick_best_pairings`, which ranks a server by this table's cost on it, then the
//! backfill cost of its cheapest shard (0 primary, 1 voting replica, 2 non-voting
//! replica, 3 nothing, averaged over the old shards the new one overlaps), then its
//! load from other tables; primaries picked first in the primary tag, then the other
//! replicas; the primary is voting even when its tag is non-voting.
//!
//! Differs from RethinkDB in: the first order of servers among equals is by name then
//! id (RethinkDB's is by server UUID; later ties are first-come first-served in both,
//! as in its `std::multiset`); a reconfigure that changes the number of shards compares
//! new and old shards as equal slices of the key space, not by their split points; the
//! shard limit is 64 (Ponder's, as in the term checks); the caller supplies the load
//! (RethinkDB reads every other table's configuration) and the usable servers.

use std::collections::{BTreeMap, BTreeSet};

use reql::error::op_failed;
use reql::ReqlError;

mod pick;
pub mod repair;
#[cfg(test)]
mod tests;

use pick::{pick_best, Candidate};

/// Cost of being a shard's primary (RethinkDB's `PRIMARY_USAGE_COST`).
const PRIMARY_COST: u64 = 10;
/// Cost of being one of a shard's other replicas (`SECONDARY_USAGE_COST`).
const SECONDARY_COST: u64 = 8;
/// Most shards a table may have.
pub const MAX_SHARDS: u32 = 64;

/// What a server already holds of other tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Replicas of other tables' shards (primaries included).
    pub replicas: u32,
    /// Of which primaries.
    pub primaries: u32,
}

impl Load {
    /// RethinkDB's `calculate_server_usage` of this load.
    fn cost(self) -> u64 {
        SECONDARY_COST * u64::from(self.replicas)
            + (PRIMARY_COST - SECONDARY_COST) * u64::from(self.primaries)
    }
}

/// A server placement may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Server id.
    pub id: String,
    /// Server name (for error messages and tie-breaking).
    pub name: String,
    /// Server tags (a set: a repeated tag counts once).
    pub tags: Vec<String>,
    /// Its load from other tables (never the table being placed).
    pub load: Load,
}

/// The requested configuration (`shards`, `replicas`, `primary_replica_tag`,
/// `nonvoting_replica_tags`); `replicas: n` is `{default: n}` with primary tag
/// `default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Number of shards.
    pub shards: u32,
    /// Replicas per shard, by server tag.
    pub replicas: BTreeMap<String, u32>,
    /// The tag whose servers hold the primaries.
    pub primary_tag: String,
    /// Tags whose replicas do not vote.
    pub nonvoting_tags: BTreeSet<String>,
}

impl Request {
    /// `shards` shards of `replicas` replicas on servers tagged `default`.
    pub fn count(shards: u32, replicas: u32) -> Self {
        Request {
            shards,
            replicas: BTreeMap::from([("default".to_string(), replicas)]),
            primary_tag: "default".into(),
            nonvoting_tags: BTreeSet::new(),
        }
    }
}

/// Where one shard lives, in server ids (each list in the servers' stable order).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardPlacement {
    /// The primary (also in `voting`).
    pub primary: String,
    /// The voting replicas, primary included.
    pub voting: Vec<String>,
    /// The non-voting replicas.
    pub nonvoting: Vec<String>,
    /// Each replica's incarnation, by server id (none: 0, a replica placed when the
    /// table was made): a replica placed again on a server that dropped it is a new
    /// member of the shard's Raft group, with a node id of its own
    /// (`replication::member_id`). Set by [`carry_incarnations`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub incarnations: BTreeMap<String, u64>,
    /// What emergency repairs made of this shard's group (`repair`): none for a shard
    /// never repaired.
    #[serde(default, skip_serializing_if = "Lineage::is_original")]
    pub lineage: Lineage,
}

/// The emergency repairs of one shard's group (`reconfigure(emergency_repair=...)`):
/// each repair starts a new group of new members, seeded by one of them, and abandons
/// every member of the groups before it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lineage {
    /// How many repairs the shard went through (0: its group is the one the table was
    /// made with).
    #[serde(default)]
    pub epoch: u64,
    /// The Raft node id of the member that starts this epoch's group (from its
    /// server's copy of the group before, if it has one; empty for an erased shard).
    #[serde(default)]
    pub seed: Option<replication::NodeId>,
    /// The node ids of every member of the earlier epochs' groups: a copy of one is
    /// dropped at once wherever it is found, never opened to vote or serve.
    #[serde(default)]
    pub abandoned: Vec<replication::NodeId>,
}

impl Lineage {
    /// Never repaired.
    pub fn is_original(&self) -> bool {
        self.epoch == 0 && self.seed.is_none() && self.abandoned.is_empty()
    }
}

impl ShardPlacement {
    /// Every replica, voting or not (a table config's `replicas`).
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.voting.iter().chain(self.nonvoting.iter())
    }

    /// Whether `server` holds a replica (voting or not).
    pub fn holds(&self, server: &str) -> bool {
        self.all().any(|s| s == server)
    }

    /// The incarnation of `server`'s replica, if it holds one.
    pub fn incarnation(&self, server: &str) -> Option<u64> {
        self.holds(server)
            .then(|| self.incarnations.get(server).copied().unwrap_or(0))
    }

    /// The Raft node id of `server`'s replica, if it holds one.
    pub fn member(&self, server: &str) -> Option<replication::NodeId> {
        replication::member_id(server, self.incarnation(server)?).ok()
    }

    /// The same servers in the same roles (incarnations aside).
    pub fn same_servers(&self, other: &ShardPlacement) -> bool {
        self.primary == other.primary
            && self.voting == other.voting
            && self.nonvoting == other.nonvoting
    }
}

/// Proposes a fresh random incarnation for every replica of `new` (the proposer's
/// part; the catalog then keeps the incarnation of every replica that stays,
/// [`carry_incarnations`], against the placement it really has).
pub fn propose_incarnations(new: &mut [ShardPlacement]) {
    for shard in new.iter_mut() {
        let servers: Vec<String> = shard.all().cloned().collect();
        shard.incarnations = servers
            .into_iter()
            .map(|s| (s, fresh_incarnation()))
            .collect();
    }
}

/// Gives each replica of `new` its incarnation, deterministically (the catalog's apply
/// step): a server that holds a replica of the same shard in `old` keeps its own; a
/// server placed there anew takes the one proposed (`propose_incarnations`: random, so
/// it never reuses the node id of a copy it dropped, whatever the proposer saw).
/// With another number of shards every replica is new.
///
/// An emergency repair (`new`'s epoch one past `old`'s) keeps every proposed
/// incarnation (all fresh: the repaired group is new); any other change of a shard
/// keeps its lineage.
pub fn carry_incarnations(old: &[ShardPlacement], new: &mut [ShardPlacement]) {
    let same_cut = old.len() == new.len();
    for (i, shard) in new.iter_mut().enumerate() {
        let before = old.get(i).filter(|_| same_cut);
        if let Some(b) = before {
            if shard.lineage.epoch == b.lineage.epoch + 1 && !shard.incarnations.is_empty() {
                continue;
            }
            shard.lineage = b.lineage.clone();
        }
        let servers: Vec<String> = shard.all().cloned().collect();
        let proposed = std::mem::take(&mut shard.incarnations);
        shard.incarnations = servers
            .into_iter()
            .filter_map(|s| {
                let inc = match before.and_then(|b| b.incarnation(&s)) {
                    Some(kept) => kept,
                    None => proposed.get(&s).copied().unwrap_or(0),
                };
                (inc != 0).then_some((s, inc))
            })
            .collect();
    }
}

/// A random incarnation whose low half (what a node id keeps) is not 0.
pub fn fresh_incarnation() -> u64 {
    let (a, _) = uuid::Uuid::new_v4().as_u64_pair();
    (a & 0xFFFF_FFFF).max(1)
}

/// Adds a table's placement to the servers' loads (RethinkDB's
/// `calculate_server_usage`); sum every table but the one being placed.
pub fn add_load(loads: &mut BTreeMap<String, Load>, shards: &[ShardPlacement]) {
    for s in shards {
        for id in s.all() {
            loads.entry(id.clone()).or_default().replicas += 1;
        }
        loads.entry(s.primary.clone()).or_default().primaries += 1;
    }
}

/// Places a table's shards: `current` is its placement when reconfiguring (None when
/// creating it). Errors are RethinkDB's (`OpFailed`).
pub fn place(
    servers: &[Server],
    current: Option<&[ShardPlacement]>,
    req: &Request,
) -> Result<Vec<ShardPlacement>, ReqlError> {
    let order = stable_order(servers);
    let with_tag = |tag: &str| -> Vec<usize> {
        order
            .iter()
            .copied()
            .filter(|&i| servers[i].tags.iter().any(|t| t == tag))
            .collect()
    };
    validate(servers, req, &with_tag)?;
    let n = req.shards as usize;
    // A new table ranks servers by their whole load; a reconfigured one as RethinkDB
    // does (this table first, then where the data is, then the other tables).
    let whole_load = current.is_none();
    let mut out: Vec<Chosen> = vec![Chosen::default(); n];
    for (tag, &count) in &req.replicas {
        if count == 0 {
            continue;
        }
        let members = with_tag(tag);
        if members.len() < count as usize {
            return Err(op_failed(format!(
                "Can't put {count} replicas on servers with the tag `{tag}` because there are only {} servers with the tag `{tag}`. It's impossible to have more replicas of the data than there are servers.",
                members.len()
            )));
        }
        let mut cands: Vec<Candidate> = members
            .iter()
            .map(|&i| Candidate::new(&servers[i], i, n, current))
            .collect();
        let primaries = *tag == req.primary_tag;
        if primaries {
            let picks = pick_best(n, 1, cands.clone(), PRIMARY_COST, whole_load);
            for (shard, c) in picks {
                out[shard].primary = Some(c);
                out[shard].voting.insert(c);
                // The second round sees this round's choices: the server's cost for
                // this table grows and it cannot take the same shard again.
                if let Some(cand) = cands.iter_mut().find(|x| x.server == c) {
                    cand.self_cost += PRIMARY_COST;
                    cand.mine.replicas += 1;
                    cand.mine.primaries += 1;
                    cand.pairings.retain(|p| p.shard != shard);
                }
            }
        }
        let others = count as usize - usize::from(primaries);
        let nonvoting = req.nonvoting_tags.contains(tag);
        for (shard, c) in pick_best(n, others, cands, SECONDARY_COST, whole_load) {
            if nonvoting {
                out[shard].nonvoting.insert(c);
            } else {
                out[shard].voting.insert(c);
            }
        }
    }
    let rank: BTreeMap<usize, usize> = order.iter().enumerate().map(|(r, &i)| (i, r)).collect();
    let ids = |set: &BTreeSet<usize>| {
        let mut v: Vec<usize> = set.iter().copied().collect();
        v.sort_by_key(|i| rank.get(i).copied());
        v.into_iter().map(|i| servers[i].id.clone()).collect()
    };
    out.iter()
        .map(|c| {
            let primary = c.primary.ok_or_else(|| {
                reql::error::internal("placement chose no primary replica for a shard")
            })?;
            Ok(ShardPlacement {
                primary: servers[primary].id.clone(),
                voting: ids(&c.voting),
                nonvoting: ids(&c.nonvoting),
                incarnations: BTreeMap::new(),
                lineage: Default::default(),
            })
        })
        .collect()
}

/// Servers' indexes by name, then id: the first order among equals.
fn stable_order(servers: &[Server]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..servers.len()).collect();
    order.sort_by(|&a, &b| {
        (&servers[a].name, &servers[a].id).cmp(&(&servers[b].name, &servers[b].id))
    });
    order
}

/// RethinkDB's `validate_params`, in its order.
fn validate(
    servers: &[Server],
    req: &Request,
    with_tag: &dyn Fn(&str) -> Vec<usize>,
) -> Result<(), ReqlError> {
    if req.shards == 0 {
        return Err(op_failed("Every table must have at least one shard."));
    }
    if req.replicas.values().map(|&n| u64::from(n)).sum::<u64>() == 0 {
        return Err(op_failed("You must set `replicas` to at least one. `replicas` includes the primary replica; if there are zero replicas, there is nowhere to put the data."));
    }
    if req.shards > MAX_SHARDS {
        return Err(op_failed(format!(
            "Maximum number of shards is {MAX_SHARDS}."
        )));
    }
    let tag = &req.primary_tag;
    if req.replicas.get(tag).copied().unwrap_or(0) == 0 {
        return Err(op_failed(format!("Can't use server tag `{tag}` for primary replicas because you specified no replicas in server tag `{tag}`.")));
    }
    for t in &req.nonvoting_tags {
        if !req.replicas.contains_key(t) {
            return Err(op_failed(format!("You specified that the replicas in server tag `{t}` should be non-voting, but you didn't specify a number of replicas in server tag `{t}`.")));
        }
    }
    let mut claimed: BTreeMap<usize, &str> = BTreeMap::new();
    for (tag, &count) in &req.replicas {
        if count == 0 {
            continue;
        }
        for i in with_tag(tag) {
            if let Some(first) = claimed.get(&i) {
                return Err(op_failed(format!("Server tags `{tag}` and `{first}` overlap; the server `{}` has both tags. The server tags used for replication settings for a given table must be non-overlapping.", servers[i].name)));
            }
            claimed.insert(i, tag);
        }
    }
    Ok(())
}

/// The servers chosen for one shard (indexes into `servers`).
#[derive(Debug, Clone, Default)]
struct Chosen {
    primary: Option<usize>,
    voting: BTreeSet<usize>,
    nonvoting: BTreeSet<usize>,
}
