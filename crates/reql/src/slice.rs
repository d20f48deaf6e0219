//! Table slices: a table restricted to a range of one index (`between`) and/or ordered by
//! it (`order_by(index=)`), as RethinkDB's `TABLE_SLICE`.
//!
//! A slice is itself a `Table` (it reads through its base table, writes go to the base),
//! so it travels as `Val::Table` and every term that accepts a table selection accepts
//! it; `Table::slice` tells the two apart. Streaming a slice reads the index range in
//! index order; `count` of a slice counts index entries without reading documents.
//!
//! A slice is not a check-wrapper (those are `crate::layer`s): it changes what `scan`,
//! `count` and `split_points` mean and forwards the other calls to its base table, whose
//! own layers check them. Like every `Table`, it states each method.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::access::{Durability, IndexSpec, IndexStatus, Table, Ticket};
use crate::error::Result;
use crate::value::DatumStream;
use crate::write_op::{Applied, WriteOp};

/// A range of one index of a table, optionally ordered.
#[derive(Clone)]
pub struct TableSlice {
    /// The table (never itself a slice).
    pub base: Arc<dyn Table>,
    /// The index; `None` is the primary key.
    pub index: Option<String>,
    /// Lower bound of the index value.
    pub lower: Bound<Datum>,
    /// Upper bound of the index value.
    pub upper: Bound<Datum>,
    /// A `between` made this slice (a second one is an error).
    pub between: bool,
    /// `Some(descending)` when ordered by the index.
    pub order: Option<bool>,
}

impl TableSlice {
    /// The whole of `table` (itself, or the base of a slice), on `index`.
    pub fn whole(table: &Arc<dyn Table>, index: Option<String>) -> TableSlice {
        let (base, index) = match table.slice() {
            Some(s) => (s.base.clone(), index.or_else(|| s.index.clone())),
            None => (table.clone(), index),
        };
        let index = index.filter(|i| i != base.primary_key());
        TableSlice {
            base,
            index,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            between: false,
            order: None,
        }
    }

    /// The index name as the user spells it (the primary key's name for the primary).
    pub fn index_name(&self) -> &str {
        self.index
            .as_deref()
            .unwrap_or_else(|| self.base.primary_key())
    }

    /// The documents of the slice, in index order when ordered (else also index order).
    pub fn stream(&self) -> Result<DatumStream> {
        let desc = self.order.unwrap_or(false);
        match &self.index {
            None => self.base.scan(self.lower.clone(), self.upper.clone(), desc),
            Some(name) => self
                .base
                .index_scan(name, self.lower.clone(), self.upper.clone(), desc),
        }
    }

    /// The number of documents (entries, for a multi index) in the slice.
    pub fn count(&self) -> Result<u64> {
        match &self.index {
            None if matches!(
                (&self.lower, &self.upper),
                (Bound::Unbounded, Bound::Unbounded)
            ) =>
            {
                self.base.count()
            }
            None => self
                .base
                .count_range(self.lower.clone(), self.upper.clone()),
            Some(name) => {
                self.base
                    .index_count_upto(name, self.lower.clone(), self.upper.clone(), u64::MAX)
            }
        }
    }

    /// This slice as a table value.
    pub fn into_table(self) -> Arc<dyn Table> {
        Arc::new(self)
    }
}

impl Table for TableSlice {
    fn db(&self) -> &str {
        self.base.db()
    }
    fn name(&self) -> &str {
        self.base.name()
    }
    fn primary_key(&self) -> &str {
        self.base.primary_key()
    }
    fn durability(&self) -> Durability {
        self.base.durability()
    }
    fn get(&self, key: &Datum) -> Result<Option<Datum>> {
        self.base.get(key)
    }
    fn get_now(&self, key: &Datum) -> Option<Result<Option<Datum>>> {
        self.base.get_now(key)
    }
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream> {
        if matches!((&lower, &upper), (Bound::Unbounded, Bound::Unbounded)) && !reverse {
            return self.stream();
        }
        self.base.scan(lower, upper, reverse)
    }
    fn count(&self) -> Result<u64> {
        TableSlice::count(self)
    }
    /// A slice is not split (its ranges are ranges of another index).
    fn split_points(&self, _parts: usize) -> Result<Vec<Datum>> {
        Ok(Vec::new())
    }
    fn apply(&self, op: WriteOp) -> Result<Applied> {
        self.base.apply(op)
    }
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<Result<Applied>> {
        self.base.apply_all(ops)
    }
    fn sync_ticket(&self) -> Result<Ticket> {
        self.base.sync_ticket()
    }
    fn index_create(&self, name: &str, spec: IndexSpec) -> Result<()> {
        self.base.index_create(name, spec)
    }
    fn index_drop(&self, name: &str) -> Result<()> {
        self.base.index_drop(name)
    }
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> Result<()> {
        self.base.index_rename(old, new, overwrite)
    }
    fn index_status(&self) -> Result<Vec<IndexStatus>> {
        self.base.index_status()
    }
    fn index_statistics(&self) -> Result<Vec<IndexStatus>> {
        self.base.index_statistics()
    }
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        self.base.index_scan(name, lower, upper, reverse)
    }
    fn index_count_upto(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        limit: u64,
    ) -> Result<u64> {
        self.base.index_count_upto(name, lower, upper, limit)
    }
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        self.base.index_values(name, lower, upper, reverse)
    }
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> Result<crate::access::PairStream> {
        self.base.index_pairs(name, lower, upper)
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
        self.base.count_range(lower, upper)
    }
    fn slice(&self) -> Option<&TableSlice> {
        Some(self)
    }
    fn write_hook(&self) -> Result<Option<crate::access::WriteHook>> {
        self.base.write_hook()
    }
    fn set_write_hook(&self, hook: Option<crate::access::WriteHook>) -> Result<bool> {
        self.base.set_write_hook(hook)
    }
    fn require_config(&self) -> Result<()> {
        self.base.require_config()
    }
    /// Never reached by `changes` (`terms::changes` subscribes to the base table with
    /// the slice's range); a slice has no feeds of its own.
    fn subscribe(&self, _req: changefeed::Request) -> Result<changefeed::Subscription> {
        Err(crate::access::no_changefeeds(self.db(), self.name()))
    }
}
