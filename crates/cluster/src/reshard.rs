//! Resharding a replicated table (docs/clustering.md, "Resharding"): `reconfigure` with
//! another shard count, a `table_config` write with another number of shards, and
//! `rebalance`. Run by the server that took the request, on an evaluation thread:
//!
//! 1. Split points from the data's distribution: every primary key, read from the
//!    shards' primaries (`majority`), cut by `crate::shards::splits_of_keys` (the
//!    single-server `rebalance`'s rule).
//! 2. `BeginReshard` (catalog): the new shards (generation + 1, placed as `reconfigure`
//!    places them) are recorded, and every server opens their groups, empty, next to
//!    the old ones (`crate::catalog::Pending`); the old shards go on serving the table.
//! 3. Freeze: a freeze entry is committed in each old shard's own log
//!    (`ReplicatedShard::freeze`); from it on every write is refused by whichever
//!    replica leads, with RethinkDB's "primary replica ... not available". Every write
//!    acknowledged before is in the shard's documents, which are now final.
//! 4. Copy: the old shards' documents, read from their primaries (`majority`, after the
//!    freeze), are written into the new shards through their groups as loads (replace;
//!    batches proposed together), then an open entry in each new shard's log ends the
//!    copy (a load after it changes nothing: a copier racing this one, such as a
//!    resumption, can never overwrite the clients' writes). Replicas maintain the
//!    catalog's secondary indexes as entries apply and build them as for any new
//!    replica.
//! 5. Retire: a retire entry in each old shard's log; from it on the old shards answer
//!    no read of the table but this resharding's (`crate::replica::ReadMode::Final`),
//!    so a server that applies the switch late refuses a read (RethinkDB's "primary
//!    replica ... not available") rather than serve the frozen copy after a write was
//!    acknowledged through the new shards: that write follows the switch, which follows
//!    the retirement, so a `majority` read begun after it finds the retirement applied.
//! 6. `FinishReshard` (catalog): the table is the new shards; every server switches its
//!    handle and drops its copies of the old shards.
//!
//! Invariants: the old shards are dropped only by `FinishReshard`, committed only after
//! the whole copy succeeded, so the table never lacks its data; every step is
//! idempotent (a second freeze changes nothing, the copy rewrites the same final
//! documents, the catalog entries accept a retry), so a resharding interrupted by a
//! failure (of this server, or of a shard's quorum) is finished by the next
//! `reconfigure`, `rebalance` or `table_config` write on the table ([`resume`]):
//! rolled forward, never back. Until then the table is readable and refuses writes.
//! The catalog's leader also finishes a resharding it has seen under way for
//! [`RESUME_AFTER`] without this server running it ([`Cluster::resume_stalled_reshards`],
//! each round of the server's cluster loop), so one whose server failed finishes alone.
//!
//! Abandoning (docs/clustering.md, "Abandoning a resharding"): a resharding whose new
//! shards cannot reach a quorum cannot finish. The next `reconfigure`, `rebalance` or
//! `table_config` write on the table abandons it when one of its new shards has no
//! quorum of available replicas and each old shard has one ([`settle`]), and an
//! emergency repair always does (the shards it repairs are the old ones):
//!
//! 7. `AbortReshard` (catalog): refused once `FinishReshard` is committed, and
//!    `FinishReshard` is refused once it is; every server drops its copies of the new
//!    shards. The table's next resharding takes a generation past the abandoned one.
//! 8. Unfreeze: an unfreeze entry in each old shard's log (`store::encode_unfreeze`)
//!    lifts the freeze and the retirement, and makes a later freeze or retirement for
//!    that resharding change nothing.
//! 9. `FinishAbort` (catalog): until it, no resharding of the table begins. Both steps
//!    are idempotent and resumed as a resharding is ([`resume`]).
//!
//! Why it is safe: the catalog's log orders `AbortReshard` and `FinishReshard` of one
//! resharding, and whichever comes first refuses the other. The new shards take
//! clients' writes only from `FinishReshard` on (a server switches its handle when it
//! applies it), so an abandoned resharding's new shards never acknowledged a client's
//! write: dropping them loses nothing. The old shards are unfrozen only after
//! `AbortReshard` is committed, so from then on no `FinishReshard` can switch the table
//! to the new ones: the two generations never both take writes. A copier or a
//! resumption still running elsewhere freezes or retires nothing any more (the old
//! shards' machines ignore those marks of the abandoned generation), and its
//! `FinishReshard` is refused; a server applying the catalog late switches to nothing.
//!
//! [`resume`]: Cluster::resume_reshard
//! [`settle`]: Cluster::settle_reshard

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datum::Datum;

use crate::catalog::{message, CatalogCommand, ReshardDef, TableEntry};
use crate::groups::ReplicatedTable;
use crate::placement::repair::{need, Need};
use crate::placement::ShardPlacement;
use crate::replica::Mark;
use crate::Cluster;

/// How many documents the copy proposes at once.
const COPY_BATCH: usize = 256;

/// How long this server waits for a catalog entry it committed to open the new shards
/// here.
const FOLLOW_WAIT: Duration = Duration::from_secs(10);

/// How long a resharding must have been under way, as the catalog's leader saw it,
/// before that leader finishes it itself.
pub const RESUME_AFTER: Duration = Duration::from_secs(20);

/// A resharding as the catalog's leader follows it: table id, generation, and whether
/// it is the unfreeze of an abandoned one.
type UnderWay = (String, u64, bool);

/// The reshardings of this server: the tables it is resharding now, and when it first
/// saw each other one under way.
#[derive(Default)]
pub(crate) struct Resumes {
    running: parking_lot::Mutex<std::collections::HashSet<String>>,
    seen: parking_lot::Mutex<std::collections::HashMap<UnderWay, Instant>>,
}

/// While alive, table `.1` is being resharded by this server.
struct Running<'a>(&'a Resumes, String);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.lock().remove(&self.1);
    }
}

impl Resumes {
    /// Marks table `id` as resharded here; none if it is already.
    fn run(&self, id: &str) -> Option<Running<'_>> {
        self.running
            .lock()
            .insert(id.to_string())
            .then(|| Running(self, id.to_string()))
    }
}

/// What a resharding makes of a table.
pub(crate) struct Target {
    /// The number of shards.
    pub(crate) shards: u32,
    /// The recorded number of replicas.
    pub(crate) replicas: u32,
    /// Which servers hold each new shard (a `table_config` write names them); none:
    /// placed as `reconfigure` places them.
    pub(crate) placement: Option<Vec<ShardPlacement>>,
    /// Cut anew even with the same number of shards (`rebalance`).
    pub(crate) rebalance: bool,
    /// Only finish the resharding under way (the request changes no sharding).
    pub(crate) resume_only: bool,
}

impl Cluster {
    /// Reshards replicated table `id` to `target` (module note), after finishing any
    /// resharding of it left under way.
    pub(crate) fn reshard_replicated(&self, id: &str, target: Target) -> Result<(), String> {
        let _running = self.reshards.run(id).ok_or_else(|| {
            format!("Table with id `{id}` is being resharded by this server already.")
        })?;
        self.settle_reshard(id)?;
        let old = self.table_of(id)?;
        let same = old.shards == target.shards && !target.rebalance && target.placement.is_none();
        if target.resume_only || same {
            return Ok(()); // What an interrupted resharding was making.
        }
        let r = self.replicated_of(id)?;
        let keys = primary_keys(&r, &old.primary_key)?;
        let splits = crate::shards::splits_of_keys(&keys, target.shards as usize);
        let mut placement = match target.placement {
            Some(p) => p,
            None => self
                .check_placement(
                    target.shards,
                    &reql::Replicas::count(target.replicas),
                    Some(&old.placement),
                )
                .map_err(message)?,
        };
        // The new shards' groups are new: every replica is an original member (it
        // bootstraps with the others) of a group no repair has touched.
        for p in &mut placement {
            p.incarnations.clear();
            p.lineage = Default::default();
        }
        let reshard = ReshardDef {
            // Past any abandoned resharding's (whose late entries may still arrive).
            generation: old.generation.max(old.abandoned.generation) + 1,
            replicas: target.replicas,
            split_points: splits.iter().map(datum::to_json_value).collect(),
            placement,
        };
        self.commit_entry(CatalogCommand::BeginReshard {
            id: id.to_string(),
            reshard,
        })?;
        self.resume_reshard(id)
    }

    /// Settles the resharding of table `id` under way before another change of it:
    /// abandons it when one of its new shards has no quorum of available servers while
    /// each old shard has one (it cannot finish, and the old shards can be unfrozen),
    /// else finishes it ([`Cluster::resume_reshard`]).
    fn settle_reshard(&self, id: &str) -> Result<(), String> {
        let e = self.table_of(id)?;
        if let Some(r) = &e.resharding {
            let up: std::collections::HashSet<String> =
                self.server_records().into_iter().map(|s| s.id).collect();
            let quorum = |p: &ShardPlacement| need(p, &|s: &str| up.contains(s)) == Need::Nothing;
            let new_ok = r.placement.iter().all(quorum);
            let old_ok = e.placement.iter().all(quorum);
            if !new_ok && old_ok {
                tracing::warn!(
                    "table {id}: abandoning its resharding to generation {}: a new shard has \
                     no quorum of available servers",
                    r.generation
                );
                if let Err(e) = self.abandon_reshard(id) {
                    // Refused when it finished meanwhile (its `FinishReshard` came
                    // first): then there is nothing left to abandon.
                    if self.table_of(id)?.resharding.is_some() {
                        return Err(e);
                    }
                }
            } else if !new_ok {
                return Err(format!(
                    "Table `{}.{}` is being resharded, and neither its new shards nor its old \
                     ones have a quorum of available servers; \
                     `reconfigure(emergency_repair=...)` repairs it.",
                    e.db, e.name
                ));
            }
        }
        self.resume_reshard(id)
    }

    /// Abandons the resharding of table `id` under way, if any (`AbortReshard`, step 7
    /// of the module note); its old shards are unfrozen by [`Cluster::resume_reshard`].
    pub(crate) fn abandon_reshard(&self, id: &str) -> Result<(), String> {
        let Some(r) = self.table_of(id)?.resharding else {
            return Ok(());
        };
        self.commit_entry(CatalogCommand::AbortReshard {
            id: id.to_string(),
            generation: r.generation,
        })
    }

    /// Finishes what table `id`'s resharding left under way: the unfreeze of an
    /// abandoned one's old shards (steps 8 and 9 of the module note), or a resharding:
    /// freezes its old shards, copies their documents into the new ones and switches
    /// the table to them (steps 3 to 6). Idempotent.
    pub(crate) fn resume_reshard(&self, id: &str) -> Result<(), String> {
        let e = self.table_of(id)?;
        if e.abandoned.unfreezing {
            // Only once `AbortReshard` is committed (the catalog says so): no
            // `FinishReshard` of it can commit any more.
            let generation = e.abandoned.generation;
            let old = self.replicated_of(id)?;
            old.mark(Mark::Unfreeze, generation).map_err(message)?;
            tracing::info!("table {id}: its abandoned resharding's old shards are unfrozen");
            self.commit_entry(CatalogCommand::FinishAbort {
                id: id.to_string(),
                generation,
            })?;
        }
        let Some(next) = e.resharded() else {
            return Ok(());
        };
        let (old, new) = self.await_pending(id, next.generation)?;
        old.mark(Mark::Freeze, next.generation).map_err(message)?;
        let copied = copy(&old, &new, &next)?;
        // From here a copier still running elsewhere (a resumption racing this one)
        // can no longer overwrite what the table's clients write into the new shards.
        new.mark(Mark::Open, next.generation).map_err(message)?;
        // From here the old shards answer no read of the table: a server that has not
        // applied the switch yet must not serve their frozen documents after a write
        // was acknowledged through the new shards (the table is briefly unavailable
        // there instead, as RethinkDB's is while it reshards).
        old.mark(Mark::Retire, next.generation).map_err(message)?;
        tracing::info!(
            "table {id}: {copied} documents copied into its {} new shards",
            next.shards
        );
        self.commit_entry(CatalogCommand::FinishReshard {
            id: id.to_string(),
            generation: next.generation,
        })
    }

    /// Finishes, each on a thread of its own, the reshardings under way (and the
    /// unfreezes of abandoned ones) that this server has seen under way for
    /// [`RESUME_AFTER`] and is not running (call it on the catalog's leader,
    /// periodically). A failed attempt is tried again after as long.
    pub fn resume_stalled_reshards(&self) {
        let under_way: Vec<UnderWay> = {
            let st = self.catalog.read_state();
            st.tables
                .values()
                .filter_map(|e| match &e.resharding {
                    Some(r) => Some((e.id.clone(), r.generation, false)),
                    None if e.abandoned.unfreezing => {
                        Some((e.id.clone(), e.abandoned.generation, true))
                    }
                    None => None,
                })
                .collect()
        };
        let now = Instant::now();
        let due: Vec<String> = {
            let mut seen = self.reshards.seen.lock();
            seen.retain(|k, _| under_way.contains(k));
            under_way
                .into_iter()
                .filter(|k| {
                    let first = *seen.entry(k.clone()).or_insert(now);
                    if now.duration_since(first) < RESUME_AFTER {
                        return false;
                    }
                    seen.insert(k.clone(), now);
                    true
                })
                .map(|(id, _, _)| id)
                .collect()
        };
        for id in due {
            self.resume_in_background(id);
        }
    }

    /// Finishes what table `id`'s resharding left under way
    /// ([`Cluster::resume_reshard`]) on a thread of its own, unless this server is
    /// resharding it already.
    pub(crate) fn resume_in_background(&self, id: String) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("reshard-resume".into())
            .spawn(move || {
                let Some(_running) = me.reshards.run(&id) else {
                    return;
                };
                match me.resume_reshard(&id) {
                    Ok(()) => tracing::info!("table {id}: an interrupted resharding finished"),
                    Err(e) => tracing::warn!("table {id}: resharding not finished yet: {e}"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("could not start finishing a resharding: {e}");
        }
    }

    /// Applies a catalog command and follows its outcome here.
    fn commit_entry(&self, command: CatalogCommand) -> Result<(), String> {
        let mut g = self.catalog.lock();
        let out = g.apply(command).map_err(message)?;
        self.sync_handles(&out);
        Ok(())
    }

    fn table_of(&self, id: &str) -> Result<TableEntry, String> {
        self.table_by_id(id)
            .ok_or_else(|| format!("Table with id `{id}` does not exist."))
    }

    fn replicated_of(&self, id: &str) -> Result<Arc<ReplicatedTable>, String> {
        self.handle_by_id(id)
            .and_then(|h| h.replicated.clone())
            .ok_or_else(|| format!("Table with id `{id}` is not replicated here."))
    }

    /// The old and the new shards' write paths of table `id` once this server has
    /// opened the new shards of `generation` (it applied `BeginReshard`).
    fn await_pending(
        &self,
        id: &str,
        generation: u64,
    ) -> Result<(Arc<ReplicatedTable>, Arc<ReplicatedTable>), String> {
        let until = Instant::now() + FOLLOW_WAIT;
        loop {
            if let Some(h) = self.handle_by_id(id) {
                let pending = h.pending.as_ref().filter(|p| p.generation == generation);
                if let (Some(old), Some(p)) = (&h.replicated, pending) {
                    return Ok((old.clone(), p.table.clone()));
                }
            }
            if Instant::now() >= until {
                return Err(format!(
                    "Timed out while opening the new shards of table with id `{id}`; \
                     the resharding will be finished by the next reconfiguration."
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Every primary key of the table `r`, encoded, in key order (read from each shard's
/// primary).
fn primary_keys(r: &Arc<ReplicatedTable>, primary_key: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut keys = Vec::new();
    let scan = r.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        reql::ReadMode::Majority,
    );
    for doc in scan {
        let doc = doc.map_err(message)?;
        keys.push(encoded_key(&doc, primary_key)?.1);
    }
    Ok(keys)
}

/// A stored document's primary key, and its encoding.
fn encoded_key(doc: &Datum, primary_key: &str) -> Result<(Datum, Vec<u8>), String> {
    let key = doc
        .get(primary_key)
        .cloned()
        .ok_or_else(|| format!("A stored document has no primary key `{primary_key}`."))?;
    let encoded = datum::keys::encode_primary(&key).map_err(|e| e.message().to_string())?;
    Ok((key, encoded))
}

/// Copies every document of the frozen shards `old` into the new shards `new`, cut as
/// `next` (the table as it will be); how many were copied.
fn copy(
    old: &Arc<ReplicatedTable>,
    new: &ReplicatedTable,
    next: &TableEntry,
) -> Result<u64, String> {
    let ranges = crate::shards::Sharded::ranges(&next.splits).map_err(|e| e.to_string())?;
    let mut batch = Vec::with_capacity(COPY_BATCH);
    let mut copied = 0u64;
    let flush = |batch: &mut Vec<_>| -> Result<(), String> {
        for answer in new.load_all(std::mem::take(batch)) {
            answer.map_err(message)?;
        }
        Ok(())
    };
    // Read as they are after the freeze, and after their retirement too (a resumption
    // of a resharding that got that far rewrites nothing: the new shards are open).
    let scan = old.scan_as(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        crate::replica::ReadMode::Final,
    );
    for doc in scan {
        let doc = doc.map_err(message)?;
        let (key, encoded) = encoded_key(&doc, &next.primary_key)?;
        let shard = ranges
            .iter()
            .position(|r| r.contains(&encoded))
            .ok_or_else(|| "A primary key is in no new shard.".to_string())?;
        batch.push((shard, key, doc));
        copied += 1;
        if batch.len() >= COPY_BATCH {
            flush(&mut batch)?;
        }
    }
    flush(&mut batch)?;
    Ok(copied)
}
