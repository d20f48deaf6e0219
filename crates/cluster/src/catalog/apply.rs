//! `Catalog`: the one writer of the `catalog` and `users` storage spaces.
//!
//! It holds the catalog's state (databases, tables with their index definitions, write
//! hooks and split points, users with their permissions) and the one catalog lock.
//! `CatalogGuard::apply` validates a `CatalogCommand` against the state, computes the
//! new state on a copy, writes every record that changed in one storage batch, fsyncs,
//! and only then switches the in-memory state: a rejected or unwritten command leaves
//! both untouched. Records are keyed by id (`db/<id>`, `table/<id>`), and a table's
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

use super::command::{CatalogCommand, IndexDefSpec, TableDef};
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
    pub(crate) shards: u32,
    pub(crate) replicas: u32,
    /// Where the shards are cut: `shards - 1` primary-key values (`crate::shards`).
    pub(crate) splits: Vec<Datum>,
    /// Index definitions by name.
    pub(crate) indexes: BTreeMap<String, IndexDef>,
    /// The write hook function (FUNC term JSON).
    pub(crate) hook: Option<serde_json::Value>,
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
        ("shards", Datum::from(e.shards as f64)),
        ("replicas", Datum::from(e.replicas as f64)),
        ("split_points", Datum::array(e.splits.clone())),
        ("indexes", Datum::array(indexes)),
    ];
    if let Some(f) = &e.hook {
        let f = datum::from_json_value(f).unwrap_or(Datum::Null);
        pairs.push(("write_hook", Datum::from_pairs([("function", f)])));
    }
    Datum::from_pairs(pairs)
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
    }
}

fn durability(s: &str) -> reql::Result<Durability> {
    Durability::parse(s).ok_or_else(|| op_failed(format!("Unknown durability `{s}`.")))
}

fn datums(v: &[serde_json::Value]) -> reql::Result<Vec<Datum>> {
    v.iter()
        .map(|j| datum::from_json_value(j).map_err(|e| op_failed(e.0)))
        .collect()
}

impl CatalogState {
    fn db_name_of(&self, id: &str) -> Option<String> {
        self.dbs
            .iter()
            .find(|(_, e)| e.id == id)
            .map(|(n, _)| n.clone())
    }

    fn table_key_of(&self, id: &str) -> reql::Result<(String, String)> {
        self.tables
            .iter()
            .find(|(_, e)| e.id == id)
            .map(|(k, _)| k.clone())
            .ok_or_else(|| op_failed(format!("Table with id `{id}` does not exist.")))
    }

    /// Applies one command to this state (validation and the new state; no I/O).
    pub(crate) fn step(&mut self, cmd: &CatalogCommand) -> reql::Result<Outcome> {
        use CatalogCommand as C;
        let mut out = Outcome::default();
        match cmd {
            C::CreateDb { id, name } => {
                if name == SYSTEM_DB || self.dbs.contains_key(name) {
                    return Err(op_failed(format!("Database `{name}` already exists.")));
                }
                if self.db_name_of(id).is_some() {
                    return Err(op_failed(format!(
                        "Database with id `{id}` already exists."
                    )));
                }
                self.dbs.insert(name.clone(), DbEntry { id: id.clone() });
                out.db = Some((None, Some((name.clone(), id.clone()))));
            }
            C::DropDb { id } => {
                let name = self
                    .db_name_of(id)
                    .ok_or_else(|| op_failed(format!("Database with id `{id}` does not exist.")))?;
                self.dbs.remove(&name);
                let keys: Vec<_> = self
                    .tables
                    .keys()
                    .filter(|(d, _)| *d == name)
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(e) = self.tables.remove(&k) {
                        out.tables.push((Some(e), None));
                    }
                }
                out.db = Some((Some((name, id.clone())), None));
            }
            C::RenameDb { id, name } => {
                let old = self
                    .db_name_of(id)
                    .ok_or_else(|| op_failed(format!("Database with id `{id}` does not exist.")))?;
                if old == *name {
                    return Ok(out);
                }
                if name == SYSTEM_DB || self.dbs.contains_key(name) {
                    return Err(op_failed(format!("Database `{name}` already exists.")));
                }
                self.dbs.remove(&old);
                self.dbs.insert(name.clone(), DbEntry { id: id.clone() });
                let keys: Vec<_> = self
                    .tables
                    .keys()
                    .filter(|(d, _)| *d == old)
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(e) = self.tables.remove(&k) {
                        let mut n = e.clone();
                        n.db = name.clone();
                        self.tables
                            .insert((n.db.clone(), n.name.clone()), n.clone());
                        out.tables.push((Some(e), Some(n)));
                    }
                }
                out.db = Some((Some((old, id.clone())), Some((name.clone(), id.clone()))));
            }
            C::CreateTable { table } => {
                let e = self.new_table(table)?;
                self.tables
                    .insert((e.db.clone(), e.name.clone()), e.clone());
                out.tables.push((None, Some(e)));
            }
            C::DropTable { id } => {
                let k = self.table_key_of(id)?;
                let e = self.tables.remove(&k);
                out.tables.push((e, None));
            }
            C::AlterTable { id, changes } => {
                let k = self.table_key_of(id)?;
                let old = self.tables[&k].clone();
                let mut new = old.clone();
                if let Some(db_id) = &changes.db_id {
                    new.db = self.db_name_of(db_id).ok_or_else(|| {
                        op_failed(format!("Database with id `{db_id}` does not exist."))
                    })?;
                }
                if let Some(n) = &changes.name {
                    new.name = n.clone();
                }
                if let Some(d) = &changes.durability {
                    new.durability = durability(d)?;
                }
                if let Some(s) = changes.shards {
                    new.shards = s;
                }
                if let Some(r) = changes.replicas {
                    new.replicas = r;
                }
                if let Some(p) = &changes.split_points {
                    new.splits = datums(p)?;
                }
                if new.splits.len() + 1 != new.shards.max(1) as usize
                    && (changes.shards.is_some() || changes.split_points.is_some())
                {
                    return Err(op_failed(format!(
                        "{} split points do not cut {} shards.",
                        new.splits.len(),
                        new.shards
                    )));
                }
                let moved = new.db != old.db || new.name != old.name;
                if moved
                    && self
                        .tables
                        .contains_key(&(new.db.clone(), new.name.clone()))
                {
                    return Err(op_failed(format!(
                        "Can't rename table `{}.{}` to `{}.{}` because table `{}.{}` already exists.",
                        old.db, old.name, new.db, new.name, new.db, new.name
                    )));
                }
                self.tables.remove(&k);
                self.tables
                    .insert((new.db.clone(), new.name.clone()), new.clone());
                out.tables.push((Some(old), Some(new)));
            }
            C::CreateIndex {
                table,
                index,
                name,
                spec,
            } => {
                self.alter_indexes(table, &mut out, |e| {
                    if e.indexes.contains_key(name) {
                        return Err(op_failed(format!(
                            "Index `{name}` already exists on table `{}.{}`.",
                            e.db, e.name
                        )));
                    }
                    e.indexes.insert(
                        name.clone(),
                        IndexDef {
                            id: index.clone(),
                            spec: spec.clone(),
                            ready: false,
                        },
                    );
                    Ok(())
                })?;
            }
            C::DropIndex { table, name } => {
                self.alter_indexes(table, &mut out, |e| {
                    e.indexes.remove(name).map(|_| ()).ok_or_else(|| {
                        op_failed(format!(
                            "Index `{name}` does not exist on table `{}.{}`.",
                            e.db, e.name
                        ))
                    })
                })?;
            }
            C::RenameIndex {
                table,
                old,
                new,
                overwrite,
            } => {
                self.alter_indexes(table, &mut out, |e| {
                    let fail = || {
                        op_failed(if *overwrite {
                            format!("Index `{old}` does not exist on table `{}.{}`.", e.db, e.name)
                        } else {
                            format!(
                                "Index `{old}` does not exist or index `{new}` already exists on table `{}.{}`.",
                                e.db, e.name
                            )
                        })
                    };
                    if !e.indexes.contains_key(old) {
                        return Err(fail());
                    }
                    if old == new {
                        return Ok(());
                    }
                    if e.indexes.contains_key(new) && !*overwrite {
                        return Err(fail());
                    }
                    let d = e.indexes.remove(old).ok_or_else(fail)?;
                    e.indexes.insert(new.clone(), d);
                    Ok(())
                })?;
            }
            C::IndexReady { table, index } => {
                self.alter_indexes(table, &mut out, |e| {
                    let d = e
                        .indexes
                        .values_mut()
                        .find(|d| d.id == *index)
                        .ok_or_else(|| {
                            op_failed(format!(
                                "Index with id `{index}` does not exist on table `{}.{}`.",
                                e.db, e.name
                            ))
                        })?;
                    d.ready = true;
                    Ok(())
                })?;
            }
            C::SetWriteHook { table, function } => {
                self.alter_indexes(table, &mut out, |e| {
                    e.hook = function.clone();
                    Ok(())
                })?;
            }
            C::PutUser {
                name,
                credentials,
                has_password,
            } => {
                let creds = credentials
                    .to_scram()
                    .ok_or_else(|| op_failed(format!("Invalid credentials for user `{name}`.")))?;
                // The credentials are the command's: nothing is generated here (a new
                // user starts from them, not from fresh random material).
                match self.users.get_mut(name) {
                    Some(user) => {
                        user.creds = creds;
                        user.has_password = *has_password;
                    }
                    None => {
                        let global = if name == ADMIN {
                            Perms::ALL
                        } else {
                            Perms::default()
                        };
                        let user = User {
                            creds,
                            has_password: *has_password,
                            global,
                            dbs: BTreeMap::new(),
                            tables: BTreeMap::new(),
                        };
                        self.users.insert(name.clone(), user);
                    }
                }
                out.user = Some(name.clone());
            }
            C::DeleteUser { name } => {
                if name == ADMIN {
                    return Err(op_failed(format!("The user `{name}` can't be deleted")));
                }
                if self.users.remove(name).is_none() {
                    return Err(op_failed(format!("User `{name}` not found")));
                }
                out.user = Some(name.clone());
            }
            C::SetPermissions { user, scope, perms } => {
                if user == ADMIN {
                    return Err(op_failed(format!(
                        "The permissions of the user `{user}` can't be modified."
                    )));
                }
                let u = self
                    .users
                    .get_mut(user)
                    .ok_or_else(|| op_failed(format!("User `{user}` not found.")))?;
                let old = u.scope(scope);
                u.set_scope(scope, *perms);
                out.perms = Some((old, u.scope(scope)));
                out.user = Some(user.clone());
            }
        }
        Ok(out)
    }

    fn new_table(&self, t: &TableDef) -> reql::Result<TableEntry> {
        let db = self
            .db_name_of(&t.db_id)
            .ok_or_else(|| op_failed(format!("Database with id `{}` does not exist.", t.db_id)))?;
        if self.tables.contains_key(&(db.clone(), t.name.clone())) {
            return Err(op_failed(format!(
                "Table `{db}.{}` already exists.",
                t.name
            )));
        }
        if self.tables.values().any(|e| e.id == t.id) {
            return Err(op_failed(format!(
                "Table with id `{}` already exists.",
                t.id
            )));
        }
        let splits = datums(&t.split_points)?;
        if splits.len() + 1 != t.shards.max(1) as usize {
            return Err(op_failed(format!(
                "{} split points do not cut {} shards.",
                splits.len(),
                t.shards
            )));
        }
        Ok(TableEntry {
            id: t.id.clone(),
            db,
            name: t.name.clone(),
            primary_key: t.primary_key.clone(),
            durability: durability(&t.durability)?,
            shards: t.shards,
            replicas: t.replicas,
            splits,
            indexes: BTreeMap::new(),
            hook: None,
        })
    }

    /// Changes one table's index definitions or hook with `f`.
    fn alter_indexes(
        &mut self,
        id: &str,
        out: &mut Outcome,
        f: impl FnOnce(&mut TableEntry) -> reql::Result<()>,
    ) -> reql::Result<()> {
        let k = self.table_key_of(id)?;
        let old = self.tables[&k].clone();
        let mut new = old.clone();
        f(&mut new)?;
        self.tables.insert(k, new.clone());
        out.tables.push((Some(old), Some(new)));
        Ok(())
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
    /// `apply` is refused, so nothing writes its records outside the log.
    replicated: bool,
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
    /// then switches the in-memory state.
    pub(crate) fn apply(&mut self, cmd: CatalogCommand) -> reql::Result<Outcome> {
        if self.catalog.replicated {
            return Err(op_failed(
                "The catalog is replicated: its changes are proposed to its Raft group.",
            ));
        }
        let mut outs = self.commit(&[cmd], WriteBatch::new())?;
        Ok(outs.pop().unwrap_or_default())
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
            replicated: false,
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
            replicated: true,
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
mod tests {
    use super::*;
    use crate::auth::Scope;
    use crate::catalog::command::TableChanges;
    use proto::handshake::{OsRandom, ScramCredentials};
    use serde_json::json;

    type Records = Vec<(&'static str, Vec<u8>, Vec<u8>)>;

    /// Every record of the `catalog` and `users` spaces.
    fn dump(e: &Arc<dyn Engine>) -> Records {
        let snap = e.snapshot();
        let mut out = Vec::new();
        for space in [CATALOG, USERS] {
            for kv in snap
                .range(space, Bound::Unbounded, Bound::Unbounded, false)
                .unwrap()
            {
                let (k, v) = kv.unwrap();
                out.push((space, k, v.to_vec()));
            }
        }
        out
    }

    fn open() -> (Arc<dyn Engine>, Catalog) {
        let e: Arc<dyn Engine> = Arc::new(storage::Memory::new());
        let c = Catalog::open(e.clone(), "").unwrap();
        (e, c)
    }

    fn table(id: &str, db_id: &str, name: &str) -> TableDef {
        TableDef {
            id: id.into(),
            db_id: db_id.into(),
            name: name.into(),
            primary_key: "id".into(),
            durability: "hard".into(),
            shards: 1,
            replicas: 1,
            split_points: vec![],
        }
    }

    fn spec() -> IndexDefSpec {
        IndexDefSpec {
            function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
            multi: false,
            geo: false,
        }
    }

    /// One command of each kind, valid when applied in this order.
    fn commands() -> Vec<CatalogCommand> {
        use CatalogCommand as C;
        let creds = (&ScramCredentials::generate("pw", &mut OsRandom)).into();
        vec![
            C::CreateDb {
                id: "d1".into(),
                name: "d".into(),
            },
            C::RenameDb {
                id: "d1".into(),
                name: "e".into(),
            },
            C::CreateTable {
                table: table("t1", "d1", "t"),
            },
            C::AlterTable {
                id: "t1".into(),
                changes: TableChanges {
                    name: Some("u".into()),
                    durability: Some("soft".into()),
                    shards: Some(2),
                    split_points: Some(vec![json!("80")]),
                    ..Default::default()
                },
            },
            C::CreateIndex {
                table: "t1".into(),
                index: "i1".into(),
                name: "v".into(),
                spec: spec(),
            },
            C::RenameIndex {
                table: "t1".into(),
                old: "v".into(),
                new: "w".into(),
                overwrite: false,
            },
            C::IndexReady {
                table: "t1".into(),
                index: "i1".into(),
            },
            C::SetWriteHook {
                table: "t1".into(),
                function: Some(json!([69, [[2, [1, 2, 3]], [10, [3]]]])),
            },
            C::PutUser {
                name: "bob".into(),
                credentials: creds,
                has_password: true,
            },
            C::SetPermissions {
                user: "bob".into(),
                scope: Scope::Table("t1".into()),
                perms: Perms {
                    read: Some(true),
                    ..Default::default()
                },
            },
            C::DropIndex {
                table: "t1".into(),
                name: "w".into(),
            },
            C::DeleteUser { name: "bob".into() },
            C::DropTable { id: "t1".into() },
            C::DropDb { id: "d1".into() },
        ]
    }

    #[test]
    fn each_command_applies_persists_and_reloads() {
        let (e, c) = open();
        let table_of = |c: &Catalog| c.read_state().tables.values().next().cloned();
        for cmd in commands() {
            let out = c
                .apply(cmd.clone())
                .unwrap_or_else(|err| panic!("{cmd:?}: {err:?}"));
            // What is on disk reads back as the state in memory.
            let again = Catalog::open(e.clone(), "").unwrap();
            assert_eq!(*again.read_state(), *c.read_state(), "after {cmd:?}");
            let st = c.read_state();
            match cmd {
                CatalogCommand::CreateDb { .. } => assert!(st.dbs.contains_key("d")),
                CatalogCommand::RenameDb { .. } => {
                    assert!(!st.dbs.contains_key("d") && st.dbs["e"].id == "d1")
                }
                CatalogCommand::CreateTable { .. } => {
                    assert!(st.tables.contains_key(&("e".into(), "t".into())));
                    assert_eq!(out.tables.len(), 1);
                }
                CatalogCommand::AlterTable { .. } => {
                    let t = &st.tables[&("e".into(), "u".into())];
                    assert_eq!(t.durability, Durability::Soft);
                    assert_eq!((t.shards, t.splits.clone()), (2, vec![Datum::str("80")]));
                    assert_eq!(st.tables.len(), 1);
                }
                CatalogCommand::CreateIndex { .. } => {
                    assert!(!table_of(&c).unwrap().indexes["v"].ready)
                }
                CatalogCommand::RenameIndex { .. } => {
                    assert_eq!(
                        table_of(&c).unwrap().indexes.keys().collect::<Vec<_>>(),
                        ["w"]
                    )
                }
                CatalogCommand::IndexReady { .. } => {
                    assert!(table_of(&c).unwrap().indexes["w"].ready)
                }
                CatalogCommand::SetWriteHook { .. } => {
                    assert!(table_of(&c).unwrap().hook.is_some())
                }
                CatalogCommand::PutUser { .. } => assert!(st.users["bob"].has_password),
                CatalogCommand::SetPermissions { .. } => {
                    assert_eq!(st.users["bob"].tables["t1"].read, Some(true));
                    assert_eq!(out.perms.unwrap().0, Perms::default());
                }
                CatalogCommand::DropIndex { .. } => {
                    assert!(table_of(&c).unwrap().indexes.is_empty())
                }
                CatalogCommand::DeleteUser { .. } => assert!(!st.users.contains_key("bob")),
                CatalogCommand::DropTable { .. } => assert!(st.tables.is_empty()),
                CatalogCommand::DropDb { .. } => assert!(!st.dbs.contains_key("e")),
            }
        }
        // Only `test`'s record and `admin`'s are left, keyed by id and name.
        let keys: Vec<String> = dump(&e)
            .into_iter()
            .map(|(s, k, _)| format!("{s}:{}", String::from_utf8_lossy(&k)))
            .collect();
        let test_id = c.read_state().dbs["test"].id.clone();
        assert_eq!(
            keys,
            vec![
                format!("catalog:db/{test_id}"),
                "catalog:format".to_string(),
                "users:admin".to_string()
            ]
        );
    }

    #[test]
    fn a_renamed_table_has_one_record_under_its_id() {
        let (e, c) = open();
        let test_id = c.read_state().dbs["test"].id.clone();
        c.apply(CatalogCommand::CreateTable {
            table: table("t1", &test_id, "t"),
        })
        .unwrap();
        c.apply(CatalogCommand::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("u".into()),
                ..Default::default()
            },
        })
        .unwrap();
        let tables: Vec<_> = dump(&e)
            .into_iter()
            .filter(|(_, k, _)| k.starts_with(b"table/"))
            .collect();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].1, b"table/t1".to_vec());
        let d = datum::from_json_slice(&tables[0].2).unwrap();
        assert_eq!(d.get("name"), Some(&Datum::str("u")));
    }

    #[test]
    fn rejected_commands_change_nothing() {
        use CatalogCommand as C;
        let (e, c) = open();
        for cmd in commands().into_iter().take(10) {
            c.apply(cmd).unwrap();
        }
        c.apply(C::CreateTable {
            table: table("t2", "d1", "x"),
        })
        .unwrap();
        let bad_creds = crate::catalog::Credentials {
            salt: "!".into(),
            iterations: 1,
            stored_key: "".into(),
            server_key: "".into(),
        };
        let rejected = vec![
            (
                C::CreateDb {
                    id: "d9".into(),
                    name: "e".into(),
                },
                "Database `e` already exists.",
            ),
            (
                C::CreateDb {
                    id: "d9".into(),
                    name: "rethinkdb".into(),
                },
                "Database `rethinkdb` already exists.",
            ),
            (
                C::DropDb { id: "nope".into() },
                "Database with id `nope` does not exist.",
            ),
            (
                C::RenameDb {
                    id: "d1".into(),
                    name: "test".into(),
                },
                "Database `test` already exists.",
            ),
            (
                C::CreateTable {
                    table: table("t3", "d1", "u"),
                },
                "Table `e.u` already exists.",
            ),
            (
                C::CreateTable {
                    table: table("t3", "nope", "z"),
                },
                "Database with id `nope` does not exist.",
            ),
            (
                C::CreateTable {
                    table: table("t1", "d1", "z"),
                },
                "Table with id `t1` already exists.",
            ),
            (
                C::DropTable { id: "nope".into() },
                "Table with id `nope` does not exist.",
            ),
            (
                C::AlterTable {
                    id: "t1".into(),
                    changes: TableChanges {
                        name: Some("x".into()),
                        ..Default::default()
                    },
                },
                "Can't rename table `e.u` to `e.x` because table `e.x` already exists.",
            ),
            (
                C::AlterTable {
                    id: "t1".into(),
                    changes: TableChanges {
                        shards: Some(3),
                        ..Default::default()
                    },
                },
                "1 split points do not cut 3 shards.",
            ),
            (
                C::CreateIndex {
                    table: "t1".into(),
                    index: "i2".into(),
                    name: "w".into(),
                    spec: spec(),
                },
                "Index `w` already exists on table `e.u`.",
            ),
            (
                C::DropIndex {
                    table: "t1".into(),
                    name: "nope".into(),
                },
                "Index `nope` does not exist on table `e.u`.",
            ),
            (
                C::RenameIndex {
                    table: "t2".into(),
                    old: "a".into(),
                    new: "b".into(),
                    overwrite: false,
                },
                "Index `a` does not exist or index `b` already exists on table `e.x`.",
            ),
            (
                C::IndexReady {
                    table: "t1".into(),
                    index: "nope".into(),
                },
                "Index with id `nope` does not exist on table `e.u`.",
            ),
            (
                C::SetWriteHook {
                    table: "nope".into(),
                    function: None,
                },
                "Table with id `nope` does not exist.",
            ),
            (
                C::PutUser {
                    name: "eve".into(),
                    credentials: bad_creds,
                    has_password: true,
                },
                "Invalid credentials for user `eve`.",
            ),
            (
                C::DeleteUser { name: ADMIN.into() },
                "The user `admin` can't be deleted",
            ),
            (C::DeleteUser { name: "eve".into() }, "User `eve` not found"),
            (
                C::SetPermissions {
                    user: ADMIN.into(),
                    scope: Scope::Global,
                    perms: Perms::default(),
                },
                "The permissions of the user `admin` can't be modified.",
            ),
            (
                C::SetPermissions {
                    user: "eve".into(),
                    scope: Scope::Global,
                    perms: Perms::default(),
                },
                "User `eve` not found.",
            ),
        ];
        for (cmd, msg) in rejected {
            let before = (dump(&e), c.read_state().clone());
            let err = c.apply(cmd.clone()).unwrap_err();
            assert_eq!(err.message, msg, "{cmd:?}");
            assert!(
                before == (dump(&e), c.read_state().clone()),
                "{cmd:?} changed something"
            );
        }
    }

    #[test]
    fn an_unwritten_command_changes_nothing_in_memory() {
        let faulty = Arc::new(storage::Faulty::new(storage::Memory::new()));
        let e: Arc<dyn Engine> = faulty.clone();
        let c = Catalog::open(e, "").unwrap();
        let before = c.read_state().clone();
        faulty.fail_next_applies(1);
        let err = c
            .apply(CatalogCommand::CreateDb {
                id: "d1".into(),
                name: "d".into(),
            })
            .unwrap_err();
        assert!(
            err.message.starts_with("Could not write the catalog: "),
            "{}",
            err.message
        );
        assert_eq!(*c.read_state(), before);
    }

    #[test]
    fn commands_round_trip_through_json() {
        for cmd in commands() {
            let s = cmd.to_json();
            assert_eq!(CatalogCommand::from_json(&s).unwrap(), cmd, "{s}");
        }
        let s = commands()[0].to_json();
        assert_eq!(s, r#"{"op":"create_db","id":"d1","name":"d"}"#);
        assert!(CatalogCommand::from_json(r#"{"op":"drop_everything"}"#).is_err());
    }

    #[test]
    fn records_of_earlier_builds_move_to_id_keys() {
        let e: Arc<dyn Engine> = Arc::new(storage::Memory::new());
        e.create_space(CATALOG).unwrap();
        let mut b = WriteBatch::new();
        b.put(CATALOG, FORMAT_KEY.to_vec(), b"1".to_vec());
        b.put(
            CATALOG,
            b"db/d".to_vec(),
            br#"{"id":"d1","name":"d"}"#.to_vec(),
        );
        b.put(
            CATALOG,
            b"table/d/t".to_vec(),
            br#"{"id":"t1","db":"d","name":"t","primary_key":"k","durability":"soft","shards":1,"replicas":1,"indexes":[{"id":"i1","name":"v","function":[69,[[2,[1]],[10,[1]]]],"multi":false,"geo":false,"ready":true}]}"#
                .to_vec(),
        );
        e.apply(b).unwrap();
        let c = Catalog::open(e.clone(), "").unwrap();
        let t = c.read_state().tables[&("d".into(), "t".into())].clone();
        assert_eq!((t.id.as_str(), t.primary_key.as_str()), ("t1", "k"));
        assert!(t.indexes["v"].ready);
        let keys: Vec<Vec<u8>> = dump(&e).into_iter().map(|(_, k, _)| k).collect();
        assert!(keys.contains(&b"db/d1".to_vec()) && keys.contains(&b"table/t1".to_vec()));
        assert!(!keys.contains(&b"db/d".to_vec()) && !keys.contains(&b"table/d/t".to_vec()));
        // Opening again reads the same catalog and moves nothing.
        let again = Catalog::open(e.clone(), "").unwrap();
        assert_eq!(*again.read_state(), *c.read_state());
    }
}
