//! Secondary indexes of one table: their definitions in the table's catalog record, the
//! ReQL index function behind `store::IndexFn`, and background builds.
//!
//! The table record (`table/<db>/<name>`) carries `"indexes": [{"id", "name",
//! "function", "multi", "geo", "ready"}]`, `function` being the FUNC term in RethinkDB's
//! JSON wire form. An index's entries live in the storage space `i_<table id>_<index id>`,
//! so a rename touches only the record and a drop drops the space.
//!
//! The same record carries the table's write hook (`"write_hook": {"function": <FUNC
//! term JSON>}`, absent when none is set): `TableIndexes` is the one writer of the
//! record after the table is created, so index changes and hook changes never overwrite
//! each other. `reql` evaluates the hook (`reql::terms::write_hook`); this only stores it.
//!
//! Invariants:
//! - A definition is persisted (fsync) before its index is registered with the shard, and
//!   `ready: true` only after the backfill finished, so a restart during a build finds
//!   `ready: false` and builds again (entries already written are consistent: each was
//!   written in one batch with, or after, its document).
//! - Tables of fewer than `SYNC_BUILD_DOCS` documents are built before `index_create`
//!   answers (an index on a small table is ready at once, as users expect); larger ones
//!   in a background thread, reads failing with RethinkDB's "accessed before its
//!   construction was finished" until it is ready.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use parking_lot::{Mutex, RwLock};
use reql::error::op_failed;
use reql::terms::index::IndexFunction;
use reql::{IndexSpec, IndexStatus, ReqlError, WriteHook};
use storage::{Engine, WriteBatch};
use store::{IndexFn, SecondaryIndex, Shard};

use crate::table::store_err;

/// Below this many documents an index is built before `index_create` returns.
const SYNC_BUILD_DOCS: u64 = 10_000;

const CATALOG: &str = "catalog";

/// The ReQL index function of one index, as the store calls it.
struct ReqlIndexFn {
    func: IndexFunction,
    multi: bool,
    geo: bool,
}

impl IndexFn for ReqlIndexFn {
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, String> {
        let v = self.func.eval(doc).map_err(|e| e.message)?;
        let values = match v {
            Datum::Array(a) if self.multi => a.to_vec(),
            v => vec![v],
        };
        values
            .iter()
            .map(|d| {
                if self.geo {
                    // Geospatial entries keep the geometry itself (as its JSON text).
                    if d.reql_type() != Some("GEOMETRY") {
                        return Err("Expected geometry".to_string());
                    }
                    return datum::keys::encode_secondary(&Datum::str(&d.to_json_string()))
                        .map_err(|e| e.message().to_string());
                }
                datum::keys::encode_secondary(d).map_err(|e| e.message().to_string())
            })
            .collect()
    }
}

/// One index: its definition and its store-side state.
#[derive(Clone)]
struct Entry {
    id: String,
    spec: IndexSpec,
    index: Arc<SecondaryIndex>,
}

/// The secondary indexes of one table.
pub struct TableIndexes {
    engine: Arc<dyn Engine>,
    table_id: String,
    display: String,
    record_key: RwLock<Vec<u8>>,
    /// The table record without `indexes`.
    record_base: RwLock<Datum>,
    defs: RwLock<BTreeMap<String, Entry>>,
    /// The table's write hook.
    hook: RwLock<Option<WriteHook>>,
    ddl: Mutex<()>,
}

impl TableIndexes {
    /// No indexes yet for the table whose catalog record is `record` under `record_key`.
    pub(crate) fn new(
        engine: Arc<dyn Engine>,
        table_id: &str,
        display: &str,
        record_key: Vec<u8>,
        record: &Datum,
    ) -> TableIndexes {
        let mut base = record.clone();
        if let Datum::Object(m) = &mut base {
            Arc::make_mut(m).remove("indexes");
            Arc::make_mut(m).remove("write_hook");
        }
        TableIndexes {
            engine,
            table_id: table_id.to_string(),
            display: display.to_string(),
            record_key: RwLock::new(record_key),
            record_base: RwLock::new(base),
            defs: RwLock::new(BTreeMap::new()),
            hook: RwLock::new(None),
            ddl: Mutex::new(()),
        }
    }

    fn space(&self, id: &str) -> String {
        format!("i_{}_{}", self.table_id, id)
    }

    fn make(&self, id: &str, spec: &IndexSpec, ready: bool) -> reql::Result<Arc<SecondaryIndex>> {
        let func = IndexFunction::compile(&spec.function)?;
        let f = ReqlIndexFn {
            func,
            multi: spec.multi,
            geo: spec.geo,
        };
        Ok(SecondaryIndex::new(
            &self.space(id),
            Arc::new(f),
            spec.multi,
            ready,
        ))
    }

    /// Registers the indexes of a loaded table record and restarts unfinished builds.
    pub(crate) fn load(
        self: &Arc<Self>,
        record: &Datum,
        shards: &[Arc<Shard>],
    ) -> Result<(), String> {
        if let Some(f) = record.get("write_hook").and_then(|h| h.get("function")) {
            *self.hook.write() = Some(WriteHook {
                function: datum::to_json_value(f),
            });
        }
        let list = match record.get("indexes").and_then(Datum::as_array) {
            Some(l) => l.to_vec(),
            None => return Ok(()),
        };
        for d in list {
            let s = |f: &str| {
                d.get(f)
                    .and_then(Datum::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let b = |f: &str| d.get(f).and_then(Datum::as_bool).unwrap_or(false);
            let spec = IndexSpec {
                function: d
                    .get("function")
                    .map(datum::to_json_value)
                    .unwrap_or_default(),
                multi: b("multi"),
                geo: b("geo"),
            };
            let id = s("id");
            let ready = b("ready");
            let index = self.make(&id, &spec, ready).map_err(|e| e.message)?;
            for shard in shards {
                shard.add_index(index.clone()).map_err(|e| e.to_string())?;
            }
            self.defs.write().insert(
                s("name"),
                Entry {
                    id,
                    spec,
                    index: index.clone(),
                },
            );
            if !ready {
                self.spawn_build(index, shards.to_vec());
            }
        }
        Ok(())
    }

    fn record(&self, defs: &BTreeMap<String, Entry>) -> Datum {
        self.record_with(defs, self.hook.read().as_ref())
    }

    fn record_with(&self, defs: &BTreeMap<String, Entry>, hook: Option<&WriteHook>) -> Datum {
        let list = defs
            .iter()
            .map(|(name, e)| {
                Datum::from_pairs([
                    ("id", Datum::str(&e.id)),
                    ("name", Datum::str(name)),
                    (
                        "function",
                        datum::from_json_value(&e.spec.function).unwrap_or(Datum::Null),
                    ),
                    ("multi", Datum::Bool(e.spec.multi)),
                    ("geo", Datum::Bool(e.spec.geo)),
                    ("ready", Datum::Bool(e.index.is_ready())),
                ])
            })
            .collect();
        let mut rec = self.record_base.read().clone();
        if let Datum::Object(m) = &mut rec {
            Arc::make_mut(m).insert(datum::Str::from("indexes"), Datum::array(list));
            if let Some(h) = hook {
                let f = datum::from_json_value(&h.function).unwrap_or(Datum::Null);
                Arc::make_mut(m).insert(
                    datum::Str::from("write_hook"),
                    Datum::from_pairs([("function", f)]),
                );
            }
        }
        rec
    }

    fn persist(&self, defs: &BTreeMap<String, Entry>) -> reql::Result<()> {
        self.write_record(self.record(defs))
    }

    fn write_record(&self, rec: Datum) -> reql::Result<()> {
        let mut b = WriteBatch::new();
        b.put(CATALOG, self.record_key.read().clone(), rec.to_json_bytes());
        self.engine
            .apply(b)
            .and_then(|_| self.engine.persist())
            .map_err(|e| op_failed(format!("Could not write the catalog: {e}")))
    }

    /// The full record of the table whose other fields are now `base` (a rename or a
    /// reconfiguration writes it, so that indexes and the hook survive).
    pub(crate) fn record_for(&self, base: &Datum) -> Datum {
        let defs = self.defs.read().clone();
        let mut rec = Self::strip(base);
        if let (Datum::Object(m), Datum::Object(full)) = (&mut rec, self.record(&defs)) {
            for k in ["indexes", "write_hook"] {
                if let Some(v) = full.get(k) {
                    Arc::make_mut(m).insert(datum::Str::from(k), v.clone());
                }
            }
        }
        rec
    }

    /// After a committed rename or reconfiguration: the record's new key and fields.
    pub(crate) fn rebase(&self, record_key: Vec<u8>, base: &Datum) {
        let _g = self.ddl.lock();
        *self.record_key.write() = record_key;
        *self.record_base.write() = Self::strip(base);
    }

    fn strip(record: &Datum) -> Datum {
        let mut base = record.clone();
        if let Datum::Object(m) = &mut base {
            Arc::make_mut(m).remove("indexes");
            Arc::make_mut(m).remove("write_hook");
        }
        base
    }

    /// The table's write hook.
    pub(crate) fn hook(&self) -> Option<WriteHook> {
        self.hook.read().clone()
    }

    /// Sets or removes the write hook, persisted before it applies. Returns whether a
    /// hook existed.
    pub(crate) fn set_hook(&self, hook: Option<WriteHook>) -> reql::Result<bool> {
        let _g = self.ddl.lock();
        let defs = self.defs.read().clone();
        self.write_record(self.record_with(&defs, hook.as_ref()))?;
        let old = std::mem::replace(&mut *self.hook.write(), hook);
        Ok(old.is_some())
    }

    /// The index names (for the table's config document).
    pub(crate) fn names(&self) -> Vec<String> {
        self.defs.read().keys().cloned().collect()
    }

    /// `index_create`.
    pub(crate) fn create(
        self: &Arc<Self>,
        name: &str,
        spec: IndexSpec,
        shards: &[Arc<Shard>],
    ) -> reql::Result<()> {
        let _g = self.ddl.lock();
        if self.defs.read().contains_key(name) {
            return Err(op_failed(format!(
                "Index `{name}` already exists on table `{}`.",
                self.display
            )));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let index = self.make(&id, &spec, false)?;
        let mut defs = self.defs.read().clone();
        defs.insert(
            name.to_string(),
            Entry {
                id,
                spec,
                index: index.clone(),
            },
        );
        self.persist(&defs)?;
        for shard in shards {
            shard.add_index(index.clone()).map_err(store_err)?;
        }
        *self.defs.write() = defs;
        drop(_g);
        if shards.iter().map(|s| s.count()).sum::<u64>() < SYNC_BUILD_DOCS {
            self.build(&index, shards);
        } else {
            self.spawn_build(index, shards.to_vec());
        }
        Ok(())
    }

    fn spawn_build(self: &Arc<Self>, index: Arc<SecondaryIndex>, shards: Vec<Arc<Shard>>) {
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("index-build".into())
            .spawn(move || me.build(&index, &shards));
    }

    /// Backfills an index over every shard, then records it ready.
    fn build(&self, index: &Arc<SecondaryIndex>, shards: &[Arc<Shard>]) {
        index.set_total(shards.iter().map(|s| s.count()).sum());
        for shard in shards {
            if shard.build_index(index).is_err() || index.is_cancelled() {
                return;
            }
        }
        let _g = self.ddl.lock();
        if index.is_cancelled() {
            return;
        }
        index.set_ready();
        let defs = self.defs.read().clone();
        // Still ready in memory if this fails; the next start rebuilds it.
        let _ = self.persist(&defs);
    }

    /// `index_drop`.
    pub(crate) fn drop_index(&self, name: &str, shards: &[Arc<Shard>]) -> reql::Result<()> {
        let _g = self.ddl.lock();
        let mut defs = self.defs.read().clone();
        let e = defs.remove(name).ok_or_else(|| {
            op_failed(format!(
                "Index `{name}` does not exist on table `{}`.",
                self.display
            ))
        })?;
        self.persist(&defs)?;
        *self.defs.write() = defs;
        for shard in shards {
            shard.remove_index(&e.index).map_err(store_err)?;
        }
        Ok(())
    }

    /// Drops every index (the table is being dropped).
    pub(crate) fn drop_all(&self, shards: &[Arc<Shard>]) {
        let _g = self.ddl.lock();
        let defs = std::mem::take(&mut *self.defs.write());
        for e in defs.values() {
            for shard in shards {
                let _ = shard.remove_index(&e.index);
            }
        }
    }

    /// `index_rename`.
    pub(crate) fn rename(
        &self,
        old: &str,
        new: &str,
        overwrite: bool,
        shards: &[Arc<Shard>],
    ) -> reql::Result<()> {
        let _g = self.ddl.lock();
        let mut defs = self.defs.read().clone();
        let fail = || {
            op_failed(if overwrite {
                format!("Index `{old}` does not exist on table `{}`.", self.display)
            } else {
                format!(
                    "Index `{old}` does not exist or index `{new}` already exists on table `{}`.",
                    self.display
                )
            })
        };
        if !defs.contains_key(old) {
            return Err(fail());
        }
        if old == new {
            return Ok(());
        }
        let replaced = match defs.get(new) {
            Some(_) if !overwrite => return Err(fail()),
            Some(e) => Some(e.index.clone()),
            None => None,
        };
        let e = defs.remove(old).ok_or_else(fail)?;
        defs.insert(new.to_string(), e);
        self.persist(&defs)?;
        *self.defs.write() = defs;
        if let Some(idx) = replaced {
            for shard in shards {
                shard.remove_index(&idx).map_err(store_err)?;
            }
        }
        Ok(())
    }

    /// Every index with its state, sorted by name.
    pub(crate) fn status(&self) -> Vec<IndexStatus> {
        self.defs
            .read()
            .iter()
            .map(|(name, e)| IndexStatus {
                name: name.clone(),
                spec: e.spec.clone(),
                ready: e.index.is_ready(),
                progress: e.index.progress(),
            })
            .collect()
    }

    /// Every index's store-side state (to register with new shards), or the name of one
    /// still being built (a reshard waits for none: it refuses).
    pub(crate) fn all_ready(&self) -> Result<Vec<Arc<SecondaryIndex>>, String> {
        let defs = self.defs.read();
        if let Some((name, _)) = defs.iter().find(|(_, e)| !e.index.is_ready()) {
            return Err(name.clone());
        }
        Ok(defs.values().map(|e| e.index.clone()).collect())
    }

    /// A ready index by name, or RethinkDB's error.
    pub(crate) fn ready(&self, name: &str) -> reql::Result<Arc<SecondaryIndex>> {
        let defs = self.defs.read();
        let e = defs
            .get(name)
            .ok_or_else(|| not_found(name, &self.display))?;
        if !e.index.is_ready() {
            return Err(op_failed(format!(
                "Index `{name}` on table `{}` was accessed before its construction was finished.",
                self.display
            )));
        }
        Ok(e.index.clone())
    }
}

fn not_found(name: &str, display: &str) -> ReqlError {
    op_failed(format!(
        "Index `{name}` was not found on table `{display}`."
    ))
}

/// The index values of entries, decoded (for `distinct(index=)`).
pub(crate) fn values_of(
    shard: &Shard,
    idx: &SecondaryIndex,
    lower: Bound<Datum>,
    upper: Bound<Datum>,
    reverse: bool,
) -> reql::Result<reql::DatumStream> {
    let it = shard
        .index_entries(idx, &lower, &upper, reverse)
        .map_err(store_err)?;
    Ok(Box::new(it.map(|e| {
        let e = e.map_err(store_err)?;
        datum::keys::decode(e.value())
            .ok_or_else(|| reql::error::internal("Corrupt index entry in storage."))
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cluster;
    use reql::{Change, Durability, TableAccess, TableOptions};

    fn opts() -> TableOptions {
        TableOptions {
            primary_key: "id".into(),
            durability: Durability::Soft,
            shards: 1,
            replicas: 1,
        }
    }

    fn spec(field: &str, multi: bool) -> IndexSpec {
        IndexSpec {
            function: serde_json::json!([69, [[2, [1]], [31, [[10, [1]], field]]]]),
            multi,
            geo: false,
        }
    }

    fn ids(s: reql::DatumStream) -> Vec<f64> {
        s.map(|d| d.unwrap().get("id").and_then(Datum::as_f64).unwrap())
            .collect()
    }

    #[test]
    fn indexes_are_maintained_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let all = || (Bound::Unbounded, Bound::Unbounded);
        {
            let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
            let c = Cluster::open(e, "s1").unwrap();
            c.table_create("test", "t", opts()).unwrap();
            let t = c.table("test", "t").unwrap();
            for i in 0..20 {
                let d = datum::from_json_slice(
                    format!(r#"{{"id":{i},"v":{},"m":[{i},{}]}}"#, i % 4, i + 100).as_bytes(),
                )
                .unwrap();
                reql::write_op::overwrite(t.as_ref(), &Datum::Number(f64::from(i)), Change::Put(d))
                    .unwrap();
            }
            t.index_create("v", spec("v", false)).unwrap();
            t.index_create("m", spec("m", true)).unwrap();
            let e = t.index_create("v", spec("v", false)).unwrap_err();
            assert_eq!(e.message, "Index `v` already exists on table `test.t`.");
            let one = Bound::Included(Datum::Number(1.0));
            assert_eq!(
                ids(t.index_scan("v", one.clone(), one.clone(), false).unwrap()),
                vec![1.0, 5.0, 9.0, 13.0, 17.0]
            );
            assert_eq!(
                t.index_count("m", Bound::Included(Datum::Number(100.0)), Bound::Unbounded)
                    .unwrap(),
                20
            );
            reql::write_op::overwrite(t.as_ref(), &Datum::Number(5.0), Change::Delete).unwrap();
            t.index_rename("v", "w", false).unwrap();
            assert!(t.index_scan("v", all().0, all().1, false).is_err());
            c.shutdown();
        }
        let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
        let c = Cluster::open(e, "s1").unwrap();
        let t = c.table("test", "t").unwrap();
        let names: Vec<String> = t
            .index_status()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, vec!["m".to_string(), "w".to_string()]);
        let one = Bound::Included(Datum::Number(1.0));
        assert_eq!(
            ids(t.index_scan("w", one.clone(), one, false).unwrap()),
            vec![1.0, 9.0, 13.0, 17.0]
        );
        let vals: Vec<Datum> = t
            .index_values("w", all().0, all().1, false)
            .unwrap()
            .map(|d| d.unwrap())
            .collect();
        assert_eq!(vals.len(), 19);
        assert_eq!(vals.first(), Some(&Datum::Number(0.0)));
        t.index_drop("m").unwrap();
        assert!(t.index_drop("m").is_err());
        c.table_drop("test", "t").unwrap();
    }

    #[test]
    fn write_hook_and_indexes_survive_rename_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
            Cluster::open(e, "s1").unwrap()
        };
        let hook = reql::WriteHook {
            function: serde_json::json!([69, [[2, [1, 2, 3]], [10, [3]]]]),
        };
        {
            let c = open();
            c.table_create("test", "t", opts()).unwrap();
            let t = c.table("test", "t").unwrap();
            t.index_create("v", spec("v", false)).unwrap();
            assert!(!t.set_write_hook(Some(hook.clone())).unwrap());
            assert!(t.set_write_hook(Some(hook.clone())).unwrap());
            let id = c.table_entry("test", "t").unwrap().id;
            c.alter_table(
                &id,
                crate::system::TableAlter {
                    name: Some("u".into()),
                    ..Default::default()
                },
            )
            .unwrap();
            let cfg = c.table_config("test", "u").unwrap();
            assert!(cfg.get("write_hook").and_then(|h| h.get("query")).is_some());
            // A DDL after the rename writes the record under the new name.
            c.table("test", "u")
                .unwrap()
                .index_create("w", spec("w", false))
                .unwrap();
            c.shutdown();
        }
        let c = open();
        assert!(c.table("test", "t").is_err());
        let t = c.table("test", "u").unwrap();
        assert_eq!(t.write_hook().unwrap(), Some(hook));
        let names: Vec<String> = t
            .index_status()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, vec!["v".to_string(), "w".to_string()]);
        assert!(t.set_write_hook(None).unwrap());
        c.shutdown();
        drop((t, c));
        let c = open();
        assert_eq!(c.table("test", "u").unwrap().write_hook().unwrap(), None);
    }
}
