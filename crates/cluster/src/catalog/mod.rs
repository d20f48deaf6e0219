//! The catalog: databases and tables (with their indexes, write hooks and shard maps)
//! and users, persisted in the `catalog` and `users` storage spaces.
//!
//! Every change is a `CatalogCommand` (`command`) applied by `Catalog` (`apply`, its
//! rules in `step`), the one writer of those spaces. `Cluster` validates requests with
//! RethinkDB's messages, applies the command under the catalog lock, and drives the
//! side effects outside the catalog (tables' storage spaces and handles, shards, feeds)
//! from its `Outcome`. Replicated, the catalog is a Raft group's state machine
//! (`machine`, entries encoded by `wire`) in spaces of that group, and a node's
//! `Cluster` follows its committed entries (`follow`, `Cluster::open_replicated`).

mod apply;
mod command;
mod follow;
mod founder;
mod generation;
mod machine;
mod propose;
mod step;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;

use datum::{Datum, Object, Str};
use parking_lot::RwLock;
use reql::error::{internal, op_failed};
use reql::{ReqlError, TableOptions};
use storage::Engine;
use store::{CacheBudget, GroupCommit};

use crate::table::{store_err, TableHandle};

/// How long `table_status` waits for a shard's leader's view of its replication before
/// it shows what this server knows (and an emergency repair for each replica's answer).
const LEADER_VIEW_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

pub use apply::Outcome;
pub(crate) use apply::{
    db_record, message, parse_write_acks, write_acks_str, Catalog, CatalogGuard, TableEntry,
};
pub use apply::{FORMAT_VERSION, SYSTEM_DB};
pub use command::{CatalogCommand, Credentials, IndexDefSpec, ReshardDef, TableChanges, TableDef};
pub(crate) use generation::Pending;
pub use machine::{space_kinds, CatalogEffects, CatalogMachine, CATALOG_KIND, USERS_KIND};
pub use propose::{catalog_route, CatalogProposer, RaftProposer};
pub use wire::{decode_reply, encode_command, WIRE_VERSION};

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
    /// Writing the catalog's first records (or moving old ones) failed.
    #[error("{0}")]
    Write(String),
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
    /// The addresses `r.http` may reach.
    pub network: reql::NetworkPolicy,
    /// This server's persistent id (`None`: a new random one, as for a throwaway server).
    pub server_id: Option<String>,
    /// This server's tags (RethinkDB's default: `default`).
    pub server_tags: Vec<String>,
}

impl ClusterOptions {
    /// Options for server `server_name`: no initial password, the default cache budget.
    pub fn new(server_name: &str) -> ClusterOptions {
        ClusterOptions {
            server_name: server_name.to_string(),
            initial_password: String::new(),
            doc_cache: CacheBudget::default(),
            network: reql::NetworkPolicy::AnyAddress,
            server_id: None,
            server_tags: vec!["default".into()],
        }
    }
}

/// This server's view of the cluster: catalog and tables.
pub struct Cluster {
    pub(crate) engine: Arc<dyn Engine>,
    commit: Arc<GroupCommit>,
    /// The budget of the tables' document caches.
    doc_cache: CacheBudget,
    /// The addresses `r.http` may reach.
    network: reql::NetworkPolicy,
    /// The catalog and its one writer.
    pub(crate) catalog: Arc<Catalog>,
    /// Every table's handle, by table id (kept in step with the catalog under its lock).
    /// Hashed with foldhash: every query naming a table looks its id up here.
    handles: RwLock<HashMap<String, Arc<TableHandle>, foldhash::fast::RandomState>>,
    /// Users, credentials and permissions (`crate::auth`).
    pub(crate) users: Arc<crate::auth::Users>,
    /// Server identity, counters, jobs and logs (`crate::system`).
    pub(crate) admin: crate::system::AdminState,
    /// This cluster's own `Arc`, for the system tables it hands out.
    pub(crate) me: std::sync::Weak<Cluster>,
    /// Side effects of a replicated catalog that failed here (`follow`).
    follow_failures: std::sync::atomic::AtomicU64,
    /// A replicated catalog's table shards on Raft (`crate::groups`), once set.
    groups: std::sync::OnceLock<Arc<crate::groups::TableGroups>>,
    /// The reshardings run or awaited here (`crate::reshard`).
    pub(crate) reshards: crate::reshard::Resumes,
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
        let catalog = Arc::new(Catalog::open(engine.clone(), &opts.initial_password)?);
        Cluster::assemble(engine, opts, catalog)
    }

    /// A cluster around an opened catalog, its tables opened.
    fn assemble(
        engine: Arc<dyn Engine>,
        opts: ClusterOptions,
        catalog: Arc<Catalog>,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let users = Arc::new(crate::auth::Users::new(catalog.clone()));
        // Started only once the format is known to be ours, so a refused directory
        // leaves no flush thread (holding the engine) behind.
        let commit = GroupCommit::start(engine.clone());
        let cluster = Arc::new_cyclic(|me| Cluster {
            engine: engine.clone(),
            commit,
            doc_cache: opts.doc_cache,
            network: opts.network,
            catalog,
            handles: RwLock::new(HashMap::default()),
            users,
            admin: {
                let mut admin = crate::system::AdminState::new();
                if let Some(id) = &opts.server_id {
                    admin.server_id = id.clone();
                }
                *admin.identity.get_mut() = (opts.server_name.clone(), opts.server_tags.clone());
                admin
            },
            me: me.clone(),
            follow_failures: Default::default(),
            groups: std::sync::OnceLock::new(),
            reshards: Default::default(),
        });
        cluster.load()?;
        Ok(cluster)
    }

    /// Opens every table of the catalog and registers its indexes (restarting
    /// unfinished builds).
    fn load(&self) -> Result<(), ClusterError> {
        self.load_tables(|_| true)
    }

    /// Opens the catalog's tables that `which` selects. A placed table (of a replicated
    /// catalog) is opened only once this node hosts groups (`set_table_groups` opens
    /// it then): its data lives in its shards' groups, never in local spaces.
    pub(crate) fn load_tables(
        &self,
        which: impl Fn(&TableEntry) -> bool,
    ) -> Result<(), ClusterError> {
        let tables: Vec<TableEntry> = self.catalog.read_state().tables.values().cloned().collect();
        let hosted = self.groups.get().is_some();
        for e in tables {
            if !which(&e) || (!e.placement.is_empty() && !hosted) {
                continue;
            }
            // A single server's table converted at its first join (`founder`): its
            // changefeeds go on with its groups' changes.
            let before = self.handle_by_id(&e.id).filter(|h| h.replicated.is_none());
            let feeds = (before.as_ref())
                .filter(|_| !e.placement.is_empty())
                .map(|h| h.shards.feeds().clone());
            let h = self.open_table_with(&e, feeds)?;
            // A replicated table's replicas registered their own indexes as they opened.
            let shards = match &h.replicated {
                Some(_) => vec![],
                None => h.shards.current().shards.clone(),
            };
            h.indexes.load(&e, &shards).map_err(ClusterError::Corrupt)?;
            self.handles.write().insert(e.id.clone(), h);
            if !e.placement.is_empty() {
                // Its data is in its groups: what it kept as a single server goes.
                self.drop_local_copy(&e, before.as_deref());
            }
        }
        Ok(())
    }

    pub(crate) fn open_table(&self, e: &TableEntry) -> Result<Arc<TableHandle>, store::StoreError> {
        self.open_table_with(e, None)
    }

    /// [`Cluster::open_table`] publishing to `feeds` (a new hub if none).
    fn open_table_with(
        &self,
        e: &TableEntry,
        feeds: Option<Arc<changefeed::Hub>>,
    ) -> Result<Arc<TableHandle>, store::StoreError> {
        let env = crate::shards::ShardEnv {
            engine: self.engine.clone(),
            space: space_of(&e.id),
            commit: self.commit.clone(),
            cache: self.doc_cache.clone(),
            feeds: feeds.unwrap_or_default(),
        };
        let groups = self.groups.get().filter(|_| !e.placement.is_empty());
        let (shards, replicated) = match groups {
            Some(g) => {
                self.drop_stale_generations(e);
                let (shards, table) = g.open(
                    self.engine.clone(),
                    e,
                    self.commit.clone(),
                    self.doc_cache.clone(),
                    env.feeds.clone(),
                )?;
                let sharded = crate::shards::Sharded::with_shards(env, &e.splits, shards)?;
                (sharded, Some(table))
            }
            None => (crate::shards::Sharded::open(env, &e.splits)?, None),
        };
        let indexes = Arc::new(crate::index::TableIndexes::new(
            self.catalog.clone(),
            &e.id,
            &format!("{}.{}", e.db, e.name),
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
            replicated,
            pending: None,
            read_mode: reql::ReadMode::Single,
        }))
    }

    /// A replicated table's handle for a new placement of its replicas (same
    /// shards): its groups follow (`TableGroups::reopen`), its changefeed hub stays.
    pub(crate) fn replace_placement(
        &self,
        h: &TableHandle,
        e: &TableEntry,
    ) -> Result<Arc<TableHandle>, store::StoreError> {
        let (Some(g), Some(r)) = (self.groups.get(), &h.replicated) else {
            return Err(store::StoreError::Corrupt("not a replicated table".into()));
        };
        let feeds = h.shards.feeds().clone();
        let old_shards = h.shards.current().shards.clone();
        let (shards, table) = g.reopen(
            self.engine.clone(),
            e,
            (r, &old_shards),
            self.commit.clone(),
            self.doc_cache.clone(),
            feeds,
        )?;
        r.end_feeds(h.shards.feeds());
        let mut handle = h.clone();
        handle.shards = Arc::new(h.shards.with_shards_like(&e.splits, shards)?);
        handle.replicated = Some(table);
        Ok(Arc::new(handle))
    }

    /// The handle of the table with `id`.
    pub(crate) fn handle_by_id(&self, id: &str) -> Option<Arc<TableHandle>> {
        self.handles.read().get(id).cloned()
    }

    /// The handle of `db.name`.
    /// Every placed table's id, the generation of its shards (their groups are
    /// `groups::group_of(id, groups::slot_of(generation, i))`) and their placement (the
    /// shard groups' configured primaries and voters), for the moves and the primary
    /// hand-back.
    pub fn placements(&self) -> Vec<(String, u64, Vec<crate::placement::ShardPlacement>)> {
        self.catalog
            .read_state()
            .tables
            .values()
            .filter(|e| !e.placement.is_empty())
            .map(|e| (e.id.clone(), e.generation, e.placement.clone()))
            .collect()
    }

    /// The Raft members on this server of the table `id`'s shards, when it is
    /// replicated (`table_status`).
    pub(crate) fn group_members(&self, id: &str) -> Option<Vec<crate::groups::Local>> {
        self.replicated_table(id).map(|r| r.members())
    }

    /// The leaders' views of replication of the shards of replicated tables, `(table
    /// id, its shards)` each (`crate::groups::ReplicatedTable::leader_view_asks`): every
    /// table's leaders are asked at once, so a server cut off from many leaders answers
    /// `table_status` and `current_issues` after one wait of `LEADER_VIEW_WAIT`, not one
    /// per table. `None` where no leader answered.
    pub(crate) fn leader_views(
        &self,
        asks: &[(&str, Vec<usize>)],
    ) -> Vec<Vec<Option<replication::Progress>>> {
        let (mut runtime, mut futures, mut counts) = (None, Vec::new(), Vec::new());
        for (id, shards) in asks {
            counts.push(shards.len());
            match self.replicated_table(id) {
                Some(r) => {
                    runtime.get_or_insert_with(|| r.runtime().clone());
                    futures.extend(r.leader_view_asks(shards, LEADER_VIEW_WAIT));
                }
                None => futures.extend(shards.iter().map(|_| None)),
            }
        }
        let mut answers = match runtime {
            Some(rt) => crate::groups::wait_all(&rt, futures).into_iter(),
            None => Vec::new().into_iter(),
        };
        counts
            .into_iter()
            .map(|n| (0..n).map(|_| answers.next().flatten()).collect())
            .collect()
    }

    /// How far each `(shard, member)` of replicated table `id` applied its shard's log
    /// (`crate::groups::ReplicatedTable::applied_by`; `None`: no answer).
    pub(crate) fn applied_by(
        &self,
        id: &str,
        members: &[(usize, replication::NodeId)],
    ) -> Vec<Option<u64>> {
        match self.replicated_table(id) {
            Some(r) => r.applied_by(members, LEADER_VIEW_WAIT),
            None => vec![None; members.len()],
        }
    }

    /// The groups of replicated table `id` on this server.
    fn replicated_table(&self, id: &str) -> Option<Arc<crate::groups::ReplicatedTable>> {
        self.handles.read().get(id)?.replicated.clone()
    }

    fn handle_of(&self, db: &str, name: &str) -> Option<Arc<TableHandle>> {
        let id = self
            .catalog
            .read_state()
            .tables
            .get(&(db.to_string(), name.to_string()))
            .map(|e| e.id.clone())?;
        self.handle_by_id(&id)
    }

    /// Creates a table under the catalog lock: opens its storage, then applies
    /// `CreateTable`. The caller checked that the database exists and the name is free.
    pub(crate) fn create_table_locked(
        &self,
        g: &mut CatalogGuard<'_>,
        e: &TableEntry,
    ) -> reql::Result<()> {
        let db_id = g
            .state()
            .dbs
            .get(&e.db)
            .map(|d| d.id.clone())
            .ok_or_else(|| Self::no_db(&e.db))?;
        let def = TableDef {
            id: e.id.clone(),
            db_id,
            name: e.name.clone(),
            primary_key: e.primary_key.clone(),
            durability: e.durability.as_str().to_string(),
            write_acks: e.single_ack.then(|| write_acks_str(true).to_string()),
            shards: e.shards,
            replicas: e.replicas,
            split_points: e.splits.iter().map(datum::to_json_value).collect(),
            // A single server's records stay as they were: its tables are its own.
            placement: if g.replicated() {
                e.placement.clone()
            } else {
                vec![]
            },
        };
        if g.replicated() {
            // Every node opens the table's storage as it applies the entry (`follow`).
            return g
                .apply(CatalogCommand::CreateTable { table: def })
                .map(|_| ());
        }
        let h = self
            .open_table(e)
            .map_err(|err| internal(format!("Could not create the table's storage: {err}")))?;
        // Registered first: nothing finds a handle before the catalog has its table.
        self.handles.write().insert(e.id.clone(), h);
        if let Err(err) = g.apply(CatalogCommand::CreateTable { table: def }) {
            self.handles.write().remove(&e.id);
            return Err(err);
        }
        Ok(())
    }

    /// The side effects of an applied command on tables' handles: dropped tables are
    /// closed and their storage dropped; renamed, moved or reconfigured ones get a
    /// handle with their new name and durability. Runs under the catalog lock.
    pub(crate) fn sync_handles(&self, out: &Outcome) {
        for (old, new) in &out.tables {
            match (old, new) {
                (Some(o), None) => self.retire(&o.id),
                (Some(o), Some(n))
                    if o.db != n.db || o.name != n.name || o.durability != n.durability =>
                {
                    let mut handles = self.handles.write();
                    if let Some(h) = handles.get(&n.id).cloned() {
                        let mut handle = (*h).clone();
                        handle.db = n.db.clone();
                        handle.name = n.name.clone();
                        handle.durability = n.durability;
                        handle.indexes.set_display(&format!("{}.{}", n.db, n.name));
                        handles.insert(n.id.clone(), Arc::new(handle));
                    }
                }
                _ => {}
            }
        }
    }

    /// A dropped table: open feeds end with RethinkDB's "Changefeed aborted (table
    /// unavailable).", its indexes are unregistered and its storage dropped.
    fn retire(&self, id: &str) {
        let removed = self.handles.write().remove(id);
        if let Some(h) = removed {
            h.shards.feeds().close();
            h.indexes.drop_all(&h.shards.current().shards);
            if let (Some(r), Some(g)) = (&h.replicated, self.groups.get()) {
                // Its data lives in its groups' spaces, dropped with them; its replicas'
                // index builds stop.
                r.drop_indexes();
                r.abandon();
                let mut slots = r.group_slots();
                if let Some(p) = &h.pending {
                    p.table.abandon();
                    slots.extend(p.table.group_slots());
                }
                g.remove(id, slots, self.engine.clone());
            }
        }
        let _ = self.engine.drop_space(&space_of(id));
    }

    /// The byte budget shared by the document caches of this server's tables.
    pub fn doc_cache(&self) -> &CacheBudget {
        &self.doc_cache
    }

    /// Waits until the write with `ticket` is on stable storage.
    pub async fn wait_durable(&self, ticket: reql::Ticket) -> reql::Result<()> {
        self.commit.wait(ticket).await.map_err(store_err)
    }

    /// Runs `then` once the write with `ticket` is durable or its flush failed (on the
    /// flush thread; `store::GroupCommit::when_durable`). `wait_durable` still tells
    /// which.
    pub fn when_durable(&self, ticket: reql::Ticket, then: store::Callback) {
        self.commit.when_durable(ticket, then);
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

    pub(crate) fn config_of(&self, e: &TableEntry) -> Datum {
        let mut m = Object::new();
        let k = |s: &str| Str::from(s);
        m.insert(k("db"), Datum::str(&e.db));
        m.insert(k("durability"), Datum::str(e.durability.as_str()));
        m.insert(k("id"), Datum::str(&e.id));
        m.insert(k("indexes"), Datum::array(vec![]));
        m.insert(k("name"), Datum::str(&e.name));
        m.insert(k("primary_key"), Datum::str(&e.primary_key));
        m.insert(k("shards"), crate::system::shards_config(self, e, false));
        m.insert(k("write_acks"), Datum::str(write_acks_str(e.single_ack)));
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

/// A table config's `write_hook` field: `{function, query}`, or null without a hook.
pub(crate) fn hook_field(e: &TableEntry) -> Datum {
    e.hook.as_ref().map_or(Datum::Null, |f| {
        reql::terms::write_hook::hook_datum(&reql::WriteHook {
            function: f.clone(),
        })
    })
}

impl Cluster {
    /// Places a table's shards on the servers it can use (`crate::placement`, RethinkDB's
    /// `table_generate_config`). Today a table's data lives on this server only, so
    /// this server, with its tags, is the one candidate: more replicas than that, or
    /// tags it does not have, fail with RethinkDB's errors. `current` is the table's
    /// placement when reconfiguring.
    pub(crate) fn check_placement(
        &self,
        shards: u32,
        replicas: &reql::Replicas,
        current: Option<&[crate::placement::ShardPlacement]>,
    ) -> reql::Result<Vec<crate::placement::ShardPlacement>> {
        // A single server's tables live on it; a replicated catalog's on any connected
        // server.
        let records = if self.catalog.is_replicated() {
            self.server_records()
        } else {
            vec![self.local_record()]
        };
        let loads = self.other_tables_load(current);
        let servers: Vec<crate::placement::Server> = records
            .into_iter()
            .map(|r| crate::placement::Server {
                load: loads.get(&r.id).copied().unwrap_or_default(),
                id: r.id,
                name: r.name,
                tags: r.tags,
            })
            .collect();
        let request = crate::placement::Request {
            shards,
            replicas: replicas.by_tag.clone(),
            primary_tag: replicas.primary_tag.clone(),
            nonvoting_tags: replicas.nonvoting_tags.clone(),
        };
        crate::placement::place(&servers, current, &request)
    }

    /// Each server's replicas and primaries of the catalog's tables, but for the table
    /// being placed (`current`, its placement when reconfiguring; one table with that
    /// placement is left out), so that new tables spread over the servers
    /// (`placement::add_load`, RethinkDB's `calculate_server_usage`).
    fn other_tables_load(
        &self,
        current: Option<&[crate::placement::ShardPlacement]>,
    ) -> std::collections::BTreeMap<String, crate::placement::Load> {
        let mut loads = std::collections::BTreeMap::new();
        let mut skip = current;
        for e in self.catalog.read_state().tables.values() {
            if skip.is_some_and(|c| c == e.placement.as_slice()) {
                skip = None;
                continue;
            }
            crate::placement::add_load(&mut loads, &e.placement);
        }
        loads
    }

    /// Where a table's shards are today: every shard on this server.
    pub(crate) fn local_placement(&self, shards: u32) -> Vec<crate::placement::ShardPlacement> {
        let id = self.local_record().id;
        let shard = crate::placement::ShardPlacement {
            primary: id.clone(),
            voting: vec![id],
            nonvoting: vec![],
            incarnations: Default::default(),
            lineage: Default::default(),
        };
        vec![shard; shards.max(1) as usize]
    }
}

pub(crate) fn change(old: Datum, new: Datum) -> Datum {
    Datum::array(vec![Datum::from_pairs([
        ("old_val", old),
        ("new_val", new),
    ])])
}

impl reql::TableAccess for Cluster {
    fn db_create(&self, name: &str) -> reql::Result<Datum> {
        let mut g = self.catalog.lock();
        if name == SYSTEM_DB || g.state().dbs.contains_key(name) {
            return Err(op_failed(format!("Database `{name}` already exists.")));
        }
        let id = uuid::Uuid::new_v4().to_string();
        g.apply(CatalogCommand::CreateDb {
            id: id.clone(),
            name: name.to_string(),
        })?;
        Ok(Datum::from_pairs([
            ("dbs_created", Datum::Number(1.0)),
            ("config_changes", change(Datum::Null, db_record(name, &id))),
        ]))
    }

    fn db_drop(&self, name: &str) -> reql::Result<Datum> {
        if name == SYSTEM_DB {
            return Err(op_failed(format!(
                "Database `{name}` is special; you can't delete it."
            )));
        }
        let mut g = self.catalog.lock();
        let id = g
            .state()
            .dbs
            .get(name)
            .map(|e| e.id.clone())
            .ok_or_else(|| Self::no_db(name))?;
        let out = g.apply(CatalogCommand::DropDb { id: id.clone() })?;
        self.sync_handles(&out);
        Ok(Datum::from_pairs([
            ("dbs_dropped", Datum::Number(1.0)),
            ("tables_dropped", Datum::from(out.tables.len() as f64)),
            ("config_changes", change(db_record(name, &id), Datum::Null)),
        ]))
    }

    fn db_list(&self) -> reql::Result<Vec<String>> {
        let mut names: Vec<String> = self.catalog.read_state().dbs.keys().cloned().collect();
        names.push(SYSTEM_DB.to_string());
        names.sort();
        Ok(names)
    }

    fn db_config(&self, name: &str) -> reql::Result<Datum> {
        if name == SYSTEM_DB {
            return Ok(self.system_db_config());
        }
        let st = self.catalog.read_state();
        let e = st.dbs.get(name).ok_or_else(|| Self::no_db(name))?;
        Ok(db_record(name, &e.id))
    }

    fn check_db(&self, name: &str) -> reql::Result<()> {
        if name == SYSTEM_DB || self.catalog.read_state().dbs.contains_key(name) {
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
        let mut g = self.catalog.lock();
        {
            let st = g.state();
            if !st.dbs.contains_key(db) {
                return Err(Self::no_db(db));
            }
            if st.tables.contains_key(&(db.to_string(), name.to_string())) {
                return Err(op_failed(format!("Table `{db}.{name}` already exists.")));
            }
        }
        let placement = self.check_placement(opts.shards, &opts.replicas, None)?;
        let e = TableEntry {
            id: uuid::Uuid::new_v4().to_string(),
            db: db.to_string(),
            name: name.to_string(),
            primary_key: opts.primary_key,
            durability: opts.durability,
            single_ack: false,
            shards: opts.shards,
            replicas: opts.replicas.total(),
            splits: crate::shards::uuid_splits(opts.shards as usize),
            indexes: Default::default(),
            hook: None,
            placement,
            generation: 0,
            resharding: None,
            abandoned: Default::default(),
        };
        self.create_table_locked(&mut g, &e)?;
        Ok(Datum::from_pairs([
            ("tables_created", Datum::Number(1.0)),
            ("config_changes", change(Datum::Null, self.config_of(&e))),
        ]))
    }

    fn table_drop(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(op_failed(
                "Database `rethinkdb` is special; you can't delete tables from it.",
            ));
        }
        let mut g = self.catalog.lock();
        let e = {
            let st = g.state();
            if !st.dbs.contains_key(db) {
                return Err(Self::no_db(db));
            }
            st.tables
                .get(&(db.to_string(), name.to_string()))
                .cloned()
                .ok_or_else(|| op_failed(format!("Table `{db}.{name}` does not exist.")))?
        };
        let out = g.apply(CatalogCommand::DropTable { id: e.id.clone() })?;
        self.sync_handles(&out);
        Ok(Datum::from_pairs([
            ("tables_dropped", Datum::Number(1.0)),
            ("config_changes", change(self.config_of(&e), Datum::Null)),
        ]))
    }

    fn table_list(&self, db: &str) -> reql::Result<Vec<String>> {
        if db == SYSTEM_DB {
            return Ok(self.system_tables());
        }
        self.check_db(db)?;
        Ok(self
            .catalog
            .read_state()
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
        let id = {
            let st = self.catalog.read_state();
            if !st.dbs.contains_key(db) {
                return Err(Self::no_db(db));
            }
            st.tables
                .get(&(db.to_string(), name.to_string()))
                .map(|e| e.id.clone())
        };
        let handle = id.and_then(|id| {
            self.handle_by_id(&id).or_else(|| {
                // A replicated catalog switches its state before the entry's effects open
                // the table's handle, both under the catalog lock: wait for them. (A single
                // server registers the handle first, so it never gets here holding it.)
                drop(self.catalog.lock());
                self.handle_by_id(&id)
            })
        });
        match handle {
            Some(h) => Ok(h as Arc<dyn reql::Table>),
            None => Err(op_failed(format!("Table `{db}.{name}` does not exist."))),
        }
    }

    fn table_read_mode(
        &self,
        db: &str,
        name: &str,
        mode: reql::ReadMode,
    ) -> reql::Result<Arc<dyn reql::Table>> {
        let t = self.table(db, name)?;
        if db == SYSTEM_DB || mode == reql::ReadMode::Single {
            return Ok(t);
        }
        // The same handle, reading as `mode` says (only a replicated table's reads
        // differ: a single server's table has one copy).
        match self.handle_of(db, name) {
            Some(h) if h.replicated.is_some() => {
                let mut h = (*h).clone();
                h.read_mode = mode;
                Ok(Arc::new(h))
            }
            _ => Ok(t),
        }
    }

    fn table_config(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return self.system_table_config(name);
        }
        let st = self.catalog.read_state();
        let e = st
            .tables
            .get(&(db.to_string(), name.to_string()))
            .ok_or_else(|| op_failed(format!("Table `{db}.{name}` does not exist.")))?;
        let mut cfg = self.config_of(e);
        if let Datum::Object(m) = &mut cfg {
            let names = e.indexes.keys().map(|n| Datum::str(n)).collect();
            std::sync::Arc::make_mut(m).insert(Str::from("indexes"), Datum::array(names));
            std::sync::Arc::make_mut(m).insert(Str::from("write_hook"), hook_field(e));
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

    fn table_ready(&self, db: &str, name: &str, flag: &str) -> reql::Result<bool> {
        self.ready_of(db, name, flag)
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
        replicas: &reql::Replicas,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.reconfigure_table(db, name, shards, replicas, dry_run)
    }

    fn emergency_repair(
        &self,
        db: &str,
        name: &str,
        erase: bool,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.repair_table(db, name, erase, dry_run)
    }

    fn rebalance(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.rebalance_table(db, name)
    }

    /// The cluster itself is `admin`'s access, which holds every permission; the
    /// addresses are the server's choice (`ClusterOptions::network`).
    fn network(&self) -> reql::Result<reql::NetworkPolicy> {
        Ok(self.network)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reql::{Durability, TableAccess};

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
                    replicas: reql::Replicas::count(1),
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

    fn spec(field: &str) -> reql::IndexSpec {
        reql::IndexSpec {
            function: serde_json::json!([69, [[2, [1]], [31, [[10, [1]], field]]]]),
            multi: false,
            geo: false,
        }
    }

    /// The test: a table renamed while its index builds in the background is,
    /// after a restart, one table under the new name with its index.
    #[test]
    fn rename_during_index_build_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 26).unwrap());
            Cluster::open(e, "s1").unwrap()
        };
        let docs = crate::index::SYNC_BUILD_DOCS + 5_000;
        let wait_ready = |t: &Arc<dyn reql::Table>| {
            for _ in 0..6000 {
                if t.index_status().unwrap().iter().all(|s| s.ready) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("the index was never ready");
        };
        {
            let c = open();
            c.table_create(
                "test",
                "t",
                TableOptions {
                    primary_key: "id".into(),
                    durability: Durability::Soft,
                    shards: 1,
                    replicas: reql::Replicas::count(1),
                },
            )
            .unwrap();
            let t = c.table("test", "t").unwrap();
            for i in 0..docs {
                let d = Datum::from_pairs([
                    ("id", Datum::from(i as f64)),
                    ("v", Datum::from((i % 7) as f64)),
                ]);
                reql::write_op::overwrite(t.as_ref(), &Datum::from(i as f64), reql::Change::Put(d))
                    .unwrap();
            }
            t.index_create("v", spec("v")).unwrap();
            // The build runs in the background: rename the table under it, again and
            // again (each time to a new name) until the build has finished, then once
            // more to its final name.
            assert!(!t.index_status().unwrap()[0].ready);
            let id = c.table_entry("test", "t").unwrap().id;
            let rename = |to: &str| {
                c.alter_table(
                    &id,
                    crate::system::TableAlter {
                        name: Some(to.into()),
                        ..Default::default()
                    },
                )
                .unwrap()
            };
            let mut name = "t".to_string();
            let mut n = 0;
            while !c.table("test", &name).unwrap().index_status().unwrap()[0].ready {
                n += 1;
                name = format!("t{n}");
                rename(&name);
            }
            rename("u");
            let u = c.table("test", "u").unwrap();
            wait_ready(&u);
            c.shutdown();
        }
        let c = open();
        assert_eq!(c.table_list("test").unwrap(), vec!["u".to_string()]);
        assert!(c.table("test", "t").is_err());
        let u = c.table("test", "u").unwrap();
        let st = u.index_status().unwrap();
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].name, "v");
        wait_ready(&u);
        let three = std::ops::Bound::Included(Datum::from(3.0));
        let n = u
            .index_count_upto("v", three.clone(), three, u64::MAX)
            .unwrap();
        assert_eq!(n, (0..docs).filter(|i| i % 7 == 3).count() as u64);
        c.shutdown();
    }
}
