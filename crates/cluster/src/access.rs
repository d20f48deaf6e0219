//! The permission seam: `Cluster::access_for(user)` is the `TableAccess` a connection
//! evaluates its queries with. `admin` gets the cluster itself (every permission);
//! any other user gets a `UserAccess`, whose DDL checks `config`, and whose tables
//! (`Guarded`) check `read` on reads, `read`+`write` on writes and `config` on index
//! changes, with RethinkDB's `ReqlPermissionError` message. Nothing else in the server
//! needs to know about permissions.
//!
//! Also here: the admin operations both kinds of access share (system tables, `grant`,
//! `status`, `reconfigure`, config rows).

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use reql::error::op_failed;
use reql::{Applied, WriteOp};
use reql::{
    DatumStream, Durability, ErrorKind, IndexSpec, IndexStatus, ReqlError, Table, TableAccess,
    TableOptions, Ticket,
};

use crate::auth::{Perm, Scope, ADMIN};
use crate::system::{system_id, Kind, SystemTable, SYSTEM_DB, TABLES};
use crate::Cluster;

/// RethinkDB's permission error.
pub fn denied(user: &str, perm: Perm) -> ReqlError {
    ReqlError::new(
        ErrorKind::Permission,
        format!(
            "User `{user}` does not have the required `{}` permission.",
            perm.name()
        ),
    )
}

impl Cluster {
    /// The table access for queries run by `user`.
    pub fn access_for(self: &Arc<Self>, user: &str) -> Arc<dyn TableAccess> {
        if user == ADMIN {
            self.clone()
        } else {
            Arc::new(UserAccess {
                cluster: self.clone(),
                user: user.to_string(),
            })
        }
    }

    fn me(&self) -> reql::Result<Arc<Cluster>> {
        self.me
            .upgrade()
            .ok_or_else(|| reql::error::internal("The server is shutting down."))
    }

    /// A system table as `user` sees it.
    pub(crate) fn system_table(
        &self,
        name: &str,
        uuids: bool,
        user: &str,
    ) -> reql::Result<Arc<dyn Table>> {
        let kind = Kind::parse(name)
            .ok_or_else(|| op_failed(format!("Table `{SYSTEM_DB}.{name}` does not exist.")))?;
        Ok(Arc::new(SystemTable {
            cluster: self.me()?,
            kind,
            uuids,
            user: user.to_string(),
        }))
    }

    /// A system table's identity in the shape of a `table_config` row (for `info`).
    pub(crate) fn system_table_config(&self, name: &str) -> reql::Result<Datum> {
        let kind = Kind::parse(name)
            .ok_or_else(|| op_failed(format!("Table `{SYSTEM_DB}.{name}` does not exist.")))?;
        Ok(Datum::from_pairs([
            ("db", Datum::str(SYSTEM_DB)),
            (
                "id",
                Datum::from(system_id(&format!("{SYSTEM_DB}.{}", kind.name()))),
            ),
            ("indexes", Datum::array(vec![])),
            ("name", Datum::str(kind.name())),
            ("primary_key", Datum::str("id")),
        ]))
    }

    /// The system tables' names (`table_list` on `rethinkdb`).
    pub(crate) fn system_tables(&self) -> Vec<String> {
        TABLES.iter().map(|s| s.to_string()).collect()
    }

    /// `db.config()` of the system database.
    pub(crate) fn system_db_config(&self) -> Datum {
        crate::catalog::db_record(SYSTEM_DB, &system_id(SYSTEM_DB))
    }

    fn no_table(db: &str, name: &str) -> ReqlError {
        op_failed(format!("Table `{db}.{name}` does not exist."))
    }

    pub(crate) fn config_row_for(
        &self,
        db: &str,
        name: &str,
        user: &str,
    ) -> reql::Result<(Arc<dyn Table>, Datum)> {
        if db == SYSTEM_DB {
            return Err(special());
        }
        self.check_db(db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        Ok((
            self.system_table("table_config", false, user)?,
            Datum::from(e.id),
        ))
    }

    pub(crate) fn db_config_row_for(
        &self,
        db: &str,
        user: &str,
    ) -> reql::Result<(Arc<dyn Table>, Datum)> {
        if db == SYSTEM_DB {
            return Err(op_failed(
                "Database `rethinkdb` is special; you can't configure it.",
            ));
        }
        let id = self.db_id_of(db).ok_or_else(|| Self::no_db(db))?;
        Ok((
            self.system_table("db_config", false, user)?,
            Datum::from(id),
        ))
    }

    pub(crate) fn status_of(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(special());
        }
        self.check_db(db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        Ok(crate::system::table_status_row(self, &e, false))
    }

    pub(crate) fn grant_for(
        &self,
        db: Option<&str>,
        table: Option<&str>,
        user: &str,
        perms: &Datum,
    ) -> reql::Result<Datum> {
        if user == ADMIN {
            return Err(op_failed(format!(
                "The permissions of the user `{user}` can't be modified."
            )));
        }
        let scope = match (db, table) {
            (None, _) => Scope::Global,
            (Some(d), None) => Scope::Db(self.db_id_of(d).ok_or_else(|| Self::no_db(d))?),
            (Some(d), Some(t)) if d == SYSTEM_DB => {
                if Kind::parse(t).is_none() {
                    return Err(Self::no_table(d, t));
                }
                Scope::Table(system_id(&format!("{SYSTEM_DB}.{t}")))
            }
            (Some(d), Some(t)) => {
                self.check_db(d)?;
                Scope::Table(
                    self.table_entry(d, t)
                        .ok_or_else(|| Self::no_table(d, t))?
                        .id,
                )
            }
        };
        let global = matches!(scope, Scope::Global);
        let (old, new) = self
            .users
            .set_scope(user, &scope, |p| p.merge(perms, global))
            .map_err(op_failed)?;
        Ok(Datum::from_pairs([
            ("granted", Datum::Number(1.0)),
            (
                "permissions_changes",
                crate::catalog::change(old.to_datum(), new.to_datum()),
            ),
        ]))
    }

    pub(crate) fn reconfigure_table(
        &self,
        db: &str,
        name: &str,
        shards: u32,
        replicas: u32,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(special());
        }
        self.check_db(db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        if replicas > 1 {
            return Err(op_failed(format!(
                "Can't put {replicas} replicas on servers with the tag `default` because there are only 1 servers with the tag `default`. It's impossible to have more replicas of the data than there are servers."
            )));
        }
        let old_cfg = crate::system::table_config_row(self, &e, false);
        let old_status = crate::system::table_status_row(self, &e, false);
        let mut ne = e.clone();
        ne.shards = shards;
        ne.replicas = replicas;
        if !dry_run {
            self.alter_table(
                &e.id,
                crate::system::TableAlter {
                    shards: Some(shards),
                    replicas: Some(replicas),
                    ..Default::default()
                },
            )
            .map_err(op_failed)?;
        }
        let new_cfg = crate::system::table_config_row(self, &ne, false);
        let new_status = crate::system::table_status_row(self, &ne, false);
        let mut pairs = vec![
            (
                "reconfigured",
                Datum::Number(if dry_run { 0.0 } else { 1.0 }),
            ),
            ("config_changes", crate::catalog::change(old_cfg, new_cfg)),
        ];
        if !dry_run {
            pairs.push((
                "status_changes",
                crate::catalog::change(old_status, new_status),
            ));
        }
        Ok(Datum::from_pairs(pairs))
    }
}

impl Cluster {
    /// `rebalance` of one table: cuts its shards anew at the data's quantiles. Returns
    /// the table's `{old_val, new_val}` status change.
    pub(crate) fn rebalance_table(&self, db: &str, name: &str) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(special());
        }
        self.check_db(db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        let old_status = crate::system::table_status_row(self, &e, false);
        let rebalance = crate::system::TableAlter {
            rebalance: true,
            ..Default::default()
        };
        self.alter_table(&e.id, rebalance).map_err(op_failed)?;
        let ne = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        let new_status = crate::system::table_status_row(self, &ne, false);
        Ok(Datum::from_pairs([
            ("old_val", old_status),
            ("new_val", new_status),
        ]))
    }
}

fn special() -> ReqlError {
    op_failed("Database `rethinkdb` is special; you can't configure the tables in it.")
}

/// The catalog as a user other than `admin` sees it.
pub struct UserAccess {
    cluster: Arc<Cluster>,
    user: String,
}

impl UserAccess {
    fn require(&self, p: Perm, db: Option<&str>, table: Option<&str>) -> reql::Result<()> {
        let c = &self.cluster;
        let db_id = db.and_then(|d| c.db_id_of(d));
        let table_id = match (db, table) {
            (Some(SYSTEM_DB), Some(t)) => Some(system_id(&format!("{SYSTEM_DB}.{t}"))),
            (Some(d), Some(t)) => c.table_entry(d, t).map(|e| e.id),
            _ => None,
        };
        if c.users.allowed(
            &self.user,
            p,
            db_id.as_deref(),
            table_id.as_deref(),
            db == Some(SYSTEM_DB),
        ) {
            Ok(())
        } else {
            Err(denied(&self.user, p))
        }
    }

    fn guard(&self, inner: Arc<dyn Table>) -> Arc<dyn Table> {
        let c = &self.cluster;
        let db = inner.db().to_string();
        let system = db == SYSTEM_DB;
        let table_id = if system {
            Some(system_id(&format!("{SYSTEM_DB}.{}", inner.name())))
        } else {
            c.table_entry(&db, inner.name()).map(|e| e.id)
        };
        Arc::new(Guarded {
            db_id: c.db_id_of(&db),
            table_id,
            system,
            cluster: c.clone(),
            user: self.user.clone(),
            inner,
        })
    }
}

impl TableAccess for UserAccess {
    fn db_create(&self, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Config, None, None)?;
        self.cluster.db_create(name)
    }
    fn db_drop(&self, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(name), None)?;
        self.cluster.db_drop(name)
    }
    fn db_list(&self) -> reql::Result<Vec<String>> {
        self.cluster.db_list()
    }
    fn db_config(&self, name: &str) -> reql::Result<Datum> {
        self.cluster.db_config(name)
    }
    fn check_db(&self, name: &str) -> reql::Result<()> {
        self.cluster.check_db(name)
    }
    fn table_create(&self, db: &str, name: &str, opts: TableOptions) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), None)?;
        self.cluster.table_create(db, name, opts)
    }
    fn table_drop(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster.table_drop(db, name)
    }
    fn table_list(&self, db: &str) -> reql::Result<Vec<String>> {
        self.cluster.table_list(db)
    }
    fn table(&self, db: &str, name: &str) -> reql::Result<Arc<dyn Table>> {
        if db == SYSTEM_DB {
            self.cluster.check_db(db)?;
            return Ok(self.guard(self.cluster.system_table(name, false, &self.user)?));
        }
        Ok(self.guard(self.cluster.table(db, name)?))
    }
    fn table_with_ids(&self, db: &str, name: &str) -> reql::Result<Arc<dyn Table>> {
        if db == SYSTEM_DB {
            return Ok(self.guard(self.cluster.system_table(name, true, &self.user)?));
        }
        self.table(db, name)
    }
    fn table_config(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.cluster.table_config(db, name)
    }
    fn table_config_row(&self, db: &str, name: &str) -> reql::Result<(Arc<dyn Table>, Datum)> {
        self.cluster.config_row_for(db, name, &self.user)
    }
    fn db_config_row(&self, db: &str) -> reql::Result<(Arc<dyn Table>, Datum)> {
        self.cluster.db_config_row_for(db, &self.user)
    }
    fn table_status(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.cluster.status_of(db, name)
    }
    fn grant(
        &self,
        db: Option<&str>,
        table: Option<&str>,
        user: &str,
        perms: &Datum,
    ) -> reql::Result<Datum> {
        self.require(Perm::Read, Some(SYSTEM_DB), Some("permissions"))?;
        self.require(Perm::Write, Some(SYSTEM_DB), Some("permissions"))?;
        self.cluster.grant_for(db, table, user, perms)
    }
    fn reconfigure(
        &self,
        db: &str,
        name: &str,
        shards: u32,
        replicas: u32,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster
            .reconfigure_table(db, name, shards, replicas, dry_run)
    }
    fn rebalance(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster.rebalance_table(db, name)
    }
    fn require_connect(&self) -> reql::Result<()> {
        self.require(Perm::Connect, None, None)
    }
}

/// A table whose every operation is checked against the user's permissions.
struct Guarded {
    inner: Arc<dyn Table>,
    cluster: Arc<Cluster>,
    user: String,
    db_id: Option<String>,
    table_id: Option<String>,
    system: bool,
}

impl Guarded {
    fn check(&self, p: Perm) -> reql::Result<()> {
        if self.cluster.users.allowed(
            &self.user,
            p,
            self.db_id.as_deref(),
            self.table_id.as_deref(),
            self.system,
        ) {
            Ok(())
        } else {
            Err(denied(&self.user, p))
        }
    }
}

impl Table for Guarded {
    fn db(&self) -> &str {
        self.inner.db()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn primary_key(&self) -> &str {
        self.inner.primary_key()
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
    fn get(&self, key: &Datum) -> reql::Result<Option<Datum>> {
        self.check(Perm::Read)?;
        self.inner.get(key)
    }
    fn scan(
        &self,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        self.check(Perm::Read)?;
        self.inner.scan(lower, upper, reverse)
    }
    fn count(&self) -> reql::Result<u64> {
        self.check(Perm::Read)?;
        self.inner.count()
    }
    fn split_points(&self, parts: usize) -> reql::Result<Vec<Datum>> {
        self.check(Perm::Read)?;
        self.inner.split_points(parts)
    }
    fn apply(&self, op: WriteOp) -> reql::Result<Applied> {
        self.check(Perm::Write)?;
        self.inner.apply(op)
    }
    fn sync_ticket(&self) -> Ticket {
        self.inner.sync_ticket()
    }
    fn index_create(&self, name: &str, spec: IndexSpec) -> reql::Result<()> {
        self.check(Perm::Config)?;
        self.inner.index_create(name, spec)
    }
    fn index_drop(&self, name: &str) -> reql::Result<()> {
        self.check(Perm::Config)?;
        self.inner.index_drop(name)
    }
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> reql::Result<()> {
        self.check(Perm::Config)?;
        self.inner.index_rename(old, new, overwrite)
    }
    fn index_status(&self) -> reql::Result<Vec<IndexStatus>> {
        self.inner.index_status()
    }
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        self.check(Perm::Read)?;
        self.inner.index_scan(name, lower, upper, reverse)
    }
    fn index_count(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> reql::Result<u64> {
        self.check(Perm::Read)?;
        self.inner.index_count(name, lower, upper)
    }
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        self.check(Perm::Read)?;
        self.inner.index_values(name, lower, upper, reverse)
    }
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> reql::Result<reql::access::PairStream> {
        self.check(Perm::Read)?;
        self.inner.index_pairs(name, lower, upper)
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> reql::Result<u64> {
        self.check(Perm::Read)?;
        self.inner.count_range(lower, upper)
    }
    fn subscribe(&self, req: changefeed::Request) -> reql::Result<changefeed::Subscription> {
        self.check(Perm::Read)?;
        self.inner.subscribe(req)
    }
    fn slice(&self) -> Option<&reql::slice::TableSlice> {
        self.inner.slice()
    }
    fn write_hook(&self) -> reql::Result<Option<reql::WriteHook>> {
        self.inner.write_hook()
    }
    fn set_write_hook(&self, hook: Option<reql::WriteHook>) -> reql::Result<bool> {
        self.check(Perm::Config)?;
        self.inner.set_write_hook(hook)
    }
    fn require_config(&self) -> reql::Result<()> {
        self.check(Perm::Config)?;
        self.inner.require_config()
    }
}
