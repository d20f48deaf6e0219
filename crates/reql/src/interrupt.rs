//! Interrupting a running query. STOP, a closed connection and a deleted
//! `rethinkdb.jobs` row set the query's flag (`QueryCtx::cancel`); evaluation notices it
//! where its time goes: at every document read from a table (each table a query opens
//! is wrapped in an `Interruptible`, so every scan, index read and join over it checks),
//! at every function call (`eval::call_vals`), every 4096 `r.range` steps, and while
//! `index_wait` or `r.http` pagination wait.
//!
//! The check is one relaxed atomic load of a flag written once, so a scan pays nothing
//! measurable for it. What the client then sees is decided by the server, which knows
//! why the flag was set (`server::session`); the error raised here only unwinds the
//! evaluation. Not covered: a sort of an array already collected (`order_by` without an
//! index, `distinct`), bounded by the array limit, and counts done inside the store
//! (`count_range`, `index_count`), which read keys only.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datum::Datum;

use crate::access::{Durability, IndexSpec, IndexStatus, PairStream, Table, Ticket, WriteHook};
use crate::error::{ReqlError, Result};
use crate::slice::TableSlice;
use crate::value::DatumStream;
use crate::write_op::{Applied, WriteOp};

/// The error that unwinds an interrupted evaluation.
pub fn error() -> ReqlError {
    crate::error::op_failed("Query interrupted.").nondeterministic()
}

/// A table whose streams end with `error()` once `cancel` is set.
pub struct Interruptible {
    inner: Arc<dyn Table>,
    cancel: Arc<AtomicBool>,
}

impl Interruptible {
    /// `table`, its reads checking `cancel` at every document.
    pub fn wrap(table: Arc<dyn Table>, cancel: &Arc<AtomicBool>) -> Arc<dyn Table> {
        Arc::new(Interruptible {
            inner: table,
            cancel: cancel.clone(),
        })
    }
}

/// Yields `inner`'s items until `cancel` is set, then one `error()` and nothing more.
struct Checked<I> {
    inner: I,
    cancel: Arc<AtomicBool>,
    ended: bool,
}

impl<T, I: Iterator<Item = Result<T>>> Iterator for Checked<I> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        if self.cancel.load(Ordering::Relaxed) {
            if self.ended {
                return None;
            }
            self.ended = true;
            return Some(Err(error()));
        }
        self.inner.next()
    }
}

impl Interruptible {
    fn checked<T: 'static>(
        &self,
        inner: Box<dyn Iterator<Item = Result<T>> + Send>,
    ) -> Box<dyn Iterator<Item = Result<T>> + Send> {
        Box::new(Checked {
            inner,
            cancel: self.cancel.clone(),
            ended: false,
        })
    }

    fn check(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(error())
        } else {
            Ok(())
        }
    }
}

impl Table for Interruptible {
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
    fn get(&self, key: &Datum) -> Result<Option<Datum>> {
        self.check()?;
        self.inner.get(key)
    }
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream> {
        Ok(self.checked(self.inner.scan(lower, upper, reverse)?))
    }
    fn count(&self) -> Result<u64> {
        self.check()?;
        self.inner.count()
    }
    fn split_points(&self, parts: usize) -> Result<Vec<Datum>> {
        self.check()?;
        self.inner.split_points(parts)
    }
    fn apply(&self, op: WriteOp) -> Result<Applied> {
        self.check()?;
        self.inner.apply(op)
    }
    fn sync_ticket(&self) -> Ticket {
        self.inner.sync_ticket()
    }
    fn index_create(&self, name: &str, spec: IndexSpec) -> Result<()> {
        self.inner.index_create(name, spec)
    }
    fn index_drop(&self, name: &str) -> Result<()> {
        self.inner.index_drop(name)
    }
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> Result<()> {
        self.inner.index_rename(old, new, overwrite)
    }
    fn index_status(&self) -> Result<Vec<IndexStatus>> {
        self.inner.index_status()
    }
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        Ok(self.checked(self.inner.index_scan(name, lower, upper, reverse)?))
    }
    fn index_count(&self, name: &str, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
        self.check()?;
        self.inner.index_count(name, lower, upper)
    }
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        Ok(self.checked(self.inner.index_values(name, lower, upper, reverse)?))
    }
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> Result<PairStream> {
        Ok(self.checked(self.inner.index_pairs(name, lower, upper)?))
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
        self.check()?;
        self.inner.count_range(lower, upper)
    }
    fn slice(&self) -> Option<&TableSlice> {
        self.inner.slice()
    }
    fn write_hook(&self) -> Result<Option<WriteHook>> {
        self.inner.write_hook()
    }
    fn set_write_hook(&self, hook: Option<WriteHook>) -> Result<bool> {
        self.inner.set_write_hook(hook)
    }
    fn require_config(&self) -> Result<()> {
        self.inner.require_config()
    }
    fn subscribe(&self, req: changefeed::Request) -> Result<changefeed::Subscription> {
        self.inner.subscribe(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_ends_with_one_error_once_the_flag_is_set() {
        let cancel = Arc::new(AtomicBool::new(false));
        let inner: DatumStream = Box::new((0..10).map(|i| Ok(Datum::from(i as f64))));
        let mut s = Checked {
            inner,
            cancel: cancel.clone(),
            ended: false,
        };
        assert!(matches!(s.next(), Some(Ok(_))));
        assert!(matches!(s.next(), Some(Ok(_))));
        cancel.store(true, Ordering::Relaxed);
        assert!(matches!(s.next(), Some(Err(e)) if e == error()));
        assert!(s.next().is_none());
    }
}
