//! The `TableAccess` seam: everything the evaluator needs from the catalog and tables.
//!
//! `reql` defines these traits and the `cluster` crate implements them, so evaluation is
//! testable with an in-memory double and knows nothing of storage.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::error::Result;
use crate::value::DatumStream;
use crate::write_op::{Applied, WriteOp};

/// RethinkDB's `read_mode` of `r.table`: whose copy of the data a read sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// The primary's, refused when it is cut off from its quorum (the default).
    #[default]
    Single,
    /// Linearizable: confirmed by a quorum first.
    Majority,
    /// Whichever replica the server has, possibly behind (also `_debug_direct`).
    Outdated,
}

impl ReadMode {
    /// The mode named by `read_mode`.
    pub fn parse(s: &str) -> Option<ReadMode> {
        match s {
            "single" => Some(ReadMode::Single),
            "majority" => Some(ReadMode::Majority),
            "outdated" | "_debug_direct" => Some(ReadMode::Outdated),
            _ => None,
        }
    }
}

/// Write durability: `Hard` is acknowledged only once on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledge after fsync.
    Hard,
    /// Acknowledge after the write is applied; flushed soon after.
    Soft,
}

impl Durability {
    /// Parses RethinkDB's `durability` option value.
    pub fn parse(s: &str) -> Option<Durability> {
        match s {
            "hard" => Some(Durability::Hard),
            "soft" => Some(Durability::Soft),
            _ => None,
        }
    }

    /// The option's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Hard => "hard",
            Durability::Soft => "soft",
        }
    }
}

/// Options of `table_create`.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// The primary key field (default `id`).
    pub primary_key: String,
    /// The table's default durability.
    pub durability: Durability,
    /// Shards requested (recorded; one shard is served today).
    pub shards: u32,
    /// Replicas requested (placed by the catalog, whose placement checks them).
    pub replicas: Replicas,
}

/// The `replicas`, `primary_replica_tag` and `nonvoting_replica_tags` options as
/// RethinkDB reads them (`get_replicas_and_primary`): a number `n` is `{default: n}`
/// with the primary tag `default`. Only their types are checked here; whether they can
/// be placed is the catalog's question (`cluster::placement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replicas {
    /// Replicas per shard, by server tag.
    pub by_tag: std::collections::BTreeMap<String, u32>,
    /// The tag whose servers hold the primaries.
    pub primary_tag: String,
    /// Tags whose replicas do not vote.
    pub nonvoting_tags: std::collections::BTreeSet<String>,
}

impl Replicas {
    /// `n` replicas on servers tagged `default`.
    pub fn count(n: u32) -> Self {
        Replicas {
            by_tag: [("default".to_string(), n)].into_iter().collect(),
            primary_tag: "default".into(),
            nonvoting_tags: Default::default(),
        }
    }

    /// Replicas per shard over every tag.
    pub fn total(&self) -> u32 {
        self.by_tag.values().fold(0u32, |a, &n| a.saturating_add(n))
    }
}

/// What a write wants done with one document.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Leave the document as it is.
    Keep,
    /// Store this document (insert or replace).
    Put(Datum),
    /// Delete the document.
    Delete,
}

/// A commit ticket: a write applied in memory that becomes durable once the storage
/// flush watermark reaches it.
pub type Ticket = u64;

/// One table as the evaluator sees it.
pub trait Table: Send + Sync {
    /// The database name.
    fn db(&self) -> &str;
    /// The table name.
    fn name(&self) -> &str;
    /// The primary key field.
    fn primary_key(&self) -> &str;
    /// The table's default durability.
    fn durability(&self) -> Durability;
    /// A document by primary key.
    fn get(&self, key: &Datum) -> Result<Option<Datum>>;
    /// As `get`, when it can be answered at once without waiting for anything (another
    /// server, a Raft round): for a connection's task, which must never block. None:
    /// not at once (`get` on a thread that may wait answers).
    fn get_now(&self, key: &Datum) -> Option<Result<Option<Datum>>>;
    /// Documents in primary-key order between two bounds, lazily.
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream>;
    /// The number of documents.
    fn count(&self) -> Result<u64>;
    /// Up to `parts - 1` primary keys, ascending, that cut the table into `parts` ranges
    /// of about equal size, for parallel scans (`crate::parallel`); none when the table
    /// cannot or need not be split.
    fn split_points(&self, parts: usize) -> Result<Vec<Datum>>;
    /// Applies one write operation if the key still holds `op.expect`
    /// (`crate::write_op`): short, deterministic, no user code. Writes are evaluated
    /// with `write_op::write_doc`, which calls this.
    fn apply(&self, op: WriteOp) -> Result<Applied>;
    /// Applies writes to distinct keys, each as `apply` would, in any order or at once;
    /// the answers in the order of `ops`. A replicated table proposes them together, so
    /// they share Raft rounds and fsyncs instead of each waiting for the one before.
    /// The caller bounds how many there are.
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<Result<Applied>>;
    /// A ticket covering every write made so far (for `sync`).
    fn sync_ticket(&self) -> Result<Ticket>;

    /// `index_create`: registers a secondary index and starts building it in the
    /// background. Errors with RethinkDB's message when the name is taken; a table
    /// without indexes answers `no_indexes`.
    fn index_create(&self, name: &str, spec: IndexSpec) -> Result<()>;
    /// `index_drop`.
    fn index_drop(&self, name: &str) -> Result<()>;
    /// `index_rename` (`overwrite` replaces an index called `new`).
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> Result<()>;
    /// Every secondary index with its definition and build state, sorted by name.
    fn index_status(&self) -> Result<Vec<IndexStatus>>;
    /// `index_status` with the optimizer's statistics (`entries`, `unkeyed`) wherever
    /// the table has them: what the optimizer plans with, read once per plan. It may
    /// cost a round of requests (a replicated table asks its shards' leaders), which
    /// `index_status`, read by every index read, must not.
    fn index_statistics(&self) -> Result<Vec<IndexStatus>>;
    /// Documents whose values in index `name` lie between two bounds, in index order (a
    /// document appears once per matching entry of a multi index). An unknown index
    /// answers `index_not_found`.
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream>;
    /// The number of index entries between two bounds (no document is read), counting
    /// no further than `limit`: an answer of `limit` or more means "at least `limit`"
    /// (the optimizer's estimates stop at the best plan so far; `u64::MAX` counts all).
    fn index_count_upto(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        limit: u64,
    ) -> Result<u64>;
    /// The index values between two bounds, in index order (for `distinct(index=)`).
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream>;
    /// Like `index_scan`, each document with the index value of its entry.
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> Result<PairStream>;
    /// The number of documents whose primary keys lie between two bounds (a table that
    /// cannot count a range directly answers `count_by_scan`).
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64>;
    /// When this value is a table slice (`between`, `order_by(index=)`), its range;
    /// `None` for a table.
    fn slice(&self) -> Option<&crate::slice::TableSlice>;
    /// The table's write hook, applied by every write unless `ignore_write_hook`
    /// (`terms::write_hook`). The table stores the definition; `reql` evaluates it. A
    /// table that cannot hold one answers `Ok(None)`.
    fn write_hook(&self) -> Result<Option<WriteHook>>;
    /// `set_write_hook`: stores (`Some`) or removes (`None`) the hook, persisted with
    /// the table's configuration. Returns whether a hook existed before. A table that
    /// cannot hold one answers `no_write_hooks`.
    fn set_write_hook(&self, hook: Option<WriteHook>) -> Result<bool>;
    /// Fails unless the user may change this table's configuration (`config`): RethinkDB
    /// requires it for `get_write_hook` and for writes with `ignore_write_hook: true`.
    /// The permission layer (`cluster`'s `access`) refuses it for a user without
    /// `config`; a table itself says what it demands beyond that.
    fn require_config(&self) -> Result<()>;
    /// Opens a changefeed on this table (`terms::changes`). With `include_initial`, the
    /// initial values are read atomically with the registration: no write is both in
    /// them and in the feed, and none is in neither. A table without feeds answers
    /// `no_changefeeds`.
    fn subscribe(&self, req: changefeed::Request) -> Result<changefeed::Subscription>;
}

/// `count_range` for a table that cannot count a range directly: reads the documents
/// of the range and counts them.
pub fn count_by_scan(t: &dyn Table, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
    let mut n = 0;
    for d in t.scan(lower, upper, false)? {
        d?;
        n += 1;
    }
    Ok(n)
}

/// A table's write hook as `set_write_hook` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteHook {
    /// The hook function `(context, old_val, new_val) -> new_val` as a FUNC term in
    /// RethinkDB's JSON wire form.
    pub function: serde_json::Value,
}

/// Documents with the index value of their entry (`Table::index_pairs`).
pub type PairStream = Box<dyn Iterator<Item = Result<(Datum, Datum)>> + Send>;

/// A secondary index definition as `index_create` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    /// The index function as a FUNC term in RethinkDB's JSON wire form.
    pub function: serde_json::Value,
    /// `multi: true`: one entry per element of an array value.
    pub multi: bool,
    /// `geo: true`: a geospatial index.
    pub geo: bool,
}

/// One secondary index as `index_status` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexStatus {
    /// The index name.
    pub name: String,
    /// Its definition.
    pub spec: IndexSpec,
    /// True once built.
    pub ready: bool,
    /// Build progress in `[0, 1]`.
    pub progress: f64,
    /// The number of index entries, kept up to date by every write once the index is
    /// ready (`None` while unknown): the query optimizer's statistics (`crate::optimize`).
    pub entries: Option<u64>,
    /// The documents whose value this index cannot hold, by where the value sorts, kept
    /// up to date by every write (`None` while unknown; never an under-count).
    pub unkeyed: Option<Unkeyed>,
}

/// The documents an index holds no entry for although its function gave them a value
/// (`IndexStatus::unkeyed`): a range read of the index misses them, so the optimizer
/// reads a range that spans their part of ReQL's order only when there are none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unkeyed {
    /// Null values.
    pub null: u64,
    /// Arrays holding an object (arrays sort before every other type).
    pub array: u64,
    /// Objects and geometry (between numbers and binary values).
    pub object: u64,
}

/// RethinkDB's error for an unknown index.
pub fn index_not_found(name: &str, db: &str, table: &str) -> crate::error::ReqlError {
    crate::error::op_failed(format!(
        "Index `{name}` was not found on table `{db}.{table}`."
    ))
}

/// The answer of a table without secondary indexes to an index change.
pub fn no_indexes(db: &str, table: &str) -> crate::error::ReqlError {
    crate::error::op_failed(format!(
        "Table `{db}.{table}` does not support secondary indexes."
    ))
}

/// The answer of a table without write hooks to `set_write_hook`.
pub fn no_write_hooks(db: &str, table: &str) -> crate::error::ReqlError {
    crate::error::op_failed(format!(
        "Table `{db}.{table}` does not support write hooks."
    ))
}

/// The answer of a table without changefeeds to `subscribe`.
pub fn no_changefeeds(db: &str, table: &str) -> crate::error::ReqlError {
    crate::error::logic(format!(
        "Table `{db}.{table}` does not support changefeeds."
    ))
}

/// The catalog and table lookup.
pub trait TableAccess: Send + Sync {
    /// `db_create`: the result object.
    fn db_create(&self, name: &str) -> Result<Datum>;
    /// `db_drop`: the result object.
    fn db_drop(&self, name: &str) -> Result<Datum>;
    /// `db_list`.
    fn db_list(&self) -> Result<Vec<String>>;
    /// The configuration document of a database (`{id, name}`).
    fn db_config(&self, name: &str) -> Result<Datum>;
    /// Fails with RethinkDB's error when the database does not exist.
    fn check_db(&self, name: &str) -> Result<()>;
    /// `table_create`: the result object.
    fn table_create(&self, db: &str, name: &str, opts: TableOptions) -> Result<Datum>;
    /// `table_drop`: the result object.
    fn table_drop(&self, db: &str, name: &str) -> Result<Datum>;
    /// `table_list`.
    fn table_list(&self, db: &str) -> Result<Vec<String>>;
    /// A table by name.
    fn table(&self, db: &str, name: &str) -> Result<Arc<dyn Table>>;
    /// A table by name whose reads follow `mode` (`r.table(name, read_mode=...)`);
    /// `ReadMode::Single` is `table`. A table with one copy reads it in every mode.
    fn table_read_mode(&self, db: &str, name: &str, mode: ReadMode) -> Result<Arc<dyn Table>>;
    /// The configuration document of a table (as `table.config()` shows it).
    fn table_config(&self, db: &str, name: &str) -> Result<Datum>;

    /// `table(name, identifier_format: "uuid")`: system tables show databases, tables
    /// and servers by id instead of name (other tables are unaffected).
    fn table_with_ids(&self, db: &str, name: &str) -> Result<Arc<dyn Table>>;
    /// `table.config()` as a writable row: the `rethinkdb.table_config` table and the
    /// row's primary key.
    fn table_config_row(&self, db: &str, name: &str) -> Result<(Arc<dyn Table>, Datum)>;
    /// `db.config()` as a writable row of `rethinkdb.db_config`.
    fn db_config_row(&self, db: &str) -> Result<(Arc<dyn Table>, Datum)>;
    /// `table.status()`: the table's `rethinkdb.table_status` row.
    fn table_status(&self, db: &str, name: &str) -> Result<Datum>;
    /// Whether the table's status flag `flag` (`ready_for_writes`, ...) holds now
    /// (`table.wait()`; no permission beyond the table's existence).
    fn table_ready(&self, db: &str, name: &str, flag: &str) -> Result<bool>;
    /// `grant` at the global (`db` None), database or table scope: RethinkDB's result
    /// `{granted: 1, permissions_changes: [{old_val, new_val}]}`.
    fn grant(
        &self,
        db: Option<&str>,
        table: Option<&str>,
        user: &str,
        perms: &Datum,
    ) -> Result<Datum>;
    /// `reconfigure` of one table: places `shards`/`replicas` and records them unless
    /// `dry_run`; the result has `reconfigured`, `config_changes` and `status_changes`.
    fn reconfigure(
        &self,
        db: &str,
        name: &str,
        shards: u32,
        replicas: &Replicas,
        dry_run: bool,
    ) -> Result<Datum>;
    /// `reconfigure(emergency_repair=...)` of one table: its shards that lost a quorum
    /// of their voting replicas keep their available replicas only (`erase`: a shard
    /// with none is recreated empty), unless `dry_run`; the result is `reconfigure`'s.
    /// A store without replicas never needs repair.
    fn emergency_repair(&self, db: &str, name: &str, erase: bool, dry_run: bool) -> Result<Datum> {
        let _ = (db, name, erase, dry_run);
        Err(crate::error::op_failed(
            "This table doesn't need to be repaired.",
        ))
    }
    /// `rebalance` of one table: its shards cut anew where the data's distribution says.
    /// Returns the table's status change `{old_val, new_val}`.
    fn rebalance(&self, db: &str, name: &str) -> Result<Datum>;
    /// Fails unless the user may reach the network (`r.http` needs `connect`); else
    /// which addresses the server lets `r.http` reach.
    fn network(&self) -> Result<NetworkPolicy>;
}

/// The addresses `r.http` may connect to (the server's `--reql-http-public-only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// Any address, as RethinkDB.
    AnyAddress,
    /// Public addresses only: loopback, private, link-local and other special-purpose
    /// addresses are refused, after every name resolution (redirects included).
    PublicOnly,
}

fn unsupported(what: &str) -> crate::error::ReqlError {
    crate::error::logic(format!(
        "The term `{what}` is not supported by this server yet."
    ))
}

/// A catalog with no databases, for evaluation that must not reach tables (index and
/// write-hook functions) and for tests of terms that never touch them. Every catalog
/// call fails with `message` (`table_with_ids` through `table`), except the admin terms
/// (`config`/`status` rows, `grant`, `reconfigure`), which answer that the term is not
/// supported; `network` allows any address when `connect` is set and fails otherwise.
pub struct NoTables {
    /// The error every catalog call answers.
    pub message: &'static str,
    /// Whether `r.http` is allowed.
    pub connect: bool,
}

impl NoTables {
    fn refuse<T>(&self) -> Result<T> {
        Err(crate::error::logic(self.message))
    }
}

impl TableAccess for NoTables {
    fn table_read_mode(&self, _: &str, _: &str, _: ReadMode) -> Result<Arc<dyn Table>> {
        self.refuse()
    }
    fn db_create(&self, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn db_drop(&self, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn db_list(&self) -> Result<Vec<String>> {
        self.refuse()
    }
    fn db_config(&self, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn check_db(&self, _: &str) -> Result<()> {
        self.refuse()
    }
    fn table_create(&self, _: &str, _: &str, _: TableOptions) -> Result<Datum> {
        self.refuse()
    }
    fn table_drop(&self, _: &str, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn table_list(&self, _: &str) -> Result<Vec<String>> {
        self.refuse()
    }
    fn table(&self, _: &str, _: &str) -> Result<Arc<dyn Table>> {
        self.refuse()
    }
    fn table_config(&self, _: &str, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn rebalance(&self, _: &str, _: &str) -> Result<Datum> {
        self.refuse()
    }
    fn table_with_ids(&self, db: &str, name: &str) -> Result<Arc<dyn Table>> {
        self.table(db, name)
    }
    fn table_config_row(&self, _: &str, _: &str) -> Result<(Arc<dyn Table>, Datum)> {
        Err(unsupported("config"))
    }
    fn db_config_row(&self, _: &str) -> Result<(Arc<dyn Table>, Datum)> {
        Err(unsupported("config"))
    }
    fn table_status(&self, _: &str, _: &str) -> Result<Datum> {
        Err(unsupported("status"))
    }
    fn table_ready(&self, db: &str, name: &str, _: &str) -> Result<bool> {
        // In memory, on one node: a table that exists is ready.
        self.table(db, name).map(|_| true)
    }
    fn grant(&self, _: Option<&str>, _: Option<&str>, _: &str, _: &Datum) -> Result<Datum> {
        Err(unsupported("grant"))
    }
    fn reconfigure(&self, _: &str, _: &str, _: u32, _: &Replicas, _: bool) -> Result<Datum> {
        Err(unsupported("reconfigure"))
    }
    fn network(&self) -> Result<NetworkPolicy> {
        if self.connect {
            Ok(NetworkPolicy::AnyAddress)
        } else {
            Err(crate::error::ReqlError::new(
                crate::error::ErrorKind::Permission,
                "User `bob` does not have the required `connect` permission.",
            ))
        }
    }
}
