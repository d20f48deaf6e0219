//! The catalog: databases and tables, persisted in the `catalog` storage space.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use datum::{Datum, Object, Str};
use parking_lot::{Mutex, RwLock};
use reql::error::{internal, op_failed};
use reql::{Durability, ReqlError, TableOptions};
use storage::{Engine, WriteBatch};
use store::{CacheBudget, GroupCommit};

use crate::table::{store_err, TableHandle};

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

const CATALOG: &str = "catalog";

/// RethinkDB's system database (its tables are served by the admin layer).
pub const SYSTEM_DB: &str = "rethinkdb";
const FORMAT_KEY: &[u8] = b"format";

/// Errors opening the catalog.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Storage failed.
    #[error("storage error: {0}")]
    Storage(#[from] storage::StorageError),
    /// The data directory was written by a newer (or unknown) format.
    #[error("data directory has format version {found}, this build supports {supported}; refusing to start")]
    Format {
        /// Found version.
        found: String,
        /// Supported version.
        supported: u64,
    },
    /// A catalog record is unreadable.
    #[error("corrupt catalog record: {0}")]
    Corrupt(String),
    /// Opening a shard failed.
    #[error("{0}")]
    Store(#[from] store::StoreError),
}

#[derive(Clone)]
pub(crate) struct DbEntry {
    pub(crate) id: String,
}

#[derive(Clone)]
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
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) dbs: BTreeMap<String, DbEntry>,
    pub(crate) tables: BTreeMap<(String, String), (TableEntry, Arc<TableHandle>)>,
}

/// How to open a `Cluster` (`Cluster::open_with_options`).
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// This server's name.
    pub server_name: String,
    /// Password of `admin`, set when the data directory is new ("" for none).
    pub initial_password: String,
    /// The byte budget shared by the document caches of this server's tables.
    pub doc_cache: CacheBudget,
}

impl ClusterOptions {
    /// Options for server `server_name`: no initial password, the default cache budget.
    pub fn new(server_name: &str) -> ClusterOptions {
        ClusterOptions {
            server_name: server_name.to_string(),
            initial_password: String::new(),
            doc_cache: CacheBudget::default(),
        }
    }
}

/// This server's view of the cluster: catalog and tables.
pub struct Cluster {
    pub(crate) engine: Arc<dyn Engine>,
    commit: Arc<GroupCommit>,
    /// The budget of the tables' document caches.
    doc_cache: CacheBudget,
    pub(crate) server_name: String,
    pub(crate) state: RwLock<State>,
    pub(crate) ddl: Mutex<()>,
    /// Users, credentials and permissions (`crate::auth`).
    pub(crate) users: Arc<crate::auth::Users>,
    /// Server identity, counters, jobs and logs (`crate::system`).
    pub(crate) admin: crate::system::AdminState,
    /// This cluster's own `Arc`, for the system tables it hands out.
    pub(crate) me: std::sync::Weak<Cluster>,
}

pub(crate) fn db_key(name: &str) -> Vec<u8> {
    format!("db/{name}").into_bytes()
}

pub(crate) fn table_key(db: &str, name: &str) -> Vec<u8> {
    format!("table/{db}/{name}").into_bytes()
}

impl Cluster {
    /// Opens the catalog on `engine`, creating database `test` on first start.
    pub fn open(engine: Arc<dyn Engine>, server_name: &str) -> Result<Arc<Cluster>, ClusterError> {
        Cluster::open_with_password(engine, server_name, "")
    }

    /// Opens the catalog and the users, creating `admin` with `initial_password` when
    /// the data directory is new.
    pub fn open_with_password(
        engine: Arc<dyn Engine>,
        server_name: &str,
        initial_password: &str,
    ) -> Result<Arc<Cluster>, ClusterError> {
        Cluster::open_with_options(
            engine,
            ClusterOptions {
                initial_password: initial_password.to_string(),
                ..ClusterOptions::new(server_name)
            },
        )
    }

    /// Opens the catalog and the users as `opts` says (see `open_with_password`).
    pub fn open_with_options(
        engine: Arc<dyn Engine>,
        opts: ClusterOptions,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let server_name = opts.server_name.as_str();
        let initial_password = opts.initial_password.as_str();
        engine.create_space(CATALOG)?;
        match engine.get(CATALOG, FORMAT_KEY)? {
            Some(v) => {
                let s = String::from_utf8_lossy(&v).to_string();
                if s != FORMAT_VERSION.to_string() {
                    return Err(ClusterError::Format {
                        found: s,
                        supported: FORMAT_VERSION,
                    });
                }
            }
            None => {
                let mut b = WriteBatch::new();
                b.put(
                    CATALOG,
                    FORMAT_KEY.to_vec(),
                    FORMAT_VERSION.to_string().into_bytes(),
                );
                b.put(
                    CATALOG,
                    db_key("test"),
                    db_record("test", &uuid::Uuid::new_v4().to_string()).to_json_bytes(),
                );
                engine.apply(b)?;
                engine.persist()?;
            }
        }
        let users = Arc::new(crate::auth::Users::open(&engine, initial_password)?);
        // Started only once the format is known to be ours, so a refused directory
        // leaves no flush thread (holding the engine) behind.
        let commit = GroupCommit::start(engine.clone());
        let cluster = Arc::new_cyclic(|me| Cluster {
            engine: engine.clone(),
            commit,
            doc_cache: opts.doc_cache,
            server_name: server_name.to_string(),
            state: RwLock::new(State::default()),
            ddl: Mutex::new(()),
            users,
            admin: crate::system::AdminState::new(),
            me: me.clone(),
        });
        cluster.load()?;
        Ok(cluster)
    }

    fn load(&self) -> Result<(), ClusterError> {
        let snap = self.engine.snapshot();
        let mut st = State::default();
        for kv in snap.range(CATALOG, Bound::Unbounded, Bound::Unbounded, false)? {
            let (k, v) = kv?;
            let key = String::from_utf8_lossy(&k).to_string();
            if key == "format" {
                continue;
            }
            let d = datum::from_json_slice(&v).map_err(|e| ClusterError::Corrupt(e.0))?;
            let s = |f: &str| {
                d.get(f)
                    .and_then(Datum::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            if key.starts_with("db/") {
                st.dbs.insert(s("name"), DbEntry { id: s("id") });
            } else if key.starts_with("table/") {
                let splits = d
                    .get("split_points")
                    .and_then(Datum::as_array)
                    .map(|a| a.to_vec())
                    .unwrap_or_default();
                let e = TableEntry {
                    id: s("id"),
                    db: s("db"),
                    name: s("name"),
                    primary_key: s("primary_key"),
                    durability: Durability::parse(&s("durability")).unwrap_or(Durability::Hard),
                    // The shards served are the ones the split points make (records of
                    // builds that only recorded a count served one).
                    shards: splits.len() as u32 + 1,
                    replicas: d.get("replicas").and_then(Datum::as_f64).unwrap_or(1.0) as u32,
                    splits,
                };
                let h = self.open_table(&e)?;
                h.indexes
                    .load(&d, &h.shards.current().shards)
                    .map_err(ClusterError::Corrupt)?;
                st.tables.insert((e.db.clone(), e.name.clone()), (e, h));
            }
        }
        *self.state.write() = st;
        Ok(())
    }

    pub(crate) fn open_table(&self, e: &TableEntry) -> Result<Arc<TableHandle>, store::StoreError> {
        let env = crate::shards::ShardEnv {
            engine: self.engine.clone(),
            space: space_of(&e.id),
            commit: self.commit.clone(),
            cache: self.doc_cache.clone(),
            feeds: changefeed::Hub::new(),
        };
        let shards = crate::shards::Sharded::open(env, &e.splits)?;
        let indexes = Arc::new(crate::index::TableIndexes::new(
            self.engine.clone(),
            &e.id,
            &format!("{}.{}", e.db, e.name),
            table_key(&e.db, &e.name),
            &table_record(e),
        ));
        Ok(Arc::new(TableHandle {
            indexes,
            db: e.db.clone(),
            name: e.name.clone(),
            primary_key: e.primary_key.clone(),
            durability: e.durability,
            shards: Arc::new(shards),
            commit: self.commit.clone(),
            counters: self.admin.counters.table(&e.id),
        }))
    }

    /// The byte budget shared by the document caches of this server's tables.
    pub fn doc_cache(&self) -> &CacheBudget {
        &self.doc_cache
    }

    /// Waits until the write with `ticket` is on stable storage.
    pub async fn wait_durable(&self, ticket: reql::Ticket) -> reql::Result<()> {
        self.commit.wait(ticket).await.map_err(store_err)
    }

    /// Sets the bound on how long soft-durability writes stay unflushed.
    pub fn set_soft_flush_interval(&self, d: std::time::Duration) {
        self.commit.set_soft_flush_interval(d);
    }

    /// Flushes everything and stops the flush thread.
    pub fn shutdown(&self) {
        let _ = self.engine.persist();
        self.commit.shutdown();
    }

    pub(crate) fn commit_catalog(&self, b: WriteBatch) -> reql::Result<()> {
        self.engine
            .apply(b)
            .and_then(|_| self.engine.persist())
            .map_err(|e| op_failed(format!("Could not write the catalog: {e}")))
    }

    pub(crate) fn config_of(&self, e: &TableEntry) -> Datum {
        let mut m = Object::new();
        let k = |s: &str| Str::from(s);
        m.insert(k("db"), Datum::str(&e.db));
        m.insert(k("durability"), Datum::str(e.durability.as_str()));
        m.insert(k("id"), Datum::str(&e.id));
        m.insert(k("indexes"), Datum::array(vec![]));
        m.insert(k("name"), Datum::str(&e.name));
        m.insert(k("primary_key"), Datum::str(&e.primary_key));
        let shard = Datum::from_pairs([
            ("nonvoting_replicas", Datum::array(vec![])),
            ("primary_replica", Datum::str(&self.server_name)),
            (
                "replicas",
                Datum::array(vec![Datum::str(&self.server_name)]),
            ),
        ]);
        m.insert(
            k("shards"),
            Datum::array(vec![shard; e.shards.max(1) as usize]),
        );
        m.insert(k("write_acks"), Datum::str("majority"));
        m.insert(k("write_hook"), Datum::Null);
        Datum::object(m)
    }

    pub(crate) fn no_db(name: &str) -> ReqlError {
        op_failed(format!("Database `{name}` does not exist."))
    }
}

fn space_of(id: &str) -> String {
    format!("t_{id}")
}

pub(crate) fn db_record(name: &str, id: &str) -> Datum {
    Datum::from_pairs([("id", Datum::str(id)), ("name", Datum::str(name))])
}

pub(crate) fn table_record(e: &TableEntry) -> Datum {
    Datum::from_pairs([
        ("id", Datum::str(&e.id)),
        ("db", Datum::str(&e.db)),
        ("name", Datum::str(&e.name)),
        ("primary_key", Datum::str(&e.primary_key)),
        ("durability", Datum::str(e.durability.as_str())),
        ("shards", Datum::from(e.shards as f64)),
        ("replicas", Datum::from(e.replicas as f64)),
        ("split_points", Datum::array(e.splits.clone())),
    ])
}

/// A table config's `write_hook` field: `{function, query}`, or null without a hook.
pub(crate) fn hook_field(h: &TableHandle) -> Datum {
    h.indexes
        .hook()
        .map_or(Datum::Null, |w| reql::terms::write_hook::hook_datum(&w))
}

pub(crate) fn change(old: Datum, new: Datum) -> Datum {
    Datum::array(vec![Datum::from_pairs([
        ("old_val", old),
        ("new_val", new),
    ])])
}

impl reql::TableAccess for Cluster {
    fn db_create(&self, name: &str) -> reql::Result<Datum> {
        let _g = self.ddl.lock();
        if name == SYSTEM_DB || self.state.read().dbs.contains_key(name) {
            return Err(op_failed(format!("Database `{name}` already exists.")));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let rec = db_record(name, &id);
        let mut b = WriteBatch::new();
        b.put(CATALOG, db_key(name), rec.to_json_bytes());
        self.commit_catalog(b)?;
        self.state
            .write()
            .dbs
            .insert(name.to_string(), DbEntry { id });
        Ok(Datum::from_pairs([
            ("dbs_created", Datum::Number(1.0)),
            ("config_changes", change(Datum::Null, rec)),
        ]))
    }

    fn db_drop(&self, name: &str) -> reql::Result<Datum> {
        if name == SYSTEM_DB {
            return Err(op_failed(format!(
                "Database `{name}` is special; you can't delete it."
            )));
        }
        let _g = self.ddl.lock();
        let (entry, tables) = {
            let st = self.state.read();
            let e = st.dbs.get(name).cloned().ok_or_else(|| Self::no_db(name))?;
            let t: Vec<TableEntry> = st
                .tables
                .values()
                .filter(|(t, _)| t.db == name)
                .map(|(t, _)| t.clone())
                .collect();
            (e, t)
        };
        let mut b = WriteBatch::new();
        b.delete(CATALOG, db_key(name));
        for t in &tables {
            b.delete(CATALOG, table_key(&t.db, &t.name));
        }
        self.commit_catalog(b)?;
        {
            let mut st = self.state.write();
            st.dbs.remove(name);
            for ((d, _), (_, h)) in st.tables.iter() {
                if d == name {
                    h.shards.feeds().close();
                    h.indexes.drop_all(&h.shards.current().shards);
                }
            }
            st.tables.retain(|(d, _), _| d != name);
        }
        for t in &tables {
            let _ = self.engine.drop_space(&space_of(&t.id));
        }
        Ok(Datum::from_pairs([
            ("dbs_dropped", Datum::Number(1.0)),
            ("tables_dropped", Datum::from(tables.len() as f64)),
            (
                "config_changes",
                change(db_record(name, &entry.id), Datum::Null),
            ),
        ]))
    }

    fn db_list(&self) -> reql::Result<Vec<String>> {
        let mut names: Vec<String> = self.state.read().dbs.keys().cloned().collect();
        names.push(SYSTEM_DB.to_string());
        names.sort();
        Ok(names)
    }

    fn db_config(&self, name: &str) -> reql::Result<Datum> {
        if name == SYSTEM_DB {
            return Ok(self.system_db_config());
        }
        let st = self.state.read();
        let e = st.dbs.get(name).ok_or_else(|| Self::no_db(name))?;
        Ok(db_record(name, &e.id))
    }

    fn check_db(&self, name: &str) -> reql::Result<()> {
        if name == SYSTEM_DB || self.state.read().dbs.contains_key(name) {
            Ok(())
        } else {
            Err(Self::no_db(name))
        }
    }

    fn table_create(&self, db: &str, name: &str, opts: TableOptions) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(op_failed(
                "Database `rethinkdb` is special; you can't create new tables in it.",
            ));
        }
        let _g = self.ddl.lock();
        {
            let st = self.state.read();
            if !st.dbs.contains_key(db) {
                return Err(Self::no_db(db));
            }
            if st.tables.contains_key(&(db.to_string(), name.to_string())) {
                return Err(op_failed(format!("Table `{db}.{name}` already exists.")));
            }
        }
        let e = TableEntry {
            id: uuid::Uuid::new_v4().to_string(),
            db: db.to_string(),
            name: name.to_string(),
            primary_key: opts.primary_key,
            durability: opts.durability,
            shards: opts.shards,
            replicas: opts.replicas,
            splits: crate::shards::uuid_splits(opts.shards as usize),
        };
        let h = self
            .open_table(&e)
            .map_err(|err| internal(format!("Could not create the table's storage: {err}")))?;
        let mut b = WriteBatch::new();
        b.put(
            CATALOG,
            table_key(db, name),
            table_record(&e).to_json_bytes(),
        );
        self.commit_catalog(b)?;
        let cfg = self.config_of(&e);
        self.state
            .write()
            .tables
            .insert((db.to_string(), name.to_string()), (e, h));
        Ok(Datum::from_pairs([
            ("tables_created", Datum::Number(1.0)),
            ("config_changes", change(Datum::Null, cfg)),
        ]))
    }

    fn table_drop(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(op_failed(
                "Database `rethinkdb` is special; you can't delete tables from it.",
            ));
        }
        let _g = self.ddl.lock();
        let e = {
            let st = self.state.read();
            if !st.dbs.contains_key(db) {
                return Err(Self::no_db(db));
            }
            st.tables
                .get(&(db.to_string(), name.to_string()))
                .map(|(e, _)| e.clone())
                .ok_or_else(|| op_failed(format!("Table `{db}.{name}` does not exist.")))?
        };
        let mut b = WriteBatch::new();
        b.delete(CATALOG, table_key(db, name));
        self.commit_catalog(b)?;
        let cfg = self.config_of(&e);
        let removed = self
            .state
            .write()
            .tables
            .remove(&(db.to_string(), name.to_string()));
        // Open feeds end with RethinkDB's "Changefeed aborted (table unavailable).".
        if let Some((_, h)) = removed {
            h.shards.feeds().close();
            h.indexes.drop_all(&h.shards.current().shards);
        }
        let _ = self.engine.drop_space(&space_of(&e.id));
        Ok(Datum::from_pairs([
            ("tables_dropped", Datum::Number(1.0)),
            ("config_changes", change(cfg, Datum::Null)),
        ]))
    }

    fn table_list(&self, db: &str) -> reql::Result<Vec<String>> {
        if db == SYSTEM_DB {
            return Ok(self.system_tables());
        }
        self.check_db(db)?;
        Ok(self
            .state
            .read()
            .tables
            .keys()
            .filter(|(d, _)| d == db)
            .map(|(_, n)| n.clone())
            .collect())
    }

    fn table(&self, db: &str, name: &str) -> reql::Result<Arc<dyn reql::Table>> {
        if db == SYSTEM_DB {
            return self.system_table(name, false, crate::auth::ADMIN);
        }
        let st = self.state.read();
        if !st.dbs.contains_key(db) {
            return Err(Self::no_db(db));
        }
        match st.tables.get(&(db.to_string(), name.to_string())) {
            Some((_, h)) => Ok(h.clone() as Arc<dyn reql::Table>),
            None => Err(op_failed(format!("Table `{db}.{name}` does not exist."))),
        }
    }

    fn table_config(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return self.system_table_config(name);
        }
        let st = self.state.read();
        let (e, h) = st
            .tables
            .get(&(db.to_string(), name.to_string()))
            .ok_or_else(|| op_failed(format!("Table `{db}.{name}` does not exist.")))?;
        let mut cfg = self.config_of(e);
        if let Datum::Object(m) = &mut cfg {
            let names = h.indexes.names().iter().map(|n| Datum::str(n)).collect();
            std::sync::Arc::make_mut(m).insert(Str::from("indexes"), Datum::array(names));
            std::sync::Arc::make_mut(m).insert(Str::from("write_hook"), hook_field(h));
        }
        Ok(cfg)
    }

    fn table_with_ids(&self, db: &str, name: &str) -> reql::Result<Arc<dyn reql::Table>> {
        if db == SYSTEM_DB {
            return self.system_table(name, true, crate::auth::ADMIN);
        }
        self.table(db, name)
    }

    fn table_config_row(
        &self,
        db: &str,
        name: &str,
    ) -> reql::Result<(Arc<dyn reql::Table>, Datum)> {
        self.config_row_for(db, name, crate::auth::ADMIN)
    }

    fn db_config_row(&self, db: &str) -> reql::Result<(Arc<dyn reql::Table>, Datum)> {
        self.db_config_row_for(db, crate::auth::ADMIN)
    }

    fn table_status(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.status_of(db, name)
    }

    fn grant(
        &self,
        db: Option<&str>,
        table: Option<&str>,
        user: &str,
        perms: &Datum,
    ) -> reql::Result<Datum> {
        self.grant_for(db, table, user, perms)
    }

    fn reconfigure(
        &self,
        db: &str,
        name: &str,
        shards: u32,
        replicas: u32,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.reconfigure_table(db, name, shards, replicas, dry_run)
    }

    fn rebalance(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.rebalance_table(db, name)
    }

    /// The cluster itself is `admin`'s access, which holds every permission.
    fn require_connect(&self) -> reql::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reql::TableAccess;

    #[test]
    fn catalog_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
            let c = Cluster::open(e, "s1").unwrap();
            c.db_create("d").unwrap();
            c.table_create(
                "d",
                "t",
                TableOptions {
                    primary_key: "k".into(),
                    durability: Durability::Soft,
                    shards: 1,
                    replicas: 1,
                },
            )
            .unwrap();
            assert!(c.db_create("d").is_err());
            c.shutdown();
        }
        let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
        let c = Cluster::open(e, "s1").unwrap();
        assert_eq!(
            c.db_list().unwrap(),
            vec!["d".to_string(), "rethinkdb".to_string(), "test".to_string()]
        );
        let t = c.table("d", "t").unwrap();
        assert_eq!(t.primary_key(), "k");
        c.table_drop("d", "t").unwrap();
        assert!(c.table("d", "t").is_err());
    }
}
