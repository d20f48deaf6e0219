//! Catalog changes made through the system tables and the admin terms: renaming tables
//! and databases, changing a table's durability or recorded sharding, creating a table
//! with a given id. Each change is persisted (fsync) before the in-memory catalog
//! switches, under the catalog's DDL lock.

use std::sync::Arc;

use reql::Durability;
use storage::WriteBatch;

use super::{system_id, SYSTEM_DB};
use crate::catalog::{db_key, db_record, table_key, table_record, DbEntry, TableEntry};
use crate::Cluster;

const CATALOG: &str = "catalog";

/// What to change in a table's configuration (`None` keeps the value).
#[derive(Default)]
pub(crate) struct TableAlter {
    pub(crate) db: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) durability: Option<Durability>,
    pub(crate) shards: Option<u32>,
    pub(crate) replicas: Option<u32>,
    /// Cut the shards anew from the data's distribution even if their number stays.
    pub(crate) rebalance: bool,
}

impl Cluster {
    /// `(name, id)` of every user database, by name.
    pub(crate) fn dbs_snapshot(&self) -> Vec<(String, String)> {
        self.state
            .read()
            .dbs
            .iter()
            .map(|(n, e)| (n.clone(), e.id.clone()))
            .collect()
    }

    /// Every table's catalog entry, by database and name.
    pub(crate) fn tables_snapshot(&self) -> Vec<TableEntry> {
        self.state
            .read()
            .tables
            .values()
            .map(|(e, _)| e.clone())
            .collect()
    }

    /// The id of a database (the system database included).
    pub(crate) fn db_id_of(&self, name: &str) -> Option<String> {
        if name == SYSTEM_DB {
            return Some(system_id(SYSTEM_DB));
        }
        self.state.read().dbs.get(name).map(|e| e.id.clone())
    }

    /// The name of the database with `id` (user databases only).
    pub(crate) fn db_name_of(&self, id: &str) -> Option<String> {
        self.state
            .read()
            .dbs
            .iter()
            .find(|(_, e)| e.id == id)
            .map(|(n, _)| n.clone())
    }

    /// The catalog entry of the table with `id`.
    pub(crate) fn table_by_id(&self, id: &str) -> Option<TableEntry> {
        self.state
            .read()
            .tables
            .values()
            .find(|(e, _)| e.id == id)
            .map(|(e, _)| e.clone())
    }

    /// The catalog entry of `db.name`.
    pub(crate) fn table_entry(&self, db: &str, name: &str) -> Option<TableEntry> {
        self.state
            .read()
            .tables
            .get(&(db.to_string(), name.to_string()))
            .map(|(e, _)| e.clone())
    }

    /// Changes a table's name, database, durability or recorded sharding.
    pub(crate) fn alter_table(&self, id: &str, a: TableAlter) -> Result<(), String> {
        let _g = self.ddl.lock();
        let old = self
            .table_by_id(id)
            .ok_or_else(|| format!("Table with id `{id}` does not exist."))?;
        let mut new = old.clone();
        if let Some(db) = a.db {
            new.db = db;
        }
        if let Some(n) = a.name {
            new.name = n;
        }
        if let Some(d) = a.durability {
            new.durability = d;
        }
        if let Some(s) = a.shards {
            new.shards = s;
        }
        let handle = self
            .state
            .read()
            .tables
            .get(&(old.db.clone(), old.name.clone()))
            .map(|(_, h)| h.clone());
        // Resharding: new split points from the data, the indexes to register with the
        // new shards (none may be building: its backfill holds the old shards' locks).
        let building = |name: String| {
            format!(
                "Cannot reshard table `{}.{}` while its index `{name}` is being built.",
                old.db, old.name
            )
        };
        let reshard = match &handle {
            Some(h) if new.shards != old.shards || a.rebalance => {
                h.indexes.all_ready().map_err(building)?;
                new.splits = h
                    .shards
                    .balanced_splits(new.shards as usize)
                    .map_err(|e| e.to_string())?;
                true
            }
            _ => false,
        };
        if let Some(r) = a.replicas {
            new.replicas = r;
        }
        let moved = (new.db != old.db) || (new.name != old.name);
        if moved && self.table_entry(&new.db, &new.name).is_some() {
            return Err(format!(
                "Can't rename table `{}.{}` to `{}.{}` because table `{}.{}` already exists.",
                old.db, old.name, new.db, new.name, new.db, new.name
            ));
        }
        let mut b = WriteBatch::new();
        if moved {
            b.delete(CATALOG, table_key(&old.db, &old.name));
        }
        // The record keeps the table's indexes and write hook (`crate::index`).
        let base = table_record(&new);
        let rec = match &handle {
            Some(h) => h.indexes.record_for(&base),
            None => base.clone(),
        };
        b.put(CATALOG, table_key(&new.db, &new.name), rec.to_json_bytes());
        self.commit_catalog(b).map_err(|e| e.message)?;
        if let Some(h) = &handle {
            h.indexes.rebase(table_key(&new.db, &new.name), &base);
            if reshard {
                // The data stays where it is: any split points are valid after a crash.
                h.shards
                    .reshard(&new.splits, || h.indexes.all_ready().map_err(building))?;
            }
        }
        let mut st = self.state.write();
        let key = (old.db.clone(), old.name.clone());
        if let Some((_, h)) = st.tables.remove(&key) {
            let mut handle = (*h).clone();
            handle.db = new.db.clone();
            handle.name = new.name.clone();
            handle.durability = new.durability;
            st.tables
                .insert((new.db.clone(), new.name.clone()), (new, Arc::new(handle)));
        }
        Ok(())
    }

    /// Renames the database with `id`.
    pub(crate) fn rename_db(&self, id: &str, new_name: &str) -> Result<(), String> {
        let _g = self.ddl.lock();
        let old_name = self
            .db_name_of(id)
            .ok_or_else(|| format!("Database with id `{id}` does not exist."))?;
        if old_name == new_name {
            return Ok(());
        }
        if new_name == SYSTEM_DB || self.state.read().dbs.contains_key(new_name) {
            return Err(format!("Database `{new_name}` already exists."));
        }
        let tables: Vec<TableEntry> = self
            .tables_snapshot()
            .into_iter()
            .filter(|t| t.db == old_name)
            .collect();
        let mut b = WriteBatch::new();
        b.delete(CATALOG, db_key(&old_name));
        b.put(
            CATALOG,
            db_key(new_name),
            db_record(new_name, id).to_json_bytes(),
        );
        let mut rebased = Vec::new();
        for t in &tables {
            let mut n = t.clone();
            n.db = new_name.to_string();
            b.delete(CATALOG, table_key(&t.db, &t.name));
            let handle = self
                .state
                .read()
                .tables
                .get(&(t.db.clone(), t.name.clone()))
                .map(|(_, h)| h.clone());
            let base = table_record(&n);
            let rec = match &handle {
                Some(h) => h.indexes.record_for(&base),
                None => base.clone(),
            };
            b.put(CATALOG, table_key(&n.db, &n.name), rec.to_json_bytes());
            if let Some(h) = handle {
                rebased.push((h, table_key(&n.db, &n.name), base));
            }
        }
        self.commit_catalog(b).map_err(|e| e.message)?;
        for (h, key, base) in rebased {
            h.indexes.rebase(key, &base);
        }
        let mut st = self.state.write();
        st.dbs.remove(&old_name);
        st.dbs
            .insert(new_name.to_string(), DbEntry { id: id.to_string() });
        for t in tables {
            if let Some((mut e, h)) = st.tables.remove(&(t.db.clone(), t.name.clone())) {
                e.db = new_name.to_string();
                let mut handle = (*h).clone();
                handle.db = new_name.to_string();
                st.tables
                    .insert((e.db.clone(), e.name.clone()), (e, Arc::new(handle)));
            }
        }
        Ok(())
    }

    /// Creates a database with a given id (an insert into `db_config`).
    pub(crate) fn create_db_with_id(&self, name: &str, id: &str) -> Result<(), String> {
        let _g = self.ddl.lock();
        if name == SYSTEM_DB || self.state.read().dbs.contains_key(name) {
            return Err(format!("Database `{name}` already exists."));
        }
        let mut b = WriteBatch::new();
        b.put(CATALOG, db_key(name), db_record(name, id).to_json_bytes());
        self.commit_catalog(b).map_err(|e| e.message)?;
        self.state
            .write()
            .dbs
            .insert(name.to_string(), DbEntry { id: id.to_string() });
        Ok(())
    }

    /// Creates a table with a given id (an insert into `table_config`).
    pub(crate) fn create_table_with_id(&self, e: TableEntry) -> Result<(), String> {
        let _g = self.ddl.lock();
        if !self.state.read().dbs.contains_key(&e.db) {
            return Err(format!("Database `{}` does not exist.", e.db));
        }
        if self.table_entry(&e.db, &e.name).is_some() {
            return Err(format!("Table `{}.{}` already exists.", e.db, e.name));
        }
        let h = self
            .open_table(&e)
            .map_err(|err| format!("Could not create the table's storage: {err}"))?;
        let mut b = WriteBatch::new();
        b.put(
            CATALOG,
            table_key(&e.db, &e.name),
            table_record(&e).to_json_bytes(),
        );
        self.commit_catalog(b).map_err(|e| e.message)?;
        self.state
            .write()
            .tables
            .insert((e.db.clone(), e.name.clone()), (e, h));
        Ok(())
    }
}
