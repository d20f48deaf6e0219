//! Test doubles shared by the crate's unit tests (compiled only under `cfg(test)`).
//!
//! `access::NoTables` is the catalog that refuses every call; `MemTable` is one table
//! held in memory, for tests of terms that read or write a table.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::{Mutex, MutexGuard};

use datum::{Datum, Version};

use crate::access::{
    count_by_scan, index_not_found, no_changefeeds, no_indexes, no_write_hooks, Change, Durability,
    IndexSpec, IndexStatus, PairStream, Table, Ticket, WriteHook,
};
use crate::error::{logic, Result};
use crate::value::DatumStream;
use crate::write_op::{Applied, WriteOp};

/// A query context over `NoTables` (no catalog, no network), default options.
pub(crate) fn no_tables_ctx() -> std::sync::Arc<crate::ctx::QueryCtx> {
    std::sync::Arc::new(crate::ctx::QueryCtx::new(
        std::sync::Arc::new(crate::access::NoTables {
            message: "no tables",
            connect: false,
        }),
        "test".into(),
        0.0,
    ))
}

/// A writable table `test.mem` in memory: documents by primary key `id`, in key order.
/// Its one secondary index, `a`, is each document's field `a` (a document without the
/// field has no entry; the index is not listed by `index_status`, cannot be changed and
/// serves `index_scan` only). Writes apply at once and carry no ticket. No write hook,
/// no changefeeds, and `require_config` always succeeds. `refuse_writes` makes every
/// write fail with a given error.
#[derive(Default)]
pub(crate) struct MemTable(
    Mutex<BTreeMap<Datum, Datum>>,
    Mutex<Option<crate::error::ReqlError>>,
);

impl MemTable {
    /// A table holding `docs`, each under its `id`.
    pub(crate) fn new(docs: Vec<Datum>) -> MemTable {
        let docs = docs
            .into_iter()
            .map(|d| (d.get("id").cloned().unwrap_or(Datum::Null), d))
            .collect();
        MemTable(Mutex::new(docs), Mutex::default())
    }

    /// From now on every write fails with `e` (a shard out of reach, say).
    pub(crate) fn refuse_writes(&self, e: crate::error::ReqlError) {
        *self.1.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    fn docs(&self) -> Result<MutexGuard<'_, BTreeMap<Datum, Datum>>> {
        self.0.lock().map_err(|_| logic("poisoned"))
    }
}

/// `docs` as a stream, last first when `reverse`.
fn stream(mut docs: Vec<Datum>, reverse: bool) -> DatumStream {
    if reverse {
        docs.reverse();
    }
    Box::new(docs.into_iter().map(Ok))
}

impl Table for MemTable {
    fn db(&self) -> &str {
        "test"
    }
    fn name(&self) -> &str {
        "mem"
    }
    fn primary_key(&self) -> &str {
        "id"
    }
    fn durability(&self) -> Durability {
        Durability::Soft
    }
    fn get(&self, key: &Datum) -> Result<Option<Datum>> {
        Ok(self.docs()?.get(key).cloned())
    }
    fn get_now(&self, key: &Datum) -> Option<Result<Option<Datum>>> {
        Some(self.get(key))
    }
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream> {
        let range = (lower, upper);
        let docs = self
            .docs()?
            .iter()
            .filter(|(k, _)| range.contains(*k))
            .map(|(_, d)| d.clone())
            .collect();
        Ok(stream(docs, reverse))
    }
    fn count(&self) -> Result<u64> {
        Ok(self.docs()?.len() as u64)
    }
    /// Exact quantiles of the keys.
    fn split_points(&self, parts: usize) -> Result<Vec<Datum>> {
        let docs = self.docs()?;
        let keys: Vec<&Datum> = docs.keys().collect();
        Ok((1..parts.max(1))
            .filter_map(|i| keys.get(i * keys.len() / parts).map(|k| (*k).clone()))
            .collect())
    }
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<Result<Applied>> {
        ops.into_iter().map(|op| self.apply(op)).collect()
    }
    fn apply(&self, op: WriteOp) -> Result<Applied> {
        if let Some(e) = self.1.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(e);
        }
        let mut docs = self.docs()?;
        let key = &op.key;
        let old = docs.get(key).cloned();
        if op.expect.is_some_and(|v| v != Version::of(old.as_ref())) {
            return Ok(Applied::Conflict(old));
        }
        let new = match op.change {
            Change::Keep => old.clone(),
            Change::Put(d) => {
                docs.insert(key.clone(), d.clone());
                Some(d)
            }
            Change::Delete => {
                docs.remove(key);
                None
            }
        };
        Ok(Applied::Done(old, new, None))
    }
    fn sync_ticket(&self) -> Result<Ticket> {
        Ok(0)
    }
    /// Index `a` only: documents by `a`, then by key.
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        if name != "a" {
            return Err(index_not_found(name, self.db(), self.name()));
        }
        let range = (lower, upper);
        let mut docs: Vec<Datum> = self
            .docs()?
            .values()
            .filter(|d| d.get("a").is_some_and(|a| range.contains(a)))
            .cloned()
            .collect();
        docs.sort_by(|x, y| x.get("a").cmp(&y.get("a")));
        Ok(stream(docs, reverse))
    }
    fn index_create(&self, _name: &str, _spec: IndexSpec) -> Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_drop(&self, _name: &str) -> Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_rename(&self, _old: &str, _new: &str, _overwrite: bool) -> Result<()> {
        Err(no_indexes(self.db(), self.name()))
    }
    fn index_status(&self) -> Result<Vec<IndexStatus>> {
        Ok(Vec::new())
    }
    fn index_statistics(&self) -> Result<Vec<IndexStatus>> {
        self.index_status()
    }
    fn index_count_upto(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
        _limit: u64,
    ) -> Result<u64> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn index_values(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
        _reverse: bool,
    ) -> Result<DatumStream> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn index_pairs(
        &self,
        name: &str,
        _lower: Bound<Datum>,
        _upper: Bound<Datum>,
    ) -> Result<PairStream> {
        Err(index_not_found(name, self.db(), self.name()))
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
        count_by_scan(self, lower, upper)
    }
    fn slice(&self) -> Option<&crate::slice::TableSlice> {
        None
    }
    fn write_hook(&self) -> Result<Option<WriteHook>> {
        Ok(None)
    }
    fn set_write_hook(&self, _hook: Option<WriteHook>) -> Result<bool> {
        Err(no_write_hooks(self.db(), self.name()))
    }
    fn require_config(&self) -> Result<()> {
        Ok(())
    }
    fn subscribe(&self, _req: changefeed::Request) -> Result<changefeed::Subscription> {
        Err(no_changefeeds(self.db(), self.name()))
    }
}
