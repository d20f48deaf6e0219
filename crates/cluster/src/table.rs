//! `TableHandle`: one table as `reql` sees it, backed by its shards (`crate::shards`):
//! point reads and writes go to the shard owning the key, scans read the shards in key
//! order, counts add up.

use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use datum::Datum;
use reql::error::{internal, logic, op_failed};
use reql::{Applied, Change, DatumStream, Durability, ReqlError, Ticket, WriteOp};
use store::{GroupCommit, Shard, StoreChange, StoreError};

use crate::groups::IndexName;
use crate::shards::Sharded;

/// An entry's index value, decoded.
fn value_of(e: &store::IndexEntry) -> reql::Result<Datum> {
    datum::keys::decode(e.value())
        .ok_or_else(|| reql::error::internal("Corrupt index entry in storage."))
}

/// A table: its configuration and its shards.
#[derive(Clone)]
pub struct TableHandle {
    pub(crate) db: String,
    pub(crate) name: String,
    pub(crate) primary_key: String,
    pub(crate) durability: Durability,
    pub(crate) shards: Arc<Sharded>,
    pub(crate) commit: Arc<GroupCommit>,
    /// Read/write document counters for `rethinkdb.stats`.
    pub(crate) counters: Arc<crate::system::TableCounters>,
    /// Secondary index definitions and their build state (`crate::index`).
    pub(crate) indexes: Arc<crate::index::TableIndexes>,
    /// A replicated table's write path (its shards are Raft groups: `crate::groups`).
    pub(crate) replicated: Option<Arc<crate::groups::ReplicatedTable>>,
    /// A replicated table's new shards while it is resharded (`crate::reshard`).
    pub(crate) pending: Option<Arc<crate::catalog::Pending>>,
    /// How a replicated table's reads are served (`r.table(..., read_mode=)`).
    pub(crate) read_mode: reql::ReadMode,
}

/// A write's change as the store takes it.
fn store_change(change: Change) -> StoreChange {
    match change {
        Change::Keep => StoreChange::Keep,
        Change::Put(d) => StoreChange::Put(d),
        Change::Delete => StoreChange::Delete,
    }
}

impl TableHandle {
    /// A local shard's answer to a write as `apply` answers it.
    fn local_applied(&self, applied: Result<store::Applied, StoreError>) -> reql::Result<Applied> {
        match applied.map_err(store_err)? {
            store::Applied::Done((old, new, ticket)) => {
                if ticket.is_some() {
                    self.counters.written.fetch_add(1, Relaxed);
                }
                Ok(Applied::Done(old, new, ticket))
            }
            store::Applied::Conflict(now) => Ok(Applied::Conflict(now)),
        }
    }

    /// A replicated write's outcome as `apply` answers it.
    fn replicated_applied(&self, applied: store::Applied) -> Applied {
        match applied {
            store::Applied::Done((old, new, _)) => {
                self.counters.written.fetch_add(1, Relaxed);
                // Durable on a majority when the group committed it: no ticket.
                Applied::Done(old, new, None)
            }
            store::Applied::Conflict(now) => Applied::Conflict(now),
        }
    }
}

/// Maps a store error to RethinkDB's error classes.
pub fn store_err(e: StoreError) -> ReqlError {
    match e {
        StoreError::Key(m) => logic(m),
        // The rest depend on this machine's storage, not on the query.
        StoreError::Corrupt(m) => {
            internal(format!("Corrupt document in storage: {m}")).nondeterministic()
        }
        StoreError::Storage(e) => op_failed(format!("Storage failure: {e}")).nondeterministic(),
        StoreError::StorageText(m) => op_failed(format!("Storage failure: {m}")).nondeterministic(),
        StoreError::NotDurable(m) => {
            op_failed(format!("Write could not be made durable: {m}")).nondeterministic()
        }
        StoreError::Refused(m) => op_failed(m).nondeterministic(),
    }
}

/// A scan that adds the documents it read to the table's `read` counter in steps of
/// `COUNT_STEP` (and at its end): a shared counter bumped per document costs a contended
/// atomic per document when parallel ranges scan the same table.
struct Counted<I> {
    inner: I,
    counters: Arc<crate::system::TableCounters>,
    pending: u64,
}

const COUNT_STEP: u64 = 256;

/// The errors a counted read yields: a local shard's, or a replicated read's.
trait ToReql {
    fn to_reql(self) -> ReqlError;
}

impl ToReql for StoreError {
    fn to_reql(self) -> ReqlError {
        store_err(self)
    }
}

impl ToReql for ReqlError {
    fn to_reql(self) -> ReqlError {
        self
    }
}

impl<E: ToReql, I: Iterator<Item = Result<Datum, E>>> Iterator for Counted<I> {
    type Item = reql::Result<Datum>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        self.pending += 1;
        if self.pending == COUNT_STEP {
            self.counters.read.fetch_add(self.pending, Relaxed);
            self.pending = 0;
        }
        Some(item.map_err(ToReql::to_reql))
    }
}

impl<I> Drop for Counted<I> {
    fn drop(&mut self) {
        self.counters.read.fetch_add(self.pending, Relaxed);
    }
}

impl TableHandle {
    /// A shard to read index entries through: they live in one space per index for
    /// the whole table (`crate::shards`).
    fn any_shard(&self) -> Arc<Shard> {
        self.shards.current().shards[0].clone()
    }

    /// A replicated table's index read path, and the index `name` (RethinkDB's error
    /// when the table has no such index).
    fn replicated_index(
        &self,
        name: &str,
    ) -> reql::Result<Option<(&Arc<crate::groups::ReplicatedTable>, IndexName)>> {
        let Some(r) = &self.replicated else {
            return Ok(None);
        };
        let index = IndexName {
            id: self.indexes.id_of(name)?,
            name: name.to_owned(),
            table: self.indexes.display(),
        };
        Ok(Some((r, index)))
    }
}

impl reql::Table for TableHandle {
    fn db(&self) -> &str {
        &self.db
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn primary_key(&self) -> &str {
        &self.primary_key
    }
    fn durability(&self) -> Durability {
        self.durability
    }
    fn get(&self, key: &Datum) -> reql::Result<Option<Datum>> {
        if let Some(now) = self.get_now(key) {
            return now;
        }
        self.counters.read.fetch_add(1, Relaxed);
        let r = self
            .replicated
            .as_ref()
            .ok_or_else(|| internal("a local read waited"))?;
        let shard = self.shards.current().index_of(key).map_err(store_err)?;
        r.get(shard, key, self.read_mode)
    }
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<reql::Result<Applied>> {
        let Some(r) = &self.replicated else {
            // One engine batch per shard (`store::Shard::apply_many`).
            let ops = ops
                .into_iter()
                .map(|op| (op.key, op.expect, store_change(op.change)))
                .collect();
            let answers = self.shards.apply_many(ops);
            return answers.into_iter().map(|a| self.local_applied(a)).collect();
        };
        let layout = self.shards.current();
        let mut out: Vec<Option<reql::Result<Applied>>> = Vec::with_capacity(ops.len());
        let (mut at, mut batch) = (Vec::new(), Vec::new());
        for (i, op) in ops.into_iter().enumerate() {
            match layout.index_of(&op.key) {
                Ok(shard) => {
                    at.push(i);
                    batch.push((shard, op.key, op.expect, store_change(op.change)));
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(store_err(e)))),
            }
        }
        for (i, applied) in at.into_iter().zip(r.apply_all(batch)) {
            out[i] = Some(applied.map(|a| self.replicated_applied(a)));
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(internal("A write was not answered."))))
            .collect()
    }
    fn get_now(&self, key: &Datum) -> Option<reql::Result<Option<Datum>>> {
        let answer = match &self.replicated {
            Some(r) => match self.shards.current().index_of(key) {
                Ok(shard) => r.get_now(shard, key, self.read_mode)?,
                Err(e) => Err(store_err(e)),
            },
            None => self
                .shards
                .owner(key)
                .map_err(store_err)
                .and_then(|shard| shard.get(key).map_err(store_err)),
        };
        self.counters.read.fetch_add(1, Relaxed);
        Some(answer)
    }
    fn scan(
        &self,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        if let Some(r) = &self.replicated {
            // Counted as read here, as a point read through the groups is (`get`).
            return Ok(Box::new(Counted {
                inner: r.scan(lower, upper, reverse, self.read_mode),
                counters: self.counters.clone(),
                pending: 0,
            }));
        }
        let layout = self.shards.current();
        let mut parts = Vec::with_capacity(layout.shards.len());
        // Every shard's snapshot is taken now; the shards are read one after another.
        for s in &layout.shards {
            parts.push(
                s.scan(lower.clone(), upper.clone(), reverse)
                    .map_err(store_err)?,
            );
        }
        if reverse {
            parts.reverse();
        }
        let it = parts.into_iter().flatten();
        Ok(Box::new(Counted {
            inner: it,
            counters: self.counters.clone(),
            pending: 0,
        }))
    }
    fn count(&self) -> reql::Result<u64> {
        if let Some(r) = &self.replicated {
            return r.count(&Bound::Unbounded, &Bound::Unbounded, self.read_mode);
        }
        Ok(self.shards.current().shards.iter().map(|s| s.count()).sum())
    }
    fn split_points(&self, parts: usize) -> reql::Result<Vec<Datum>> {
        let keys: Vec<Vec<u8>> = (self.shards.current().shards.iter())
            .flat_map(|s| s.sampled_keys())
            .collect();
        Ok(store::split_sorted(&keys, parts)
            .iter()
            .filter_map(|k| datum::keys::decode(k))
            .collect())
    }
    fn apply(&self, op: WriteOp) -> reql::Result<Applied> {
        let change = store_change(op.change);
        if let Some(r) = &self.replicated {
            let shard = self.shards.current().index_of(&op.key).map_err(store_err)?;
            let applied = r.apply(shard, &op.key, op.expect, change)?;
            return Ok(self.replicated_applied(applied));
        }
        let applied = self
            .shards
            .apply_on(&op.key, |shard| shard.apply(&op.key, op.expect, change));
        self.local_applied(applied)
    }
    fn sync_ticket(&self) -> reql::Result<Ticket> {
        Ok(self.commit.last_ticket())
    }
    fn subscribe(&self, req: changefeed::Request) -> reql::Result<changefeed::Subscription> {
        let Some(r) = &self.replicated else {
            return crate::feeds::subscribe(self, req, &[]);
        };
        // Pollers of the shards without a replica here, and the initial values they
        // hold, ready before the feed is registered (`crate::groups`, feeds).
        let initial = req
            .options
            .include_initial
            .then(|| crate::feeds::initial_read(&req.target));
        let prepared = r.prepare_feed(self.shards.feeds(), &self.counters, initial)?;
        let sub = crate::feeds::subscribe(self, req, &prepared.remote);
        drop(prepared);
        sub
    }
    fn index_create(&self, name: &str, spec: reql::IndexSpec) -> reql::Result<()> {
        // A replicated table's replicas register and build it as the catalog entry
        // applies (`crate::replica::ShardIndexes`). Under the layout, so that a reshard cannot miss the new index.
        self.shards
            .held(|layout| self.indexes.create(name, spec, &layout.shards))
    }
    fn index_drop(&self, name: &str) -> reql::Result<()> {
        self.shards
            .held(|layout| self.indexes.drop_index(name, &layout.shards))
    }
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> reql::Result<()> {
        self.shards
            .held(|layout| self.indexes.rename(old, new, overwrite, &layout.shards))
    }
    fn index_status(&self) -> reql::Result<Vec<reql::IndexStatus>> {
        if let Some(r) = &self.replicated {
            return r.index_status(self.indexes.defs());
        }
        Ok(self.indexes.status())
    }
    fn index_statistics(&self) -> reql::Result<Vec<reql::IndexStatus>> {
        if let Some(r) = &self.replicated {
            return r.index_statistics(self.indexes.defs(), self.read_mode);
        }
        Ok(self.indexes.status())
    }
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        if let Some((r, index)) = self.replicated_index(name)? {
            let it = r.index_scan(index, lower, upper, reverse, self.read_mode);
            return Ok(Box::new(Counted {
                inner: it.map(|e| e.map(|(_, doc)| doc)),
                counters: self.counters.clone(),
                pending: 0,
            }));
        }
        let idx = self.indexes.ready(name)?;
        let it = self
            .any_shard()
            .index_docs(&idx, &lower, &upper, reverse)
            .map_err(store_err)?;
        // Documents read from an index count as read in `rethinkdb.stats`, like a scan's.
        Ok(Box::new(Counted {
            inner: it,
            counters: self.counters.clone(),
            pending: 0,
        }))
    }
    fn index_count_upto(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        limit: u64,
    ) -> reql::Result<u64> {
        if let Some((r, index)) = self.replicated_index(name)? {
            return r.index_count(&index, &lower, &upper, limit, self.read_mode);
        }
        let idx = self.indexes.ready(name)?;
        self.any_shard()
            .index_count_upto(&idx, &lower, &upper, limit)
            .map_err(store_err)
    }
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        if let Some((r, index)) = self.replicated_index(name)? {
            let it = r.index_scan(index, lower, upper, reverse, self.read_mode);
            return Ok(Box::new(it.map(|e| e.and_then(|(e, _)| value_of(&e)))));
        }
        let idx = self.indexes.ready(name)?;
        crate::index::values_of(&self.any_shard(), &idx, lower, upper, reverse)
    }
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> reql::Result<reql::access::PairStream> {
        if let Some((r, index)) = self.replicated_index(name)? {
            let it = r.index_scan(index, lower, upper, false, self.read_mode);
            return Ok(Box::new(it.map(|e| {
                let (e, doc) = e?;
                Ok((value_of(&e)?, doc))
            })));
        }
        let idx = self.indexes.ready(name)?;
        let it = self
            .any_shard()
            .index_pairs(&idx, &lower, &upper, false)
            .map_err(store_err)?;
        Ok(Box::new(it.map(|r| {
            let (e, doc) = r.map_err(store_err)?;
            let v = datum::keys::decode(e.value())
                .ok_or_else(|| reql::error::internal("Corrupt index entry in storage."))?;
            Ok((v, doc))
        })))
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> reql::Result<u64> {
        if let Some(r) = &self.replicated {
            return r.count(&lower, &upper, self.read_mode);
        }
        let mut n = 0;
        for s in &self.shards.current().shards {
            n += s.count_range(&lower, &upper).map_err(store_err)?;
        }
        Ok(n)
    }
    fn write_hook(&self) -> reql::Result<Option<reql::WriteHook>> {
        Ok(self.indexes.hook())
    }
    fn set_write_hook(&self, hook: Option<reql::WriteHook>) -> reql::Result<bool> {
        self.indexes.set_hook(hook)
    }
    fn slice(&self) -> Option<&reql::slice::TableSlice> {
        None
    }
    /// The handle itself is what `admin` gets: a user's `config` permission is checked
    /// by the permission layer over it (`crate::access`).
    fn require_config(&self) -> reql::Result<()> {
        Ok(())
    }
}
