//! `Catalog`: the one writer of the `catalog` and `users` storage spaces.
//!
//! It holds the catalog's state (databases, tables with their index definitions, write
//! hooks and split points, users with their permissions) and the one catalog lock.
//! Applying a `CatalogCommand` has two halves shared by a single server and a
//! replicated catalog (`super::machine`): `stage`, the pure part, validates it against
//! the state and computes the new state on a copy (`CatalogState::step`,
//! `super::step`), staging every record that changed in a batch; and
//! `CatalogGuard::commit_with`, the shell, commits that batch (locally: one storage
//! batch, fsynced, `CatalogGuard::apply`; replicated: the Raft entry's batch) and only
//! then switches the in-memory state: a rejected or unwritten command leaves both
//! untouched. A replicated catalog refuses the local `apply`. Records are keyed by id (`db/<id>`, `table/<id>`), and a table's
//! record is always written whole from this state, so a rename can leave no stale record
//! behind and no other copy can write an old one back.
//!
//! Side effects outside the catalog (storage spaces, shards, index builds, feeds) are the
//! callers': they hold the guard across `apply` and act on its `Outcome`, so no other
//! catalog change interleaves.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use reql::error::op_failed;
use reql::{Durability, ReqlError};
use storage::{Engine, WriteBatch};

use super::command::{CatalogCommand, IndexDefSpec};
use super::ClusterError;
use crate::auth::{Perms, User, ADMIN};

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

const CATALOG: &str = "catalog";
const USERS: &str = "users";
pub(crate) const FORMAT_KEY: &[u8] = b"format";

/// RethinkDB's system database (its tables are served by the admin layer).
pub const SYSTEM_DB: &str = "rethinkdb";

/// A database.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DbEntry {
    pub(crate) id: String,
}

/// One index definition in a table's record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct IndexDef {
    pub(crate) id: String,
    pub(crate) spec: IndexDefSpec,
    /// Persisted once the backfill finished; `false` means "build at start-up".
    pub(crate) ready: bool,
}

/// A table's catalog entry: everything its record holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TableEntry {
    pub(crate) id: String,
    pub(crate) db: String,
    pub(crate) name: String,
    pub(crate) primary_key: String,
    pub(crate) durability: Durability,
    /// `table_config`'s `write_acks`: `true` for `"single"`, `false` for `"majority"`.
    /// Recorded and reported; writes are acknowledged by a majority either way
    /// (docs/clustering.md, "write_acks").
    pub(crate) single_ack: bool,
    pub(crate) shards: u32,
    pub(crate) replicas: u32,
    /// Where the shards are cut: `shards - 1` primary-key values (`crate::shards`).
    pub(crate) splits: Vec<Datum>,
    /// Index definitions by name.
    pub(crate) indexes: BTreeMap<String, IndexDef>,
    /// The write hook function (FUNC term JSON).
    pub(crate) hook: Option<serde_json::Value>,
    /// Which servers hold each shard (empty: this server alone, as on a single server).
    pub(crate) placement: Vec<crate::placement::ShardPlacement>,
    /// How many times the table was resharded while replicated: its shards' groups and
    /// storage are named apart per generation (`crate::groups::slot_of`).
    pub(crate) generation: u64,
    /// The new shards of a resharding under way (docs/clustering.md, "Resharding").
    pub(crate) resharding: Option<Reshard>,
    /// What is left of the reshardings abandoned (`AbortReshard`).
    pub(crate) abandoned: Abandoned,
}

/// What a table keeps of its abandoned reshardings (docs/clustering.md, "Abandoning a
/// resharding").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Abandoned {
    /// The newest abandoned resharding's generation (0: none). A later resharding takes
    /// a generation past it, so nothing of the abandoned one (a late copier's entries,
    /// its `FinishReshard`, its groups and storage names) is ever taken for a newer one.
    pub(crate) generation: u64,
    /// Its old shards may still be frozen (`FinishAbort` is not committed yet): no new
    /// resharding begins until they are unfrozen.
    pub(crate) unfreezing: bool,
}

/// The new shards of a table being resharded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reshard {
    pub(crate) generation: u64,
    pub(crate) replicas: u32,
    pub(crate) splits: Vec<Datum>,
    pub(crate) placement: Vec<crate::placement::ShardPlacement>,
}

impl TableEntry {
    /// The table as it will be once its resharding under way is finished (none when
    /// none is): what its new shards' groups are opened from.
    pub(crate) fn resharded(&self) -> Option<TableEntry> {
        let r = self.resharding.as_ref()?;
        Some(TableEntry {
            shards: r.splits.len() as u32 + 1,
            replicas: r.replicas,
            splits: r.splits.clone(),
            placement: r.placement.clone(),
            generation: r.generation,
            resharding: None,
            abandoned: Abandoned::default(),
            ..self.clone()
        })
    }
}

/// The catalog's state.
#[derive(Clone, Default, Debug, PartialEq)]
pub(crate) struct CatalogState {
    /// Databases by name.
    pub(crate) dbs: BTreeMap<String, DbEntry>,
    /// Tables by `(database name, table name)`.
    pub(crate) tables: BTreeMap<(String, String), TableEntry>,
    /// Users by name.
    pub(crate) users: BTreeMap<String, User>,
}

/// A database `(name, id)` before and after a command.
pub(crate) type DbChange = (Option<(String, String)>, Option<(String, String)>);

/// What an applied command changed, for the caller's side effects (and, replicated,
/// for every replica's: `super::machine::CatalogEffects`).
#[derive(Default, Debug, PartialEq)]
pub struct Outcome {
    /// The database changed: `(name, id)` before and after.
    pub(crate) db: Option<DbChange>,
    /// Every table changed: its entry before and after.
    pub(crate) tables: Vec<(Option<TableEntry>, Option<TableEntry>)>,
    /// The user changed.
    pub(crate) user: Option<String>,
    /// A user's permissions at one scope: before and after.
    pub(crate) perms: Option<(Perms, Perms)>,
}

impl Outcome {
    /// The ids of the tables the command created, changed or dropped.
    pub fn table_ids(&self) -> Vec<String> {
        self.tables
            .iter()
            .filter_map(|(o, n)| n.as_ref().or(o.as_ref()).map(|e| e.id.clone()))
            .collect()
    }

    /// The database created, renamed or dropped: `(name, id)` before and after.
    pub fn db_change(&self) -> Option<&DbChange> {
        self.db.as_ref()
    }

    /// The user whose record changed.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The one table changed, before the command.
    pub(crate) fn table_before(&self) -> Option<&TableEntry> {
        self.tables.first().and_then(|(o, _)| o.as_ref())
    }
}

pub(crate) fn db_key(id: &str) -> Vec<u8> {
    format!("db/{id}").into_bytes()
}

pub(crate) fn table_key(id: &str) -> Vec<u8> {
    format!("table/{id}").into_bytes()
}

/// A database's record (also its `db_config` row).
pub(crate) fn db_record(name: &str, id: &str) -> Datum {
    Datum::from_pairs([("id", Datum::str(id)), ("name", Datum::str(name))])
}

/// A table's record: its configuration, split points, index definitions and hook.
pub(crate) fn table_record(e: &TableEntry) -> Datum {
    let indexes = e
        .indexes
        .iter()
        .map(|(name, d)| {
            Datum::from_pairs([
                ("id", Datum::str(&d.id)),
                ("name", Datum::str(name)),
                (
                    "function",
                    datum::from_json_value(&d.spec.function).unwrap_or(Datum::Null),
                ),
                ("multi", Datum::Bool(d.spec.multi)),
                ("geo", Datum::Bool(d.spec.geo)),
                ("ready", Datum::Bool(d.ready)),
            ])
        })
        .collect();
    let mut pairs = vec![
        ("id", Datum::str(&e.id)),
        ("db", Datum::str(&e.db)),
        ("name", Datum::str(&e.name)),
        ("primary_key", Datum::str(&e.primary_key)),
        ("durability", Datum::str(e.durability.as_str())),
        ("write_acks", Datum::str(write_acks_str(e.single_ack))),
        ("shards", Datum::from(e.shards as f64)),
        ("replicas", Datum::from(e.replicas as f64)),
        ("split_points", Datum::array(e.splits.clone())),
        ("indexes", Datum::array(indexes)),
    ];
    if let Some(f) = &e.hook {
        let f = datum::from_json_value(f).unwrap_or(Datum::Null);
        pairs.push(("write_hook", Datum::from_pairs([("function", f)])));
    }
    if !e.placement.is_empty() {
        pairs.push(("placement", placement_datum(&e.placement)));
    }
    if e.generation > 0 {
        pairs.push(("generation", Datum::from(e.generation as f64)));
    }
    if let Some(r) = &e.resharding {
        let fields = vec![
            ("generation", Datum::from(r.generation as f64)),
            ("replicas", Datum::from(r.replicas as f64)),
            ("split_points", Datum::array(r.splits.clone())),
            ("placement", placement_datum(&r.placement)),
        ];
        pairs.push(("resharding", Datum::from_pairs(fields)));
    }
    if e.abandoned != Abandoned::default() {
        let fields = [
            ("generation", Datum::from(e.abandoned.generation as f64)),
            ("unfreezing", Datum::Bool(e.abandoned.unfreezing)),
        ];
        pairs.push(("abandoned", Datum::from_pairs(fields)));
    }
    Datum::from_pairs(pairs)
}

/// A placement as a table record holds it.
fn placement_datum(placement: &[crate::placement::ShardPlacement]) -> Datum {
    {
        let ids = |v: &[String]| Datum::array(v.iter().map(|s| Datum::str(s)).collect());
        let shards = placement.iter().map(|p| {
            let mut fields = vec![
                ("primary", Datum::str(&p.primary)),
                ("voting", ids(&p.voting)),
                ("nonvoting", ids(&p.nonvoting)),
            ];
            if !p.incarnations.is_empty() {
                // Incarnations are below 2^32 (`placement::carry_incarnations`): exact
                // as numbers.
                let incs = p
                    .incarnations
                    .iter()
                    .map(|(s, i)| (datum::Str::from(s.as_str()), Datum::from(*i as f64)));
                fields.push(("incarnations", Datum::object(incs.collect())));
            }
            if !p.lineage.is_original() {
                // Node ids use all 64 bits: written as decimal strings.
                let id = |n: &u64| Datum::str(&n.to_string());
                let l = &p.lineage;
                fields.push((
                    "lineage",
                    Datum::from_pairs([
                        ("epoch", Datum::from(l.epoch as f64)),
                        ("seed", l.seed.as_ref().map_or(Datum::Null, id)),
                        (
                            "abandoned",
                            Datum::array(l.abandoned.iter().map(id).collect()),
                        ),
                    ]),
                ));
            }
            Datum::from_pairs(fields)
        });
        Datum::array(shards.collect())
    }
}

/// A table record's `abandoned` (none: the default).
fn parse_abandoned(d: &Datum) -> Abandoned {
    let Some(a) = d.get("abandoned") else {
        return Abandoned::default();
    };
    Abandoned {
        generation: a.get("generation").and_then(Datum::as_f64).unwrap_or(0.0) as u64,
        unfreezing: a
            .get("unfreezing")
            .and_then(Datum::as_bool)
            .unwrap_or(false),
    }
}

/// A table record's `resharding` (none when it has none).
fn parse_reshard(d: &Datum) -> Option<Reshard> {
    let r = d.get("resharding")?;
    let n = |f: &str| r.get(f).and_then(Datum::as_f64).unwrap_or(0.0) as u64;
    Some(Reshard {
        generation: n("generation"),
        replicas: n("replicas").max(1) as u32,
        splits: r
            .get("split_points")
            .and_then(Datum::as_array)
            .map(|a| a.to_vec())
            .unwrap_or_default(),
        placement: parse_placement(r),
    })
}

/// A table record's `placement` (none: empty).
fn parse_placement(d: &Datum) -> Vec<crate::placement::ShardPlacement> {
    let ids = |p: &Datum, f: &str| -> Vec<String> {
        p.get(f)
            .and_then(Datum::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    d.get("placement")
        .and_then(Datum::as_array)
        .map(|a| {
            a.iter()
                .map(|p| crate::placement::ShardPlacement {
                    primary: p
                        .get("primary")
                        .and_then(Datum::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    voting: ids(p, "voting"),
                    nonvoting: ids(p, "nonvoting"),
                    incarnations: p
                        .get("incarnations")
                        .and_then(Datum::as_object)
                        .map(|o| {
                            o.iter()
                                .filter_map(|(k, v)| Some((k.to_string(), v.as_f64()? as u64)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    lineage: p.get("lineage").map(parse_lineage).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `write_acks` as RethinkDB writes it.
pub(crate) fn write_acks_str(single_ack: bool) -> &'static str {
    if single_ack {
        "single"
    } else {
        "majority"
    }
}

/// `Some(single_ack)` for RethinkDB's two `write_acks` values.
pub(crate) fn parse_write_acks(s: &str) -> Option<bool> {
    match s {
        "single" => Some(true),
        "majority" => Some(false),
        _ => None,
    }
}

/// A shard's `lineage` (its emergency repairs).
fn parse_lineage(d: &Datum) -> crate::placement::Lineage {
    let id = |x: &Datum| x.as_str().and_then(|s| s.parse::<u64>().ok());
    crate::placement::Lineage {
        epoch: d.get("epoch").and_then(Datum::as_f64).unwrap_or(0.0) as u64,
        seed: d.get("seed").and_then(id),
        abandoned: d
            .get("abandoned")
            .and_then(Datum::as_array)
            .map(|a| a.iter().filter_map(id).collect())
            .unwrap_or_default(),
    }
}

pub(crate) fn parse_table(d: &Datum) -> TableEntry {
    let s = |v: &Datum, f: &str| {
        v.get(f)
            .and_then(Datum::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let splits = d
        .get("split_points")
        .and_then(Datum::as_array)
        .map(|a| a.to_vec())
        .unwrap_or_default();
    let mut indexes = BTreeMap::new();
    for i in d
        .get("indexes")
        .and_then(Datum::as_array)
        .map(|a| a.to_vec())
        .unwrap_or_default()
    {
        let b = |f: &str| i.get(f).and_then(Datum::as_bool).unwrap_or(false);
        indexes.insert(
            s(&i, "name"),
            IndexDef {
                id: s(&i, "id"),
                spec: IndexDefSpec {
                    function: i
                        .get("function")
                        .map(datum::to_json_value)
                        .unwrap_or_default(),
                    multi: b("multi"),
                    geo: b("geo"),
                },
                ready: b("ready"),
            },
        );
    }
    TableEntry {
        id: s(d, "id"),
        db: s(d, "db"),
        name: s(d, "name"),
        primary_key: s(d, "primary_key"),
        durability: Durability::parse(&s(d, "durability")).unwrap_or(Durability::Hard),
        single_ack: parse_write_acks(&s(d, "write_acks")) == Some(true),
        // The shards served are the ones the split points make (records of builds that
        // only recorded a count served one).
        shards: splits.len() as u32 + 1,
        replicas: d.get("replicas").and_then(Datum::as_f64).unwrap_or(1.0) as u32,
        splits,
        indexes,
        hook: d
            .get("write_hook")
            .and_then(|h| h.get("function"))
            .map(datum::to_json_value),
        placement: parse_placement(d),
        generation: d.get("generation").and_then(Datum::as_f64).unwrap_or(0.0) as u64,
        resharding: parse_reshard(d),
        abandoned: parse_abandoned(d),
    }
}

/// Where the catalog's records live: a single server's `catalog` and `users` spaces,
/// or the spaces of a replicated catalog's Raft group (`super::machine`), which move
/// when a snapshot is installed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spaces {
    pub(crate) catalog: String,
    pub(crate) users: String,
}

impl Spaces {
    /// A single server's spaces.
    pub(crate) fn local() -> Spaces {
        Spaces {
            catalog: CATALOG.into(),
            users: USERS.into(),
        }
    }
}

/// The catalog: its state, its lock, and the one writer of its records.
pub(crate) struct Catalog {
    engine: Arc<dyn Engine>,
    lock: Mutex<()>,
    state: RwLock<CatalogState>,
    spaces: RwLock<Spaces>,
    /// Changed only by the entries of its Raft group (`super::machine`): the local
    /// `apply` proposes through `proposer` instead (refused without one), so nothing
    /// writes its records outside the log.
    replicated: std::sync::atomic::AtomicBool,
    /// How a replicated catalog's commands reach its group (set once by the node).
    proposer: std::sync::OnceLock<Arc<dyn super::CatalogProposer>>,
}

/// The catalog lock, held: the state can be read and commands applied, and no other
/// catalog change happens until it drops.
pub(crate) struct CatalogGuard<'a> {
    catalog: &'a Catalog,
    _lock: MutexGuard<'a, ()>,
}

/// Why commands were not applied (`CatalogGuard::commit_with`).
#[derive(Debug)]
pub(crate) enum ApplyError {
    /// Refused, with RethinkDB's error; nothing was written.
    Refused(ReqlError),
    /// The storage failed; the in-memory state is unchanged.
    Storage(storage::StorageError),
}

impl CatalogGuard<'_> {
    /// The current state.
    pub(crate) fn state(&self) -> RwLockReadGuard<'_, CatalogState> {
        self.catalog.state.read()
    }

    /// Applies `cmd`: validates it, writes the changed records in one batch with fsync,
    /// then switches the in-memory state. On a replicated catalog, proposes it to the
    /// group instead, with the catalog lock released until this node has applied it (the
    /// group's apply takes the lock); the state machine validates it again, so what the
    /// caller checked under the lock may have changed, and the answer is the group's.
    pub(crate) fn apply(&mut self, cmd: CatalogCommand) -> reql::Result<Outcome> {
        if self.catalog.is_replicated() {
            let proposer = self.catalog.proposer.get().cloned();
            let Some(proposer) = proposer else {
                self.local_only()?;
                return Err(op_failed("The catalog has no Raft group to propose to."));
            };
            return MutexGuard::unlocked(&mut self._lock, || proposer.propose(&cmd));
        }
        let mut outs = self.commit(&[cmd], WriteBatch::new())?;
        Ok(outs.pop().unwrap_or_default())
    }

    /// Whether the catalog is replicated: changes are proposed, and their side effects
    /// on this node follow the group's entries (`super::follow`), not the caller.
    pub(crate) fn replicated(&self) -> bool {
        self.catalog.is_replicated()
    }

    /// Makes this single server's catalog the replicated one whose records are now in
    /// `spaces` (a group seeded from them: `Cluster::replicate_catalog`). From then on
    /// its changes are proposed.
    pub(crate) fn become_replicated(&mut self, spaces: Spaces) {
        *self.catalog.spaces.write() = spaces;
        self.catalog
            .replicated
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Gives the tables of `placed` their placement in the in-memory state (a founder's
    /// tables, placed in the group's records by `Cluster::replicate_catalog`).
    pub(crate) fn place_tables(&mut self, placed: &[TableEntry]) {
        let mut state = self.catalog.state.write();
        for e in placed {
            if let Some(t) = state.tables.get_mut(&(e.db.clone(), e.name.clone())) {
                t.placement = e.placement.clone();
            }
        }
    }

    /// Refuses a local change of a replicated catalog (before any side effect of it).
    pub(crate) fn local_only(&self) -> reql::Result<()> {
        if self.catalog.is_replicated() {
            return Err(op_failed(
                "The catalog is replicated: its changes are proposed to its Raft group.",
            ));
        }
        Ok(())
    }

    /// Applies `cmds` in order as one batch (all or none), with `extra` records,
    /// written and fsynced locally.
    fn commit(&mut self, cmds: &[CatalogCommand], b: WriteBatch) -> reql::Result<Vec<Outcome>> {
        let users = cmds.iter().any(CatalogCommand::is_user_command);
        let engine = self.catalog.engine.clone();
        let write = |b: WriteBatch| {
            engine
                .apply(b)
                .and_then(|_| engine.persist())
                .map_err(ApplyError::Storage)
        };
        self.commit_with(cmds, b, write).map_err(|e| match e {
            ApplyError::Refused(e) => e,
            ApplyError::Storage(e) => op_failed(if users {
                format!("Could not write the user records: {e}")
            } else {
                format!("Could not write the catalog: {e}")
            }),
        })
    }

    /// The one apply path, local or replicated: stages the changed records with `extra`
    /// (`stage`, pure), has `commit` write them, and only then switches the in-memory
    /// state. A refusal or a failed commit leaves the state untouched.
    pub(crate) fn commit_with(
        &mut self,
        cmds: &[CatalogCommand],
        mut extra: WriteBatch,
        commit: impl FnOnce(WriteBatch) -> Result<(), ApplyError>,
    ) -> Result<Vec<Outcome>, ApplyError> {
        let spaces = self.catalog.spaces.read().clone();
        let staged = stage(&self.catalog.state.read(), cmds, &spaces, &mut extra);
        let (next, outs) = staged.map_err(ApplyError::Refused)?;
        commit(extra)?;
        *self.catalog.state.write() = next;
        Ok(outs)
    }

    /// The spaces the records are in.
    pub(crate) fn spaces(&self) -> Spaces {
        self.catalog.spaces.read().clone()
    }
}

/// The pure part of applying `cmds` in order to `state` (all or none): the new state
/// and each command's outcome, with every changed record staged into `b` in `spaces`.
/// Reads nothing and generates nothing, so the same state and commands stage the same
/// records anywhere.
pub(crate) fn stage(
    state: &CatalogState,
    cmds: &[CatalogCommand],
    spaces: &Spaces,
    b: &mut WriteBatch,
) -> reql::Result<(CatalogState, Vec<Outcome>)> {
    let mut next = state.clone();
    let mut outs = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        outs.push(next.step(cmd)?);
    }
    for out in &outs {
        write_changes(b, out, &next, spaces);
    }
    Ok((next, outs))
}

/// Puts the records an outcome changed into `b`, as they are in `next`.
fn write_changes(b: &mut WriteBatch, out: &Outcome, next: &CatalogState, spaces: &Spaces) {
    let (cat, users) = (spaces.catalog.as_str(), spaces.users.as_str());
    if let Some((old, new)) = &out.db {
        match new {
            Some((name, id)) => b.put(cat, db_key(id), db_record(name, id).to_json_bytes()),
            None => {
                if let Some((_, id)) = old {
                    b.delete(cat, db_key(id));
                }
            }
        }
    }
    for (old, new) in &out.tables {
        match (old, new) {
            (Some(o), Some(n)) if table_record(o) == table_record(n) => {}
            (_, Some(n)) => {
                // The entry as it is after every command of the batch.
                let cur = next.tables.get(&(n.db.clone(), n.name.clone()));
                let rec = cur.map_or_else(|| table_record(n), table_record);
                b.put(cat, table_key(&n.id), rec.to_json_bytes());
            }
            (Some(o), None) => b.delete(cat, table_key(&o.id)),
            (None, None) => {}
        }
    }
    if let Some(name) = &out.user {
        match next.users.get(name) {
            Some(u) => b.put(users, name.as_bytes().to_vec(), u.encode()),
            None => b.delete(users, name.as_bytes().to_vec()),
        }
    }
}

impl Catalog {
    /// Opens the catalog on `engine`: checks the format version, reads every record
    /// (moving records of earlier builds, keyed by name, to their id keys), and on a new
    /// data directory creates database `test` and user `admin` (`initial_password`).
    pub(crate) fn open(
        engine: Arc<dyn Engine>,
        initial_password: &str,
    ) -> Result<Catalog, ClusterError> {
        let spaces = Spaces::local();
        engine.create_space(&spaces.catalog)?;
        let fresh = !check_format(&*engine, &spaces.catalog)?;
        engine.create_space(&spaces.users)?;
        let (state, legacy) = Self::read(&engine, &spaces)?;
        let cat = Catalog {
            engine,
            lock: Mutex::new(()),
            state: RwLock::new(state),
            spaces: RwLock::new(spaces),
            replicated: false.into(),
            proposer: std::sync::OnceLock::new(),
        };
        let mut cmds = Vec::new();
        let mut extra = WriteBatch::new();
        if fresh {
            extra.put(
                CATALOG,
                FORMAT_KEY.to_vec(),
                FORMAT_VERSION.to_string().into_bytes(),
            );
            cmds.push(CatalogCommand::CreateDb {
                id: uuid::Uuid::new_v4().to_string(),
                name: "test".into(),
            });
        }
        if !cat.state.read().users.contains_key(ADMIN) {
            let pw = (!initial_password.is_empty()).then_some(initial_password);
            let u = User::new(pw);
            cmds.push(CatalogCommand::PutUser {
                name: ADMIN.into(),
                credentials: (&u.creds).into(),
                has_password: u.has_password,
            });
        }
        if !legacy.is_empty() {
            // Records of earlier builds move to their id keys, in one batch.
            let st = cat.state.read().clone();
            for k in legacy {
                extra.delete(CATALOG, k);
            }
            for (name, e) in &st.dbs {
                extra.put(
                    CATALOG,
                    db_key(&e.id),
                    db_record(name, &e.id).to_json_bytes(),
                );
            }
            for e in st.tables.values() {
                extra.put(CATALOG, table_key(&e.id), table_record(e).to_json_bytes());
            }
        }
        if !cmds.is_empty() || !extra.is_empty() {
            cat.lock()
                .commit(&cmds, extra)
                .map_err(|e| ClusterError::Write(e.message))?;
        }
        Ok(cat)
    }

    /// Opens a replicated catalog on the spaces where its group's state is now
    /// (`super::machine`): creates them if missing, checks the format record if there
    /// is one, and reads every record. Writes nothing: a new group starts empty, and
    /// its first entries (database `test`, user `admin`) come through the log.
    pub(crate) fn open_replicated(
        engine: Arc<dyn Engine>,
        spaces: Spaces,
    ) -> Result<Catalog, ClusterError> {
        engine.create_space(&spaces.catalog)?;
        engine.create_space(&spaces.users)?;
        check_format(&*engine, &spaces.catalog)?;
        let (state, _) = Self::read(&engine, &spaces)?;
        Ok(Catalog {
            engine,
            lock: Mutex::new(()),
            state: RwLock::new(state),
            spaces: RwLock::new(spaces),
            replicated: true.into(),
            proposer: std::sync::OnceLock::new(),
        })
    }

    /// Moves the catalog to `spaces` (a replicated catalog's state after a snapshot
    /// install) under the catalog lock, reading its state from them. Returns whether
    /// anything moved; when nothing did, nothing is read.
    pub(crate) fn attach(&self, spaces: Spaces) -> Result<bool, ClusterError> {
        let _g = self.lock();
        if *self.spaces.read() == spaces {
            return Ok(false);
        }
        check_format(&*self.engine, &spaces.catalog)?;
        let (state, _) = Self::read(&self.engine, &spaces)?;
        *self.state.write() = state;
        *self.spaces.write() = spaces;
        Ok(true)
    }

    /// The engine the records are in.
    pub(crate) fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// Reads every record; also returns the keys of records under a name key (written
    /// by earlier builds: `db/<name>`, `table/<db>/<name>`).
    fn read(
        engine: &Arc<dyn Engine>,
        spaces: &Spaces,
    ) -> Result<(CatalogState, Vec<Vec<u8>>), ClusterError> {
        let snap = engine.snapshot();
        let mut st = CatalogState::default();
        let mut legacy = Vec::new();
        let mut tables = Vec::new();
        for kv in snap.range(&spaces.catalog, Bound::Unbounded, Bound::Unbounded, false)? {
            let (k, v) = kv?;
            let key = String::from_utf8_lossy(&k).to_string();
            if key == "format" {
                continue;
            }
            let d = datum::from_json_slice(&v).map_err(|e| ClusterError::Corrupt(e.0))?;
            let id = d
                .get("id")
                .and_then(Datum::as_str)
                .unwrap_or_default()
                .to_string();
            if key.starts_with("db/") {
                let name = d.get("name").and_then(Datum::as_str).unwrap_or_default();
                if key.as_bytes() != db_key(&id) {
                    legacy.push(k.clone());
                }
                st.dbs.insert(name.to_string(), DbEntry { id });
            } else if key.starts_with("table/") {
                let by_id = key.as_bytes() == table_key(&id);
                if !by_id {
                    legacy.push(k.clone());
                }
                tables.push((by_id, parse_table(&d)));
            }
        }
        // A record under the id key wins over one under a name key for the same table.
        tables.sort_by_key(|(by_id, _)| !*by_id);
        for (_, e) in tables {
            if st.tables.values().any(|t| t.id == e.id) {
                continue;
            }
            st.tables.insert((e.db.clone(), e.name.clone()), e);
        }
        for kv in snap.range(&spaces.users, Bound::Unbounded, Bound::Unbounded, false)? {
            let (k, v) = kv?;
            let name = String::from_utf8_lossy(&k).to_string();
            if let Some(u) = User::decode(&v, name == ADMIN) {
                st.users.insert(name, u);
            }
        }
        Ok((st, legacy))
    }

    /// Sets how a replicated catalog's commands reach its group (once; false if it was
    /// set already or the catalog is not replicated).
    pub(crate) fn set_proposer(&self, p: Arc<dyn super::CatalogProposer>) -> bool {
        self.is_replicated() && self.proposer.set(p).is_ok()
    }

    /// Whether the catalog is replicated (see `CatalogGuard::replicated`; a single
    /// server's becomes replicated once, never back).
    pub(crate) fn is_replicated(&self) -> bool {
        self.replicated.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Takes the catalog lock.
    pub(crate) fn lock(&self) -> CatalogGuard<'_> {
        CatalogGuard {
            catalog: self,
            _lock: self.lock.lock(),
        }
    }

    /// Applies one command under the catalog lock (`CatalogGuard::apply`).
    pub(crate) fn apply(&self, cmd: CatalogCommand) -> reql::Result<Outcome> {
        self.lock().apply(cmd)
    }

    /// The current state, for reading.
    pub(crate) fn read_state(&self) -> RwLockReadGuard<'_, CatalogState> {
        self.state.read()
    }
}

/// Whether `space` holds a format record (false: a new catalog); an error when the
/// record is not this build's version.
pub(crate) fn check_format(engine: &dyn Engine, space: &str) -> Result<bool, ClusterError> {
    match engine.get(space, FORMAT_KEY)? {
        Some(v) => {
            let s = String::from_utf8_lossy(&v).to_string();
            if s != FORMAT_VERSION.to_string() {
                return Err(ClusterError::Format {
                    found: s,
                    supported: FORMAT_VERSION,
                });
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The error of a command the caller failed to apply, as a plain message.
pub(crate) fn message(e: ReqlError) -> String {
    e.message
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
