//! The one forwarding mechanism for wrappers of a `Table`: a `Layer` decides, for every
//! call, whether it may go on to the table below (`Layer::check`) and wraps the streams
//! that table returns (`Layer::stream`); `Layered` is the only `Table` that forwards.
//!
//! Fail-closed by construction:
//! - `Table` has no default methods, so a method added to it does not compile until
//!   `Layered` forwards it (and every table states its own answer).
//! - `Layered` reaches the table below only through `Layered::through`, which takes the
//!   call's `Call` and runs the layer's check first.
//! - `Call` lists every `Table` method that can fail, with its arguments; layers match
//!   it exhaustively (no `_` arm), so a new call does not compile until each layer says
//!   what it does with it — which permission it needs (`cluster`'s `access`), whether it
//!   checks the interruption flag (`crate::interrupt`).
//!
//! The methods that cannot fail (`db`, `name`, `primary_key`, `durability`,
//! `slice`) are facts about the table, not operations on its data: no
//! layer can refuse them, and `Layered` forwards them unchecked.

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::access::{Durability, IndexSpec, IndexStatus, PairStream, Table, Ticket, WriteHook};
use crate::error::Result;
use crate::slice::TableSlice;
use crate::value::DatumStream;
use crate::write_op::{Applied, WriteOp};

/// A lazy stream of results, as `Table` returns them (`DatumStream`, `PairStream`).
pub type Stream<T> = Box<dyn Iterator<Item = Result<T>> + Send>;

/// One `Table` call that can fail, with its arguments, as a layer sees it before it is
/// forwarded. There is one variant per fallible `Table` method.
#[derive(Clone, Copy)]
pub enum Call<'a> {
    /// `Table::get`.
    Get {
        /// The primary key.
        key: &'a Datum,
    },
    /// `Table::scan`.
    Scan {
        /// Lower primary-key bound.
        lower: &'a Bound<Datum>,
        /// Upper primary-key bound.
        upper: &'a Bound<Datum>,
        /// Descending order.
        reverse: bool,
    },
    /// `Table::count`.
    Count,
    /// `Table::split_points`.
    SplitPoints {
        /// How many ranges are wanted.
        parts: usize,
    },
    /// `Table::apply`.
    Apply {
        /// The write.
        op: &'a WriteOp,
    },
    /// `Table::index_create`.
    IndexCreate {
        /// The index name.
        name: &'a str,
        /// Its definition.
        spec: &'a IndexSpec,
    },
    /// `Table::index_drop`.
    IndexDrop {
        /// The index name.
        name: &'a str,
    },
    /// `Table::index_rename`.
    IndexRename {
        /// The current name.
        old: &'a str,
        /// The new name.
        new: &'a str,
        /// Replace an index called `new`.
        overwrite: bool,
    },
    /// `Table::index_status`.
    IndexStatus,
    /// `Table::index_statistics`.
    IndexStatistics,
    /// `Table::index_scan`.
    IndexScan {
        /// The index name.
        name: &'a str,
        /// Lower index-value bound.
        lower: &'a Bound<Datum>,
        /// Upper index-value bound.
        upper: &'a Bound<Datum>,
        /// Descending order.
        reverse: bool,
    },
    /// `Table::index_count`.
    IndexCount {
        /// The index name.
        name: &'a str,
        /// Lower index-value bound.
        lower: &'a Bound<Datum>,
        /// Upper index-value bound.
        upper: &'a Bound<Datum>,
    },
    /// `Table::index_values`.
    IndexValues {
        /// The index name.
        name: &'a str,
        /// Lower index-value bound.
        lower: &'a Bound<Datum>,
        /// Upper index-value bound.
        upper: &'a Bound<Datum>,
        /// Descending order.
        reverse: bool,
    },
    /// `Table::index_pairs`.
    IndexPairs {
        /// The index name.
        name: &'a str,
        /// Lower index-value bound.
        lower: &'a Bound<Datum>,
        /// Upper index-value bound.
        upper: &'a Bound<Datum>,
    },
    /// `Table::count_range`.
    CountRange {
        /// Lower primary-key bound.
        lower: &'a Bound<Datum>,
        /// Upper primary-key bound.
        upper: &'a Bound<Datum>,
    },
    /// `Table::write_hook`.
    WriteHook,
    /// `Table::set_write_hook`.
    SetWriteHook {
        /// The new hook; `None` removes it.
        hook: Option<&'a WriteHook>,
    },
    /// `Table::require_config`.
    RequireConfig,
    /// `Table::subscribe`.
    Subscribe {
        /// The feed request.
        req: &'a changefeed::Request,
    },
    /// `Table::sync_ticket` (`sync`).
    SyncTicket,
}

impl Call<'_> {
    /// The name of the `Table` method this call is.
    pub fn method(&self) -> &'static str {
        match self {
            Call::Get { .. } => "get",
            Call::Scan { .. } => "scan",
            Call::Count => "count",
            Call::SplitPoints { .. } => "split_points",
            Call::Apply { .. } => "apply",
            Call::IndexCreate { .. } => "index_create",
            Call::IndexDrop { .. } => "index_drop",
            Call::IndexRename { .. } => "index_rename",
            Call::IndexStatus => "index_status",
            Call::IndexStatistics => "index_statistics",
            Call::IndexScan { .. } => "index_scan",
            Call::IndexCount { .. } => "index_count",
            Call::IndexValues { .. } => "index_values",
            Call::IndexPairs { .. } => "index_pairs",
            Call::CountRange { .. } => "count_range",
            Call::WriteHook => "write_hook",
            Call::SetWriteHook { .. } => "set_write_hook",
            Call::RequireConfig => "require_config",
            Call::Subscribe { .. } => "subscribe",
            Call::SyncTicket => "sync_ticket",
        }
    }
}

impl fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Call::{}", self.method())
    }
}

/// What a wrapper adds to a table: a check before every fallible call and a wrapper
/// around every stream. Neither has a default: a layer states both.
pub trait Layer: Send + Sync + 'static {
    /// Runs before `call` is forwarded; an error refuses the call and is its answer.
    /// Match `call` exhaustively, so that a new call needs a decision.
    fn check(&self, call: Call<'_>) -> Result<()>;
    /// Wraps a stream the table below returned (`scan`, `index_scan`, `index_values`,
    /// `index_pairs`), after `check` let its call through.
    fn stream<T: Send + 'static>(&self, stream: Stream<T>) -> Stream<T>;
}

/// A table seen through a layer: every fallible call is checked by the layer, then
/// forwarded; every stream returned is wrapped by the layer.
pub struct Layered<L: Layer> {
    inner: Arc<dyn Table>,
    layer: L,
}

impl<L: Layer> Layered<L> {
    /// `inner` seen through `layer`.
    pub fn new(inner: Arc<dyn Table>, layer: L) -> Layered<L> {
        Layered { inner, layer }
    }

    /// `inner` seen through `layer`, as a table value.
    pub fn wrap(inner: Arc<dyn Table>, layer: L) -> Arc<dyn Table> {
        Arc::new(Layered::new(inner, layer))
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The table below, once the layer has let `call` through: the only way the
    /// fallible methods reach it.
    fn through(&self, call: Call<'_>) -> Result<&dyn Table> {
        self.layer.check(call)?;
        Ok(&*self.inner)
    }
}

impl<L: Layer> Table for Layered<L> {
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
    fn sync_ticket(&self) -> Result<Ticket> {
        self.through(Call::SyncTicket)?.sync_ticket()
    }
    fn slice(&self) -> Option<&TableSlice> {
        self.inner.slice()
    }

    fn get(&self, key: &Datum) -> Result<Option<Datum>> {
        self.through(Call::Get { key })?.get(key)
    }
    fn get_now(&self, key: &Datum) -> Option<Result<Option<Datum>>> {
        match self.through(Call::Get { key }) {
            Ok(t) => t.get_now(key),
            Err(e) => Some(Err(e)),
        }
    }
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream> {
        let call = Call::Scan {
            lower: &lower,
            upper: &upper,
            reverse,
        };
        let t = self.through(call)?;
        Ok(self.layer.stream(t.scan(lower, upper, reverse)?))
    }
    fn count(&self) -> Result<u64> {
        self.through(Call::Count)?.count()
    }
    fn split_points(&self, parts: usize) -> Result<Vec<Datum>> {
        self.through(Call::SplitPoints { parts })?
            .split_points(parts)
    }
    fn apply(&self, op: WriteOp) -> Result<Applied> {
        self.through(Call::Apply { op: &op })?.apply(op)
    }
    fn apply_all(&self, ops: Vec<WriteOp>) -> Vec<Result<Applied>> {
        // Each write is checked as `apply` checks it; those allowed go on together.
        let mut out: Vec<Option<Result<Applied>>> = Vec::with_capacity(ops.len());
        let (mut at, mut allowed, mut below) = (Vec::new(), Vec::new(), None);
        for (i, op) in ops.into_iter().enumerate() {
            match self.through(Call::Apply { op: &op }) {
                Ok(t) => {
                    below = Some(t);
                    at.push(i);
                    allowed.push(op);
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        if let Some(t) = below {
            for (i, applied) in at.into_iter().zip(t.apply_all(allowed)) {
                out[i] = Some(applied);
            }
        }
        out.into_iter()
            .map(|a| a.unwrap_or_else(|| Err(crate::error::internal("A write was not answered."))))
            .collect()
    }
    fn index_create(&self, name: &str, spec: IndexSpec) -> Result<()> {
        self.through(Call::IndexCreate { name, spec: &spec })?
            .index_create(name, spec)
    }
    fn index_drop(&self, name: &str) -> Result<()> {
        self.through(Call::IndexDrop { name })?.index_drop(name)
    }
    fn index_rename(&self, old: &str, new: &str, overwrite: bool) -> Result<()> {
        let call = Call::IndexRename {
            old,
            new,
            overwrite,
        };
        self.through(call)?.index_rename(old, new, overwrite)
    }
    fn index_status(&self) -> Result<Vec<IndexStatus>> {
        self.through(Call::IndexStatus)?.index_status()
    }
    fn index_statistics(&self) -> Result<Vec<IndexStatus>> {
        self.through(Call::IndexStatistics)?.index_statistics()
    }
    fn index_scan(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        let call = Call::IndexScan {
            name,
            lower: &lower,
            upper: &upper,
            reverse,
        };
        let t = self.through(call)?;
        Ok(self
            .layer
            .stream(t.index_scan(name, lower, upper, reverse)?))
    }
    fn index_count_upto(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        limit: u64,
    ) -> Result<u64> {
        let call = Call::IndexCount {
            name,
            lower: &lower,
            upper: &upper,
        };
        self.through(call)?
            .index_count_upto(name, lower, upper, limit)
    }
    fn index_values(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<DatumStream> {
        let call = Call::IndexValues {
            name,
            lower: &lower,
            upper: &upper,
            reverse,
        };
        let t = self.through(call)?;
        Ok(self
            .layer
            .stream(t.index_values(name, lower, upper, reverse)?))
    }
    fn index_pairs(
        &self,
        name: &str,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
    ) -> Result<PairStream> {
        let call = Call::IndexPairs {
            name,
            lower: &lower,
            upper: &upper,
        };
        let t = self.through(call)?;
        Ok(self.layer.stream(t.index_pairs(name, lower, upper)?))
    }
    fn count_range(&self, lower: Bound<Datum>, upper: Bound<Datum>) -> Result<u64> {
        let call = Call::CountRange {
            lower: &lower,
            upper: &upper,
        };
        self.through(call)?.count_range(lower, upper)
    }
    fn write_hook(&self) -> Result<Option<WriteHook>> {
        self.through(Call::WriteHook)?.write_hook()
    }
    fn set_write_hook(&self, hook: Option<WriteHook>) -> Result<bool> {
        let call = Call::SetWriteHook {
            hook: hook.as_ref(),
        };
        self.through(call)?.set_write_hook(hook)
    }
    fn require_config(&self) -> Result<()> {
        self.through(Call::RequireConfig)?.require_config()
    }
    fn subscribe(&self, req: changefeed::Request) -> Result<changefeed::Subscription> {
        self.through(Call::Subscribe { req: &req })?.subscribe(req)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use changefeed::Request;
    use parking_lot::Mutex;

    use super::*;
    use crate::error::{logic, ReqlError};
    use crate::testing::MemTable;
    use crate::write_op::WriteOp;

    /// The `Table` methods that can fail, in the order `call_every` makes them.
    const METHODS: [&str; 20] = [
        "get",
        "scan",
        "count",
        "split_points",
        "apply",
        "index_create",
        "index_drop",
        "index_rename",
        "index_status",
        "index_scan",
        "index_count",
        "index_values",
        "index_pairs",
        "count_range",
        "write_hook",
        "set_write_hook",
        "require_config",
        "subscribe",
        "sync_ticket",
        "index_statistics",
    ];

    /// A call's place in `METHODS`. Exhaustive: a new `Call` stops this test compiling
    /// until it is added here, to `METHODS` and to `call_every`.
    fn position(c: &Call<'_>) -> usize {
        match c {
            Call::Get { .. } => 0,
            Call::Scan { .. } => 1,
            Call::Count => 2,
            Call::SplitPoints { .. } => 3,
            Call::Apply { .. } => 4,
            Call::IndexCreate { .. } => 5,
            Call::IndexDrop { .. } => 6,
            Call::IndexRename { .. } => 7,
            Call::IndexStatus => 8,
            Call::IndexScan { .. } => 9,
            Call::IndexCount { .. } => 10,
            Call::IndexValues { .. } => 11,
            Call::IndexPairs { .. } => 12,
            Call::CountRange { .. } => 13,
            Call::WriteHook => 14,
            Call::SetWriteHook { .. } => 15,
            Call::RequireConfig => 16,
            Call::Subscribe { .. } => 17,
            Call::SyncTicket => 18,
            Call::IndexStatistics => 19,
        }
    }

    /// Makes every fallible call on `t`, in `METHODS` order; returns each one's error.
    fn call_every(t: &dyn Table) -> Vec<Option<ReqlError>> {
        let all = || (Bound::Unbounded, Bound::Unbounded);
        let one = Datum::from(1.0);
        let hook = WriteHook {
            function: serde_json::json!(null),
        };
        let spec = IndexSpec {
            function: serde_json::json!(null),
            multi: false,
            geo: false,
        };
        let req = Request::whole_table(Default::default());
        let drain = |s: Result<DatumStream>| s.and_then(|s| s.collect::<Result<Vec<_>>>());
        vec![
            t.get(&one).err(),
            drain(t.scan(all().0, all().1, false)).err(),
            t.count().err(),
            t.split_points(2).err(),
            t.apply(WriteOp {
                key: one.clone(),
                expect: None,
                change: crate::access::Change::Delete,
            })
            .err(),
            t.index_create("b", spec).err(),
            t.index_drop("b").err(),
            t.index_rename("a", "b", false).err(),
            t.index_status().err(),
            drain(t.index_scan("a", all().0, all().1, false)).err(),
            t.index_count_upto("a", all().0, all().1, u64::MAX).err(),
            drain(t.index_values("a", all().0, all().1, false)).err(),
            t.index_pairs("a", all().0, all().1)
                .and_then(|s| s.collect::<Result<Vec<_>>>())
                .err(),
            t.count_range(all().0, all().1).err(),
            t.write_hook().err(),
            t.set_write_hook(Some(hook)).err(),
            t.require_config().err(),
            t.subscribe(req).err(),
            t.sync_ticket().err(),
            t.index_statistics().err(),
        ]
    }

    /// Records every call and counts the streams it wraps; lets everything through.
    #[derive(Default)]
    struct Recording {
        calls: Mutex<Vec<(usize, &'static str)>>,
        streams: AtomicUsize,
    }

    impl Layer for Arc<Recording> {
        fn check(&self, call: Call<'_>) -> Result<()> {
            self.calls.lock().push((position(&call), call.method()));
            Ok(())
        }
        fn stream<T: Send + 'static>(&self, stream: Stream<T>) -> Stream<T> {
            self.streams.fetch_add(1, Ordering::Relaxed);
            stream
        }
    }

    /// Refuses every call.
    struct Refusing;

    fn refused(call: &Call<'_>) -> ReqlError {
        logic(format!("refused {}", call.method()))
    }

    impl Layer for Refusing {
        fn check(&self, call: Call<'_>) -> Result<()> {
            Err(refused(&call))
        }
        fn stream<T: Send + 'static>(&self, _stream: Stream<T>) -> Stream<T> {
            panic!("a refused call returned a stream")
        }
    }

    fn docs() -> Vec<Datum> {
        (0..4)
            .map(|i| Datum::from_pairs([("id", Datum::from(i as f64)), ("a", Datum::from(1.0))]))
            .collect()
    }

    #[test]
    fn every_call_goes_through_check_and_every_stream_through_the_layer() {
        let rec = Arc::new(Recording::default());
        let bare: Vec<String> = call_every(&MemTable::new(docs()))
            .into_iter()
            .map(|e| format!("{e:?}"))
            .collect();
        let t = Layered::new(Arc::new(MemTable::new(docs())), rec.clone());
        let layered: Vec<String> = call_every(&t)
            .into_iter()
            .map(|e| format!("{e:?}"))
            .collect();
        // A layer that lets everything through changes no answer.
        assert_eq!(layered, bare);
        let calls = rec.calls.lock().clone();
        let expect: Vec<(usize, &str)> = METHODS.iter().copied().enumerate().collect();
        assert_eq!(calls, expect);
        // scan and index_scan returned streams; MemTable refuses the other two.
        assert_eq!(rec.streams.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_refused_call_never_reaches_the_table() {
        let mem = Arc::new(MemTable::new(docs()));
        let t = Layered::new(mem.clone(), Refusing);
        let errs = call_every(&t);
        assert_eq!(errs.len(), METHODS.len());
        for (e, m) in errs.into_iter().zip(METHODS) {
            assert_eq!(e, Some(logic(format!("refused {m}"))), "{m}");
        }
        // The delete was refused before it reached the table.
        assert_eq!(mem.count().unwrap(), 4);
        // The facts about the table are not calls: they pass.
        assert_eq!((t.db(), t.name(), t.primary_key()), ("test", "mem", "id"));
        assert!(t.slice().is_none());
    }
}
