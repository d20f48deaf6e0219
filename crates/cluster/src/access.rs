//! The permission seam: `Cluster::access_for(user)` is the `TableAccess` a connection
//! evaluates its queries with. `admin` gets the cluster itself (every permission);
//! any other user gets a `UserAccess`, whose DDL checks `config`, and whose tables are
//! seen through the `Permissions` layer (`reql::layer`), which checks `read` on reads,
//! `read`+`write` on writes and `config` on index and hook changes, with RethinkDB's
//! `ReqlPermissionError` message (`Permissions::needed` decides every `Table` call).
//! Nothing else in the server needs to know about permissions.
//!
//! Also here: the admin operations both kinds of access share (system tables, `grant`,
//! `status`, `reconfigure`, config rows).

use std::sync::Arc;

use datum::Datum;
use reql::error::op_failed;
use reql::layer::{Call, Layer, Layered, Stream};
use reql::{ErrorKind, ReqlError, Table, TableAccess, TableOptions};

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

    pub(crate) fn no_table(db: &str, name: &str) -> ReqlError {
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

    /// Whether table `db.name`'s status flag `flag` holds now.
    pub(crate) fn ready_of(&self, db: &str, name: &str, flag: &str) -> reql::Result<bool> {
        let status = self.status_of(db, name)?;
        Ok(status
            .get("status")
            .and_then(|s| s.get(flag))
            .and_then(Datum::as_bool)
            .unwrap_or(false))
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
        replicas: &reql::Replicas,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(special());
        }
        self.check_db(db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        let current = if e.placement.is_empty() {
            self.local_placement(e.shards)
        } else {
            e.placement.clone()
        };
        let placement = self.check_placement(shards, replicas, Some(&current))?;
        let replicas = replicas.total();
        let old_cfg = crate::system::table_config_row(self, &e, false);
        let old_status = crate::system::table_status_row(self, &e, false);
        let mut ne = e.clone();
        ne.shards = shards;
        ne.replicas = replicas;
        if !e.placement.is_empty() {
            ne.placement = placement.clone();
        }
        if !dry_run {
            self.alter_table(
                &e.id,
                crate::system::TableAlter {
                    shards: Some(shards),
                    replicas: Some(replicas),
                    placement: Some(placement),
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

pub(crate) fn special() -> ReqlError {
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
        let perms = Permissions {
            db_id: c.db_id_of(&db),
            table_id,
            system,
            cluster: c.clone(),
            user: self.user.clone(),
        };
        Layered::wrap(inner, perms)
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
    fn table_read_mode(
        &self,
        db: &str,
        name: &str,
        mode: reql::ReadMode,
    ) -> reql::Result<Arc<dyn Table>> {
        if db == SYSTEM_DB {
            return self.table(db, name);
        }
        Ok(self.guard(self.cluster.table_read_mode(db, name, mode)?))
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
    /// `table.config()`: RethinkDB requires `config` on the table.
    fn table_config_row(&self, db: &str, name: &str) -> reql::Result<(Arc<dyn Table>, Datum)> {
        if db != SYSTEM_DB {
            self.cluster.check_db(db)?;
            self.require(Perm::Config, Some(db), Some(name))?;
        }
        self.cluster.config_row_for(db, name, &self.user)
    }
    /// `db.config()`: RethinkDB requires `config` on the database.
    fn db_config_row(&self, db: &str) -> reql::Result<(Arc<dyn Table>, Datum)> {
        if db != SYSTEM_DB {
            self.cluster.check_db(db)?;
            self.require(Perm::Config, Some(db), None)?;
        }
        self.cluster.db_config_row_for(db, &self.user)
    }
    /// `table.status()`: RethinkDB reads it from `rethinkdb.table_status`, so the user
    /// needs `read` there.
    fn table_status(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Read, Some(SYSTEM_DB), Some("table_status"))?;
        self.cluster.status_of(db, name)
    }
    fn table_ready(&self, db: &str, name: &str, flag: &str) -> reql::Result<bool> {
        self.cluster.ready_of(db, name, flag)
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
        replicas: &reql::Replicas,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster
            .reconfigure_table(db, name, shards, replicas, dry_run)
    }
    fn emergency_repair(
        &self,
        db: &str,
        name: &str,
        erase: bool,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster.repair_table(db, name, erase, dry_run)
    }
    fn rebalance(&self, db: &str, name: &str) -> reql::Result<Datum> {
        self.require(Perm::Config, Some(db), Some(name))?;
        self.cluster.rebalance_table(db, name)
    }
    fn network(&self) -> reql::Result<reql::NetworkPolicy> {
        self.require(Perm::Connect, None, None)?;
        self.cluster.network()
    }
}

/// The permission layer (`reql::layer`): a user's view of one table, each call
/// checked against the user's permissions at the table's scope.
struct Permissions {
    cluster: Arc<Cluster>,
    user: String,
    db_id: Option<String>,
    table_id: Option<String>,
    system: bool,
}

impl Permissions {
    /// The permission `call` needs; `None` when it needs none. Exhaustive: a new
    /// `Table` call does not compile until it is decided here.
    fn needed(call: &Call<'_>) -> Option<Perm> {
        match call {
            Call::Get { .. }
            | Call::Scan { .. }
            | Call::Count
            | Call::SplitPoints { .. }
            | Call::IndexScan { .. }
            | Call::IndexCount { .. }
            | Call::IndexValues { .. }
            | Call::IndexPairs { .. }
            | Call::CountRange { .. }
            | Call::IndexStatistics
            | Call::Subscribe { .. } => Some(Perm::Read),
            // `write` is granted only with `read` (`auth::Users::allowed`); `sync`
            // needs it too, as in RethinkDB.
            Call::Apply { .. } | Call::SyncTicket => Some(Perm::Write),
            Call::IndexCreate { .. }
            | Call::IndexDrop { .. }
            | Call::IndexRename { .. }
            | Call::SetWriteHook { .. }
            | Call::RequireConfig => Some(Perm::Config),
            // No permission: the index list (`index_status`, `index_wait`, `info`) and
            // the hook every write applies (`get_write_hook` asks `require_config` first).
            Call::IndexStatus | Call::WriteHook => None,
        }
    }
}

impl Layer for Permissions {
    fn check(&self, call: Call<'_>) -> reql::Result<()> {
        let Some(p) = Self::needed(&call) else {
            return Ok(());
        };
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

    /// A stream's permission was checked when it was opened.
    fn stream<T: Send + 'static>(&self, stream: Stream<T>) -> Stream<T> {
        stream
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use changefeed::Request;
    use reql::{Change, Durability, IndexSpec, WriteHook, WriteOp};

    use super::*;
    use crate::auth::Scope;

    fn cluster() -> Arc<Cluster> {
        let c = crate::test_cluster::with_table("s1", Durability::Soft, 1);
        let t = c.table("test", "t").unwrap();
        for i in 0..3 {
            let doc = Datum::from_pairs([("id", Datum::from(i as f64)), ("v", Datum::from(1.0))]);
            reql::write_op::overwrite(&*t, &Datum::from(i as f64), Change::Put(doc)).unwrap();
        }
        let row = Datum::from_pairs([("id", Datum::str("bob")), ("password", Datum::Bool(false))]);
        c.users.write_row("bob", Some(&row)).unwrap();
        c
    }

    fn spec() -> IndexSpec {
        IndexSpec {
            function: serde_json::json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
            multi: false,
            geo: false,
        }
    }

    /// Every `Table` call that can fail, with the permission it needs (`None`: none),
    /// written out here independently of `Permissions::needed`.
    const NEEDS: [(&str, Option<Perm>); 20] = [
        ("get", Some(Perm::Read)),
        ("scan", Some(Perm::Read)),
        ("count", Some(Perm::Read)),
        ("split_points", Some(Perm::Read)),
        ("apply", Some(Perm::Write)),
        ("index_create", Some(Perm::Config)),
        ("index_drop", Some(Perm::Config)),
        ("index_rename", Some(Perm::Config)),
        ("index_status", None),
        ("index_scan", Some(Perm::Read)),
        ("index_count", Some(Perm::Read)),
        ("index_values", Some(Perm::Read)),
        ("index_pairs", Some(Perm::Read)),
        ("count_range", Some(Perm::Read)),
        ("write_hook", None),
        ("set_write_hook", Some(Perm::Config)),
        ("require_config", Some(Perm::Config)),
        ("subscribe", Some(Perm::Read)),
        ("sync_ticket", Some(Perm::Write)),
        ("index_statistics", Some(Perm::Read)),
    ];

    /// Makes every fallible call on `t` (index `v` is expected to exist), in `NEEDS`
    /// order; returns each one's name and error.
    fn call_every(t: &dyn Table) -> Vec<(&'static str, Option<ReqlError>)> {
        let all = || (Bound::Unbounded, Bound::Unbounded);
        let one = Datum::from(1.0);
        let drain = |s: reql::Result<reql::DatumStream>| {
            s.and_then(|s| s.collect::<reql::Result<Vec<_>>>())
        };
        let req = Request::whole_table(Default::default());
        let hook = WriteHook {
            function: serde_json::json!([69, [[2, [1, 2, 3]], [10, [3]]]]),
        };
        let put = WriteOp {
            key: Datum::from(9.0),
            expect: None,
            change: Change::Put(Datum::from_pairs([("id", Datum::from(9.0))])),
        };
        vec![
            ("get", t.get(&one).err()),
            ("scan", drain(t.scan(all().0, all().1, false)).err()),
            ("count", t.count().err()),
            ("split_points", t.split_points(2).err()),
            ("apply", t.apply(put).err()),
            ("index_create", t.index_create("w", spec()).err()),
            ("index_drop", t.index_drop("w").err()),
            ("index_rename", t.index_rename("v", "v", true).err()),
            ("index_status", t.index_status().err()),
            (
                "index_scan",
                drain(t.index_scan("v", all().0, all().1, false)).err(),
            ),
            (
                "index_count",
                t.index_count_upto("v", all().0, all().1, u64::MAX).err(),
            ),
            (
                "index_values",
                drain(t.index_values("v", all().0, all().1, false)).err(),
            ),
            (
                "index_pairs",
                t.index_pairs("v", all().0, all().1)
                    .and_then(|s| s.collect::<reql::Result<Vec<_>>>())
                    .err(),
            ),
            ("count_range", t.count_range(all().0, all().1).err()),
            ("write_hook", t.write_hook().err()),
            ("set_write_hook", t.set_write_hook(Some(hook)).err()),
            ("require_config", t.require_config().err()),
            ("subscribe", t.subscribe(req).err()),
            ("sync_ticket", t.sync_ticket().err()),
            ("index_statistics", t.index_statistics().err()),
        ]
    }

    fn wait_ready(c: &Cluster) {
        let t = c.table("test", "t").unwrap();
        while !t.index_status().unwrap().iter().all(|s| s.ready) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn a_user_without_permissions_is_refused_every_call_that_needs_one() {
        let c = cluster();
        c.table("test", "t")
            .unwrap()
            .index_create("v", spec())
            .unwrap();
        wait_ready(&c);
        let t = c.access_for("bob").table("test", "t").unwrap();
        let got = call_every(&*t);
        assert_eq!(got.len(), NEEDS.len());
        for ((name, err), (want_name, need)) in got.into_iter().zip(NEEDS) {
            assert_eq!(name, want_name);
            match need {
                Some(p) => assert_eq!(err, Some(denied("bob", p)), "{name}"),
                None => assert_eq!(err, None, "{name}"),
            }
        }
        // Nothing was written or changed.
        let admin = c.table("test", "t").unwrap();
        assert_eq!(admin.count().unwrap(), 3);
        assert_eq!(admin.write_hook().unwrap(), None);
        let names: Vec<String> = admin
            .index_status()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, vec!["v".to_string()]);
        // A system table too.
        let jobs = c.access_for("bob").table(SYSTEM_DB, "jobs").unwrap();
        assert_eq!(jobs.count().err(), Some(denied("bob", Perm::Read)));
    }

    #[test]
    fn each_permission_opens_exactly_its_calls() {
        let c = cluster();
        c.table("test", "t")
            .unwrap()
            .index_create("v", spec())
            .unwrap();
        wait_ready(&c);
        let id = c.table_entry("test", "t").unwrap().id;
        let grant = |perm: Perm| {
            c.users
                .set_scope("bob", &Scope::Table(id.clone()), |p| {
                    match perm {
                        Perm::Read => p.read = Some(true),
                        Perm::Write => p.write = Some(true),
                        Perm::Config => p.config = Some(true),
                        Perm::Connect => unreachable!(),
                    }
                    Ok(())
                })
                .unwrap();
        };
        grant(Perm::Read);
        let t = c.access_for("bob").table("test", "t").unwrap();
        for ((name, err), (_, need)) in call_every(&*t).into_iter().zip(NEEDS) {
            match need {
                Some(Perm::Read) | None => assert_eq!(err, None, "{name}"),
                Some(p) => assert_eq!(err, Some(denied("bob", p)), "{name}"),
            }
        }
        grant(Perm::Write);
        grant(Perm::Config);
        wait_ready(&c);
        let t = c.access_for("bob").table("test", "t").unwrap();
        for (name, err) in call_every(&*t) {
            let denial = err.filter(|e| e.kind == ErrorKind::Permission);
            assert_eq!(denial, None, "{name}");
        }
    }
}
