//! Interrupting a running query. STOP, a closed connection and a deleted
//! `rethinkdb.jobs` row set the query's flag (`QueryCtx::cancel`); evaluation notices it
//! where its time goes: at every document read from a table (each table a query opens
//! is seen through the `Interruptible` layer, `crate::layer`, so every scan, index read
//! and join over it checks), at every function call (`eval::call_vals`), every 4096
//! `r.range` steps, and while `index_wait` or `r.http` pagination wait.
//!
//! The check is one relaxed atomic load of a flag written once, so a scan pays nothing
//! measurable for it. What the client then sees is decided by the server, which knows
//! why the flag was set (`server::session`); the error raised here only unwinds the
//! evaluation. Not covered: a sort of an array already collected (`order_by` without an
//! index, `distinct`), bounded by the array limit, and counts done inside the store
//! (`count_range`, `index_count`), which read keys only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::access::Table;
use crate::error::{ReqlError, Result};
use crate::layer::{Call, Layer, Layered, Stream};

/// The error that unwinds an interrupted evaluation.
pub fn error() -> ReqlError {
    crate::error::op_failed("Query interrupted.").nondeterministic()
}

/// The interruption layer (`crate::layer`): point reads and writes check the flag before
/// they run, and streams end with `error()` once it is set.
pub struct Interruptible {
    cancel: Arc<AtomicBool>,
}

impl Interruptible {
    /// `table`, its reads checking `cancel` at every document.
    pub fn wrap(table: Arc<dyn Table>, cancel: &Arc<AtomicBool>) -> Arc<dyn Table> {
        Layered::wrap(
            table,
            Interruptible {
                cancel: cancel.clone(),
            },
        )
    }

    fn check_flag(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(error())
        } else {
            Ok(())
        }
    }
}

impl Layer for Interruptible {
    fn check(&self, call: Call<'_>) -> Result<()> {
        match call {
            // Point calls: the flag is checked before each.
            Call::Get { .. }
            | Call::Count
            | Call::SplitPoints { .. }
            | Call::Apply { .. }
            | Call::IndexCount { .. }
            | Call::CountRange { .. }
            | Call::IndexStatistics => self.check_flag(),
            // Streams: not checked when opened; `stream` checks at every item.
            Call::Scan { .. }
            | Call::IndexScan { .. }
            | Call::IndexValues { .. }
            | Call::IndexPairs { .. } => Ok(()),
            // Not interrupted here: index and hook configuration, and changefeeds
            // (whose cursors the server stops itself).
            Call::IndexCreate { .. }
            | Call::IndexDrop { .. }
            | Call::IndexRename { .. }
            | Call::IndexStatus
            | Call::WriteHook
            | Call::SetWriteHook { .. }
            | Call::RequireConfig
            | Call::Subscribe { .. }
            | Call::SyncTicket => Ok(()),
        }
    }

    fn stream<T: Send + 'static>(&self, stream: Stream<T>) -> Stream<T> {
        Box::new(Checked {
            inner: stream,
            cancel: self.cancel.clone(),
            ended: false,
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

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use datum::Datum;

    use super::*;
    use crate::value::DatumStream;

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

    #[test]
    fn point_calls_check_the_flag_and_streams_stop_at_the_next_item() {
        let docs = (0..3)
            .map(|i| Datum::from_pairs([("id", Datum::from(i as f64)), ("a", Datum::from(1.0))]))
            .collect();
        let cancel = Arc::new(AtomicBool::new(false));
        let t = Interruptible::wrap(Arc::new(crate::testing::MemTable::new(docs)), &cancel);
        let all = || (Bound::Unbounded, Bound::Unbounded);
        let mut open = t.scan(all().0, all().1, false).unwrap();
        assert!(matches!(open.next(), Some(Ok(_))));
        assert_eq!(t.count().unwrap(), 3);
        cancel.store(true, Ordering::Relaxed);
        let interrupted = Some(error());
        assert_eq!(t.get(&Datum::from(1.0)).err(), interrupted);
        assert_eq!(t.count().err(), interrupted);
        assert_eq!(t.split_points(2).err(), interrupted);
        assert_eq!(t.count_range(all().0, all().1).err(), interrupted);
        assert_eq!(
            t.index_count_upto("a", all().0, all().1, u64::MAX).err(),
            interrupted
        );
        let op = crate::write_op::WriteOp {
            key: Datum::from(1.0),
            expect: None,
            change: crate::access::Change::Delete,
        };
        assert_eq!(t.apply(op).err(), interrupted);
        // A stream opened before, or after, ends with one error.
        assert_eq!(open.next().map(|r| r.err()), Some(interrupted.clone()));
        assert!(open.next().is_none());
        let mut s = t.index_scan("a", all().0, all().1, false).unwrap();
        assert_eq!(s.next().map(|r| r.err()), Some(interrupted));
        // Configuration calls are not interrupted: the table answers them.
        assert_eq!(t.index_status().unwrap(), vec![]);
        assert_eq!(t.write_hook().unwrap(), None);
        assert!(t.require_config().is_ok());
    }
}
