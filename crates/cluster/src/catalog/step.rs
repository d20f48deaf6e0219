//! The catalog's rules: `CatalogState::step` applies one `CatalogCommand` to a state
//! (validation with RethinkDB's messages, and the new state), with no I/O. It reads
//! nothing but the state and the command and generates nothing (ids, split points and
//! credentials are the command's), so every replica of a replicated catalog computes
//! the same state from the same commands (`super::machine`).

use std::collections::BTreeMap;

use datum::Datum;
use reql::error::op_failed;
use reql::Durability;

use super::apply::{CatalogState, DbEntry, IndexDef, Outcome, TableEntry, SYSTEM_DB};
use super::command::{CatalogCommand, TableDef};
use crate::auth::{Perms, User, ADMIN};

fn single_ack(s: &str) -> reql::Result<bool> {
    super::apply::parse_write_acks(s).ok_or_else(|| op_failed(format!("Unknown write_acks `{s}`.")))
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
                if let Some(w) = &changes.write_acks {
                    new.single_ack = single_ack(w)?;
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
                if let Some(p) = &changes.placement {
                    new.placement = p.clone();
                    // Replicas that stay keep their incarnation, decided here against
                    // the placement the catalog has (never the proposer's view).
                    crate::placement::carry_incarnations(&old.placement, &mut new.placement);
                }
                placed(&new.placement, new.shards)?;
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
            C::BeginReshard { id, reshard } => {
                let k = self.table_key_of(id)?;
                let old = self.tables[&k].clone();
                let mut new = old.clone();
                new.resharding = Some(begin_reshard(&old, reshard)?);
                if new != old {
                    self.tables.insert(k, new.clone());
                }
                out.tables.push((Some(old), Some(new)));
            }
            C::FinishReshard { id, generation } => {
                let k = self.table_key_of(id)?;
                let old = self.tables[&k].clone();
                let abandoned =
                    old.generation < *generation && old.abandoned.generation >= *generation;
                let new = match old.resharded() {
                    Some(new) if new.generation == *generation => new,
                    // Finished already (a retry): nothing changes.
                    _ if old.generation == *generation => old.clone(),
                    _ if abandoned => {
                        return Err(op_failed(format!(
                            "The resharding of table `{}.{}` to generation {generation} \
                             was abandoned.",
                            old.db, old.name
                        )))
                    }
                    _ => {
                        return Err(op_failed(format!(
                            "Table `{}.{}` is not being resharded to generation {generation}.",
                            old.db, old.name
                        )))
                    }
                };
                self.tables.insert(k, new.clone());
                out.tables.push((Some(old), Some(new)));
            }
            C::AbortReshard { id, generation } => {
                let k = self.table_key_of(id)?;
                let old = self.tables[&k].clone();
                let new = abort_reshard(&old, *generation)?;
                self.tables.insert(k, new.clone());
                out.tables.push((Some(old), Some(new)));
            }
            C::FinishAbort { id, generation } => {
                let k = self.table_key_of(id)?;
                let old = self.tables[&k].clone();
                let mut new = old.clone();
                let a = &mut new.abandoned;
                if a.generation < *generation {
                    return Err(op_failed(format!(
                        "Table `{}.{}` has no abandoned resharding to generation {generation}.",
                        old.db, old.name
                    )));
                }
                // A retry, or one for an older abandoned resharding, changes nothing.
                if a.generation == *generation {
                    a.unfreezing = false;
                }
                self.tables.insert(k, new.clone());
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
            single_ack: t.write_acks.as_deref().map_or(Ok(false), single_ack)?,
            shards: t.shards,
            replicas: t.replicas,
            placement: placed(&t.placement, t.shards)?.to_vec(),
            splits,
            indexes: BTreeMap::new(),
            hook: None,
            generation: 0,
            resharding: None,
            abandoned: Default::default(),
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

/// A table's placement, checked: empty (the catalog's server alone) or one entry per
/// shard, each primary among its voters.
/// The resharding `r` of table `e` as its entry records it, checked: a replicated
/// table, the next generation, split points and placement that fit; the same
/// resharding again (a retry) is accepted, another one while one is under way is not.
fn begin_reshard(
    e: &TableEntry,
    r: &super::command::ReshardDef,
) -> reql::Result<super::apply::Reshard> {
    if e.placement.is_empty() {
        return Err(op_failed(format!(
            "Table `{}.{}` is not replicated: it is resharded in place.",
            e.db, e.name
        )));
    }
    let splits = datums(&r.split_points)?;
    let shards = splits.len() as u32 + 1;
    let reshard = super::apply::Reshard {
        generation: r.generation,
        replicas: r.replicas,
        splits,
        placement: placed(&r.placement, shards)?.to_vec(),
    };
    // Past the table's and any abandoned resharding's generation.
    let after = e.generation.max(e.abandoned.generation);
    match &e.resharding {
        Some(under_way) if *under_way == reshard => Ok(reshard),
        Some(_) => Err(op_failed(format!(
            "Table `{}.{}` is being resharded already.",
            e.db, e.name
        ))),
        None if e.abandoned.unfreezing => Err(op_failed(format!(
            "Table `{}.{}` is leaving an abandoned resharding: its shards are being unfrozen.",
            e.db, e.name
        ))),
        None if r.generation != after + 1 || r.placement.is_empty() => Err(op_failed(format!(
            "Resharding table `{}.{}`: generation {} does not follow {after}.",
            e.db, e.name, r.generation
        ))),
        None => Ok(reshard),
    }
}

/// Table `e` with its resharding to `generation` abandoned: the new shards forgotten,
/// the old ones to unfreeze. Refused once that resharding finished (its new shards may
/// have acknowledged writes); accepted again (a retry) once abandoned.
fn abort_reshard(e: &TableEntry, generation: u64) -> reql::Result<TableEntry> {
    let mut new = e.clone();
    match &e.resharding {
        Some(r) if r.generation == generation => {
            new.resharding = None;
            new.abandoned = super::apply::Abandoned {
                generation,
                unfreezing: true,
            };
            Ok(new)
        }
        None if e.generation < generation && e.abandoned.generation >= generation => Ok(new),
        _ if e.generation >= generation => Err(op_failed(format!(
            "The resharding of table `{}.{}` to generation {generation} finished; it cannot \
             be abandoned.",
            e.db, e.name
        ))),
        _ => Err(op_failed(format!(
            "Table `{}.{}` is not being resharded to generation {generation}.",
            e.db, e.name
        ))),
    }
}

fn placed(
    p: &[crate::placement::ShardPlacement],
    shards: u32,
) -> reql::Result<&[crate::placement::ShardPlacement]> {
    let fits = p.is_empty()
        || (p.len() == shards.max(1) as usize && p.iter().all(|s| s.voting.contains(&s.primary)));
    if fits {
        Ok(p)
    } else {
        Err(op_failed(format!(
            "The placement of {} shards does not fit a table of {shards} shards.",
            p.len()
        )))
    }
}
