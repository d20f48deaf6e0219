//! Secondary indexes of one table: the ReQL index function behind `store::IndexFn`,
//! the indexes registered with the table's shards, and background builds.
//!
//! The definitions live in the table's catalog record (`crate::catalog`: `"indexes":
//! [{"id", "name", "function", "multi", "geo", "ready"}]`, `function` being the FUNC term
//! in RethinkDB's JSON wire form), as does the write hook (`"write_hook": {"function":
//! <FUNC term JSON>}`). Both change only through catalog commands (`CreateIndex`,
//! `DropIndex`, `RenameIndex`, `IndexReady`, `SetWriteHook`) applied under the catalog
//! lock; this module keeps the store-side state in step with them while it holds the
//! lock, and never writes a record itself. An index's entries live in the storage space
//! `i_<table id>_<index id>`, so a rename touches only the record and a drop drops the
//! space. `reql` evaluates the hook (`reql::terms::write_hook`); this only keeps a copy.
//!
//! Invariants:
//! - A definition is persisted (fsync) before its index is registered with the shard, and
//!   `ready: true` only after the backfill finished (`IndexReady`, by table and index id,
//!   so a rename during the build changes nothing), so a restart during a build finds
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
use parking_lot::RwLock;
use reql::error::op_failed;
use reql::terms::index::IndexFunction;
use reql::{IndexSpec, IndexStatus, ReqlError, WriteHook};
use store::{IndexFn, NoKeys, SecondaryIndex, Shard, Unkeyed};

use crate::catalog::{Catalog, CatalogCommand, TableEntry};
use crate::table::store_err;

/// Below this many documents an index is built before `index_create` returns.
pub(crate) const SYNC_BUILD_DOCS: u64 = 10_000;

/// The ReQL index function of one index, as the store calls it.
struct ReqlIndexFn {
    func: IndexFunction,
    multi: bool,
    geo: bool,
}

impl IndexFn for ReqlIndexFn {
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
        let v = self.func.eval(doc).map_err(|e| NoKeys::Failed(e.message))?;
        let values = match &v {
            Datum::Array(a) if self.multi => a.to_vec(),
            v => vec![v.clone()],
        };
        values
            .iter()
            .map(|d| {
                if self.geo {
                    // Geospatial entries keep the geometry itself (as its JSON text); the
                    // optimizer never reads a geospatial index, so no marker.
                    if d.reql_type() != Some("GEOMETRY") {
                        return Err(NoKeys::Failed("Expected geometry".to_string()));
                    }
                    return datum::keys::encode_secondary(&Datum::str(&d.to_json_string()))
                        .map_err(|e| NoKeys::Failed(e.message().to_string()));
                }
                // The class of the whole value: the one a predicate on it compares.
                datum::keys::encode_secondary(d).map_err(|_| NoKeys::Unkeyable(Unkeyed::of(&v)))
            })
            .collect()
    }
}

/// An index built before indexes kept markers (`store::unkeyed`): backfills them in the
/// background (rewriting its entries as they are), then counts them. Until then the
/// optimizer plans without them.
fn spawn_markers(index: Arc<SecondaryIndex>, shards: Vec<Arc<Shard>>) {
    let _ = std::thread::Builder::new()
        .name("index-markers".into())
        .spawn(move || {
            for shard in &shards {
                if shard.build_index(&index).is_err() || index.is_cancelled() {
                    return;
                }
            }
            if let Some(s) = shards.first() {
                if s.set_unkeyed_complete(&index).is_ok() {
                    let _ = store::track_entries(&shards, &index);
                }
            }
        });
}

/// The store-side function of an index defined by `spec`.
pub(crate) fn index_fn(spec: &IndexSpec) -> reql::Result<Arc<dyn IndexFn>> {
    let func = IndexFunction::compile(&spec.function)?;
    Ok(Arc::new(ReqlIndexFn {
        func,
        multi: spec.multi,
        geo: spec.geo,
    }))
}

/// One index: its definition and its store-side state (on a replicated table, a
/// stand-in registered with no shard: each replica has its own, `crate::replica`).
#[derive(Clone)]
struct Entry {
    id: String,
    spec: IndexSpec,
    index: Arc<SecondaryIndex>,
}

/// The secondary indexes of one table.
pub struct TableIndexes {
    catalog: Arc<Catalog>,
    table_id: String,
    /// `db.table`, for error messages.
    display: RwLock<String>,
    defs: RwLock<BTreeMap<String, Entry>>,
    /// The table's write hook (a copy of the catalog's).
    hook: RwLock<Option<WriteHook>>,
}

impl TableIndexes {
    /// No indexes yet for the table with `table_id`, shown as `display` (`db.table`).
    pub(crate) fn new(catalog: Arc<Catalog>, table_id: &str, display: &str) -> TableIndexes {
        TableIndexes {
            catalog,
            table_id: table_id.to_string(),
            display: RwLock::new(display.to_string()),
            defs: RwLock::new(BTreeMap::new()),
            hook: RwLock::new(None),
        }
    }

    /// After a rename or a move: the table's new `db.table`.
    pub(crate) fn set_display(&self, display: &str) {
        *self.display.write() = display.to_string();
    }

    fn space(&self, id: &str) -> String {
        format!("i_{}_{}", self.table_id, id)
    }

    fn make(&self, id: &str, spec: &IndexSpec, ready: bool) -> reql::Result<Arc<SecondaryIndex>> {
        Ok(SecondaryIndex::new(
            &self.space(id),
            index_fn(spec)?,
            spec.multi,
            ready,
        ))
    }

    /// Registers the indexes and hook of a loaded table and restarts unfinished builds.
    pub(crate) fn load(
        self: &Arc<Self>,
        table: &TableEntry,
        shards: &[Arc<Shard>],
    ) -> Result<(), String> {
        *self.hook.write() = table.hook.as_ref().map(|f| WriteHook {
            function: f.clone(),
        });
        for (name, d) in &table.indexes {
            let spec = IndexSpec::from(&d.spec);
            let index = self.make(&d.id, &spec, d.ready).map_err(|e| e.message)?;
            for shard in shards {
                shard.add_index(index.clone()).map_err(|e| e.to_string())?;
            }
            self.defs.write().insert(
                name.clone(),
                Entry {
                    id: d.id.clone(),
                    spec,
                    index: index.clone(),
                },
            );
            if d.ready {
                store::track_entries(shards, &index).map_err(|e| e.to_string())?;
                let complete = match shards.first() {
                    Some(s) => s.unkeyed_complete(&index).map_err(|e| e.to_string())?,
                    None => true,
                };
                if !complete {
                    spawn_markers(index, shards.to_vec());
                }
            } else {
                self.spawn_build(d.id.clone(), index, shards.to_vec());
            }
        }
        Ok(())
    }

    /// Brings the registered indexes and the hook in step with `table`'s definitions,
    /// matching indexes by id (a replicated catalog's entry, `crate::catalog::follow`):
    /// a renamed index keeps its state, a new one is registered with the shards and
    /// built in the background, one no longer defined is unregistered. Never takes the
    /// catalog lock itself (its caller holds it); a build records `IndexReady` only
    /// where the catalog accepts local commands (not on a replicated one).
    pub(crate) fn follow(
        self: &Arc<Self>,
        table: &TableEntry,
        shards: &[Arc<Shard>],
    ) -> Result<(), String> {
        *self.hook.write() = table.hook.as_ref().map(|f| WriteHook {
            function: f.clone(),
        });
        let mut builds = Vec::new();
        let gone = {
            let mut defs = self.defs.write();
            // Built aside and swapped in whole: a failure leaves the definitions as
            // they were.
            let mut old: BTreeMap<Arc<str>, Entry> = defs
                .values()
                .map(|e| (e.index.space(), e.clone()))
                .collect();
            let mut next = BTreeMap::new();
            for (name, d) in &table.indexes {
                let space: Arc<str> = self.space(&d.id).into();
                let entry = match old.remove(&space) {
                    Some(e) => e,
                    None => {
                        let spec = IndexSpec::from(&d.spec);
                        let index = self.make(&d.id, &spec, false).map_err(|e| e.message)?;
                        for shard in shards {
                            shard.add_index(index.clone()).map_err(|e| e.to_string())?;
                        }
                        builds.push((d.id.clone(), index.clone()));
                        Entry {
                            id: d.id.clone(),
                            spec,
                            index,
                        }
                    }
                };
                next.insert(name.clone(), entry);
            }
            *defs = next;
            old
        };
        for e in gone.values() {
            for shard in shards {
                shard.remove_index(&e.index).map_err(|e| e.to_string())?;
            }
        }
        for (id, index) in builds {
            self.spawn_build(id, index, shards.to_vec());
        }
        Ok(())
    }

    /// The table's write hook.
    pub(crate) fn hook(&self) -> Option<WriteHook> {
        self.hook.read().clone()
    }

    /// Sets or removes the write hook, persisted before it applies. Returns whether a
    /// hook existed.
    pub(crate) fn set_hook(&self, hook: Option<WriteHook>) -> reql::Result<bool> {
        let mut g = self.catalog.lock();
        let out = g.apply(CatalogCommand::SetWriteHook {
            table: self.table_id.clone(),
            function: hook.as_ref().map(|h| h.function.clone()),
        })?;
        *self.hook.write() = hook;
        Ok(out.table_before().is_some_and(|e| e.hook.is_some()))
    }

    /// `index_create`.
    pub(crate) fn create(
        self: &Arc<Self>,
        name: &str,
        spec: IndexSpec,
        shards: &[Arc<Shard>],
    ) -> reql::Result<()> {
        let mut g = self.catalog.lock();
        if self.defs.read().contains_key(name) {
            return Err(op_failed(format!(
                "Index `{name}` already exists on table `{}`.",
                self.display.read()
            )));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let index = self.make(&id, &spec, false)?;
        if g.replicated() {
            // Every node registers and builds it as it applies the entry (`follow`).
            return g
                .apply(CatalogCommand::CreateIndex {
                    table: self.table_id.clone(),
                    index: id,
                    name: name.to_string(),
                    spec: (&spec).into(),
                })
                .map(|_| ());
        }
        g.apply(CatalogCommand::CreateIndex {
            table: self.table_id.clone(),
            index: id.clone(),
            name: name.to_string(),
            spec: (&spec).into(),
        })?;
        for shard in shards {
            shard.add_index(index.clone()).map_err(store_err)?;
        }
        self.defs.write().insert(
            name.to_string(),
            Entry {
                id: id.clone(),
                spec,
                index: index.clone(),
            },
        );
        drop(g);
        if shards.iter().map(|s| s.count()).sum::<u64>() < SYNC_BUILD_DOCS {
            self.build(&id, &index, shards);
        } else {
            self.spawn_build(id, index, shards.to_vec());
        }
        Ok(())
    }

    fn spawn_build(
        self: &Arc<Self>,
        id: String,
        index: Arc<SecondaryIndex>,
        shards: Vec<Arc<Shard>>,
    ) {
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("index-build".into())
            .spawn(move || me.build(&id, &index, &shards));
    }

    /// Backfills an index over every shard, then records it ready (`IndexReady`).
    fn build(&self, id: &str, index: &Arc<SecondaryIndex>, shards: &[Arc<Shard>]) {
        index.set_total(shards.iter().map(|s| s.count()).sum());
        for shard in shards {
            if shard.build_index(index).is_err() || index.is_cancelled() {
                return;
            }
        }
        // Every document has its marker now (`store::unkeyed`): written before the
        // index is recorded ready, so a ready index lacking it is an older one.
        if let Some(s) = shards.first() {
            if s.set_unkeyed_complete(index).is_err() {
                return;
            }
        }
        let mut g = self.catalog.lock();
        if index.is_cancelled() {
            return;
        }
        // Still ready in memory if this fails; the next start rebuilds it. A replicated
        // catalog's `ready` is not recorded: each replica builds its own copy.
        if !g.replicated() {
            let _ = g.apply(CatalogCommand::IndexReady {
                table: self.table_id.clone(),
                index: id.to_string(),
            });
        }
        index.set_ready();
        drop(g);
        // The optimizer's statistics; without them it does not use the index's counts.
        let _ = store::track_entries(shards, index);
    }

    /// `index_drop`.
    pub(crate) fn drop_index(&self, name: &str, shards: &[Arc<Shard>]) -> reql::Result<()> {
        let mut g = self.catalog.lock();
        if !self.defs.read().contains_key(name) {
            return Err(op_failed(format!(
                "Index `{name}` does not exist on table `{}`.",
                self.display.read()
            )));
        }
        g.apply(CatalogCommand::DropIndex {
            table: self.table_id.clone(),
            name: name.to_string(),
        })?;
        let removed = self.defs.write().remove(name);
        if let Some(e) = removed {
            for shard in shards {
                shard.remove_index(&e.index).map_err(store_err)?;
            }
        }
        Ok(())
    }

    /// Drops every index (the table is being dropped).
    pub(crate) fn drop_all(&self, shards: &[Arc<Shard>]) {
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
        let mut g = self.catalog.lock();
        g.apply(CatalogCommand::RenameIndex {
            table: self.table_id.clone(),
            old: old.to_string(),
            new: new.to_string(),
            overwrite,
        })?;
        // Replicated, the definitions followed the entry already (`follow`).
        if old == new || g.replicated() {
            return Ok(());
        }
        let replaced = {
            let mut defs = self.defs.write();
            let replaced = defs.remove(new);
            if let Some(e) = defs.remove(old) {
                defs.insert(new.to_string(), e);
            }
            replaced
        };
        if let Some(e) = replaced {
            for shard in shards {
                shard.remove_index(&e.index).map_err(store_err)?;
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
                entries: e.index.entry_count(),
                unkeyed: e
                    .index
                    .unkeyed_counts()
                    .map(|[null, array, object]| reql::Unkeyed {
                        null,
                        array,
                        object,
                    }),
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
            .ok_or_else(|| not_found(name, &self.display.read()))?;
        if !e.index.is_ready() {
            return Err(op_failed(format!(
                "Index `{name}` on table `{}` was accessed before its construction was finished.",
                self.display.read()
            )));
        }
        Ok(e.index.clone())
    }
}

impl TableIndexes {
    /// Every index's name, id and definition, sorted by name.
    pub(crate) fn defs(&self) -> Vec<(String, String, IndexSpec)> {
        (self.defs.read().iter())
            .map(|(name, e)| (name.clone(), e.id.clone(), e.spec.clone()))
            .collect()
    }

    /// The id of the index `name`, or RethinkDB's error.
    pub(crate) fn id_of(&self, name: &str) -> reql::Result<String> {
        let defs = self.defs.read();
        let e = defs
            .get(name)
            .ok_or_else(|| not_found(name, &self.display.read()))?;
        Ok(e.id.clone())
    }

    /// `db.table`, for error messages.
    pub(crate) fn display(&self) -> String {
        self.display.read().clone()
    }
}

pub(crate) fn not_found(name: &str, display: &str) -> ReqlError {
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
    use storage::Engine;

    fn opts() -> TableOptions {
        TableOptions {
            primary_key: "id".into(),
            durability: Durability::Soft,
            shards: 1,
            replicas: reql::Replicas::count(1),
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
                t.index_count_upto(
                    "m",
                    Bound::Included(Datum::Number(100.0)),
                    Bound::Unbounded,
                    u64::MAX
                )
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

    /// An index built before unindexable values had markers (none in its space, and no
    /// completion key) reports no counts at start-up rather than wrong ones, is
    /// backfilled again in the background, and then reports exact counts that follow
    /// writes.
    #[test]
    fn an_index_without_markers_is_upgraded_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let e: Arc<dyn Engine> = Arc::new(storage::Fjall::open(dir.path(), 1 << 24).unwrap());
            (e.clone(), Cluster::open(e, "s1").unwrap())
        };
        let unkeyed = |t: &Arc<dyn reql::Table>| t.index_status().unwrap()[0].unkeyed;
        let want = reql::Unkeyed {
            null: 2,
            array: 1,
            object: 3,
        };
        {
            let (e, c) = open();
            c.table_create("test", "t", opts()).unwrap();
            let t = c.table("test", "t").unwrap();
            for i in 0..20 {
                let v = match i {
                    14 | 15 => "null".to_string(),
                    16..=18 => r#"{"o":1}"#.to_string(),
                    19 => r#"[{"o":1}]"#.to_string(),
                    _ => (i % 4).to_string(),
                };
                let d =
                    datum::from_json_slice(format!(r#"{{"id":{i},"v":{v}}}"#).as_bytes()).unwrap();
                reql::write_op::overwrite(t.as_ref(), &Datum::Number(f64::from(i)), Change::Put(d))
                    .unwrap();
            }
            t.index_create("v", spec("v", false)).unwrap();
            assert_eq!(unkeyed(&t), Some(want));
            // What an older build left: entries only. Markers and the completion key
            // sort before every entry (`store::unkeyed`).
            let space = e
                .space_names()
                .unwrap()
                .into_iter()
                .find(|n| n.starts_with("i_"))
                .unwrap();
            let mut b = storage::WriteBatch::new();
            let snap = e.snapshot();
            let below = Bound::Excluded(vec![0x01]);
            for kv in snap.range(&space, Bound::Unbounded, below, false).unwrap() {
                b.delete(&space, kv.unwrap().0);
            }
            assert!(!b.is_empty());
            e.apply(b).unwrap();
            e.persist().unwrap();
            c.shutdown();
        }
        let (_e, c) = open();
        let t = c.table("test", "t").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while unkeyed(&t) != Some(want) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(unkeyed(&t), Some(want), "counted again after the backfill");
        let null = datum::from_json_slice(br#"{"id":0,"v":null}"#).unwrap();
        reql::write_op::overwrite(t.as_ref(), &Datum::Number(0.0), Change::Put(null)).unwrap();
        assert_eq!(unkeyed(&t).map(|u| u.null), Some(3));
        c.shutdown();
    }
}
