//! The `rethinkdb` system database: its tables as `reql::Table`s computed from live
//! state (catalog, users, counters, jobs, logs), with RethinkDB 2.4's document shapes.
//!
//! Rows are built on each read (the tables are small); `get` and `scan` filter them by
//! primary key. A write goes through `Table::apply` like any other, so `insert`,
//! `update`, `replace` and `delete` (and `config().update(...)`) all work; the change
//! is validated and applied to the catalog or users by `writes`, and a refused change
//! is an error counted in the write result with RethinkDB's message. Tables RethinkDB
//! makes read-only answer "It's illegal to write to the `rethinkdb.X` table."
//!
//! `identifier_format: "uuid"` shows databases, tables and servers by id instead of
//! name. `server_config`, `server_status` and the server issues list every connected
//! server of the cluster (`servers`), and `stats` has every connected server's counters
//! (`stats`).

mod alter;
mod feeds;
mod issues;
mod repair;
mod rows;
mod servers;
mod state;
mod stats;
mod status;
mod writes;

use std::ops::Bound;
use std::sync::Arc;

use datum::{Datum, Version};
use reql::access::{count_by_scan, index_not_found, no_indexes, no_write_hooks, PairStream};
use reql::error::op_failed;
use reql::{Applied, Change, DatumStream, Durability, Ticket, WriteOp};

use crate::Cluster;

pub(crate) use alter::TableAlter;
pub(crate) use feeds::SystemFeeds;
pub use issues::{name_collisions, not_fully_connected};
pub(crate) use rows::{shards_config, table_config_row, table_status_row};
pub use servers::{version_string, Membership, ServerRecord};
pub use state::{
    now_secs, AdminState, CursorGuard, JobGuard, JobQuery, Metrics, ServerInfo, TableCounters,
    TableMetrics, LATENCY_BOUNDS,
};
pub use stats::{ServerStats, TableStats};

/// The system database's name.
pub const SYSTEM_DB: &str = "rethinkdb";

/// The system tables, as `table_list` shows them.
pub const TABLES: &[&str] = &[
    "cluster_config",
    "current_issues",
    "db_config",
    "jobs",
    "logs",
    "permissions",
    "server_config",
    "server_status",
    "stats",
    "table_config",
    "table_status",
    "users",
];

/// Which system table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `cluster_config`.
    ClusterConfig,
    /// `current_issues`.
    CurrentIssues,
    /// `db_config`.
    DbConfig,
    /// `jobs`.
    Jobs,
    /// `logs`.
    Logs,
    /// `permissions`.
    Permissions,
    /// `server_config`.
    ServerConfig,
    /// `server_status`.
    ServerStatus,
    /// `stats`.
    Stats,
    /// `table_config`.
    TableConfig,
    /// `table_status`.
    TableStatus,
    /// `users`.
    Users,
    /// `_debug_scratch`: a scratch table for tests.
    DebugScratch,
}

impl Kind {
    /// Whether a conditional write checks the row's version. Rows of `jobs` (the only
    /// writable table of live figures) change with every read (`duration_sec`), so a
    /// write to one (a delete, which ends the job) applies to whatever it holds.
    fn versioned(self) -> bool {
        !matches!(self, Kind::Jobs)
    }

    /// The kind of a table name.
    pub fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "cluster_config" => Kind::ClusterConfig,
            "current_issues" => Kind::CurrentIssues,
            "db_config" => Kind::DbConfig,
            "jobs" => Kind::Jobs,
            "logs" => Kind::Logs,
            "permissions" => Kind::Permissions,
            "server_config" => Kind::ServerConfig,
            "server_status" => Kind::ServerStatus,
            "stats" => Kind::Stats,
            "table_config" => Kind::TableConfig,
            "table_status" => Kind::TableStatus,
            "users" => Kind::Users,
            "_debug_scratch" => Kind::DebugScratch,
            _ => return None,
        })
    }

    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ClusterConfig => "cluster_config",
            Kind::CurrentIssues => "current_issues",
            Kind::DbConfig => "db_config",
            Kind::Jobs => "jobs",
            Kind::Logs => "logs",
            Kind::Permissions => "permissions",
            Kind::ServerConfig => "server_config",
            Kind::ServerStatus => "server_status",
            Kind::Stats => "stats",
            Kind::TableConfig => "table_config",
            Kind::TableStatus => "table_status",
            Kind::Users => "users",
            Kind::DebugScratch => "_debug_scratch",
        }
    }
}

/// A stable id for a system object (the `rethinkdb` database, its tables).
pub fn system_id(what: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("ponder.{what}").as_bytes(),
    )
    .to_string()
}

/// One system table as seen by one user.
pub struct SystemTable {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) kind: Kind,
    /// `identifier_format: "uuid"`.
    pub(crate) uuids: bool,
    /// The user whose `config` permission writes to `table_config`/`db_config` need.
    pub(crate) user: String,
}

impl SystemTable {
    /// Every row, in primary-key order.
    pub fn rows(&self) -> reql::Result<Vec<Datum>> {
        let mut rows = rows::rows(self)?;
        rows.sort_by(|a, b| datum::cmp(&key_of(a), &key_of(b)));
        Ok(rows)
    }
}

/// A refused system-table write: a permission error when the user lacks `config`,
/// otherwise `ReqlOpFailedError` (counted in the write result).
fn write_error(m: String) -> reql::ReqlError {
    if m.contains("` does not have the required `") {
        reql::ReqlError::new(reql::ErrorKind::Permission, m)
    } else {
        op_failed(m)
    }
}

fn key_of(row: &Datum) -> Datum {
    row.get("id").cloned().unwrap_or(Datum::Null)
}

fn in_bounds(k: &Datum, lower: &Bound<Datum>, upper: &Bound<Datum>) -> bool {
    use std::cmp::Ordering::*;
    let lo = match lower {
        Bound::Unbounded => true,
        Bound::Included(b) => datum::cmp(k, b) != Less,
        Bound::Excluded(b) => datum::cmp(k, b) == Greater,
    };
    let hi = match upper {
        Bound::Unbounded => true,
        Bound::Included(b) => datum::cmp(k, b) != Greater,
        Bound::Excluded(b) => datum::cmp(k, b) == Less,
    };
    lo && hi
}

impl reql::Table for SystemTable {
    fn db(&self) -> &str {
        SYSTEM_DB
    }
    fn name(&self) -> &str {
        self.kind.name()
    }
    fn primary_key(&self) -> &str {
        "id"
    }
    fn durability(&self) -> Durability {
        Durability::Hard
    }
    fn get(&self, key: &Datum) -> reql::Result<Option<Datum>> {
        Ok(self.rows()?.into_iter().find(|r| key_of(r) == *key))
    }
    fn get_now(&self, _key: &Datum) -> Option<reql::Result<Option<Datum>>> {
        // Some rows ask other servers or Raft groups (`table_status`): the pool's.
        None
    }
    fn scan(
        &self,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        let mut rows: Vec<Datum> = self
            .rows()?
            .into_iter()
            .filter(|r| in_bounds(&key_of(r), &lower, &upper))
            .collect();
        if reverse {
            rows.reverse();
        }
        Ok(Box::new(rows.into_iter().map(Ok)))
    }
    fn count(&self) -> reql::Result<u64> {
        Ok(self.rows()?.len() as u64)
    }
    /// System tables are small and computed: never split.
    fn split_points(&self, _parts: usize) -> reql::Result<Vec<Datum>> {
        Ok(Vec::new())
    }
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<reql::Result<Applied>> {
        ops.into_iter()
            .map(|op| reql::Table::apply(self, op))
            .collect()
    }
    fn apply(&self, op: WriteOp) -> reql::Result<Applied> {
        let key = &op.key;
        let _g = self.cluster.admin.writes.lock();
        let old = reql::Table::get(self, key)?;
        if self.kind.versioned() && op.expect.is_some_and(|v| v != Version::of(old.as_ref())) {
            return Ok(Applied::Conflict(old));
        }
        let (old, new, ticket) = match op.change {
            Change::Keep => (old.clone(), old, None),
            Change::Put(new) => {
                writes::put(self, key, old.as_ref(), &new).map_err(write_error)?;
                SystemFeeds::refresh(&self.cluster);
                // A user's new password reads back as `true`; report the row as written
                // (as RethinkDB does) so a password change counts as `replaced`.
                let stored = match self.kind {
                    Kind::Users => Some(new),
                    _ => reql::Table::get(self, key)?.or(Some(new)),
                };
                (old, stored, None)
            }
            Change::Delete => {
                if old.is_some() {
                    writes::delete(self, key, old.as_ref()).map_err(write_error)?;
                    SystemFeeds::refresh(&self.cluster);
                }
                (old, None, None)
            }
        };
        Ok(Applied::Done(old, new, ticket))
    }
    fn sync_ticket(&self) -> reql::Result<Ticket> {
        Ok(0)
    }
    fn subscribe(&self, req: changefeed::Request) -> reql::Result<changefeed::Subscription> {
        SystemFeeds::subscribe(self, req)
    }
    // System tables have no secondary indexes: RethinkDB's errors, and an empty status.
    fn index_create(&self, _name: &str, _spec: reql::IndexSpec) -> reql::Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_drop(&self, _name: &str) -> reql::Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_rename(&self, _old: &str, _new: &str, _overwrite: bool) -> reql::Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_status(&self) -> reql::Result<Vec<reql::IndexStatus>> {
        Ok(Vec::new())
    }
    fn index_statistics(&self) -> reql::Result<Vec<reql::IndexStatus>> {
        self.index_status()
    }
    fn index_scan(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
        _reverse: bool,
    ) -> reql::Result<DatumStream> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn index_count_upto(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
        _limit: u64,
    ) -> reql::Result<u64> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn index_values(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
        _reverse: bool,
    ) -> reql::Result<DatumStream> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn index_pairs(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
    ) -> reql::Result<PairStream> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    /// The rows are computed: counted by reading them.
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> reql::Result<u64> {
        count_by_scan(self, lower, upper)
    }
    fn slice(&self) -> Option<&reql::slice::TableSlice> {
        None
    }
    /// System tables hold no write hook.
    fn write_hook(&self) -> reql::Result<Option<reql::WriteHook>> {
        Ok(None)
    }
    fn set_write_hook(&self, _hook: Option<reql::WriteHook>) -> reql::Result<bool> {
        Err(no_write_hooks(self.db(), self.name()))
    }
    /// Nothing beyond the permission layer's `config` check (`crate::access`): writes
    /// that need `config` check it themselves (`writes`).
    fn require_config(&self) -> reql::Result<()> {
        Ok(())
    }
}
