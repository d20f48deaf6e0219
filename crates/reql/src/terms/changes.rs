//! CHANGES: changefeeds on tables, `get` (point feeds), `between`/`get_all` on the
//! primary key, with per-document transformations before `.changes()` (`filter`,
//! `map`, `pluck`, `with_fields`, `without`, `merge`, `has_fields`), and the union of
//! feeds.
//!
//! A feed is a lazy `Sequence` marked `infinite` whose stream never blocks: it yields
//! what is queued and `None` when nothing is, so every per-item term after `.changes()`
//! (`filter`, `map`, `pluck`, `limit`, ...) works unchanged. The query's `FeedCtx`
//! tells the server that the result is a feed, which notes to send, how to wait
//! (`FeedInfo::waker`) and when a `limit` after the feed has ended it (`done`).
//!
//! The selection under `.changes()` is read from the term tree, not from its value: the
//! table, the keys or key range, and the transformation terms, which are re-evaluated
//! per changed document on a one-element array (RethinkDB's `apply_ops`; an error or a
//! filtered-out value counts as absent).
//!
//! Not yet: feeds on secondary indexes, `order_by(index=).limit(n)` and `min`/`max`
//! feeds (they need the secondary-index work), and the system tables.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use changefeed::{Notify, Options, Probe, Request, Target, Transform};
use datum::Datum;
use parking_lot::Mutex;
use proto::ql2::ResponseNote;
use proto::ql2::TermType as T;

use crate::access::Table;
use crate::ctx::QueryCtx;
use crate::error::{logic, op_failed, Result, WithFrame};
use crate::eval::{describe, eval, to_datum, Ev};
use crate::term::Term;
use crate::value::{DatumStream, Func, Sequence, Val};

/// RethinkDB's error for terminals (`order_by`, `count`, ...) on a feed.
pub const TERMINAL_ON_FEED: &str =
    "Cannot call a terminal (`reduce`, `count`, etc.) on an infinite stream (such as a changefeed).";

/// The kind of one feed, which decides the response note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedKind {
    /// `get(...).changes()`.
    Point,
    /// A table, range or key-set feed.
    Stream,
}

/// What the server needs to serve a query's feeds.
pub struct FeedInfo {
    /// Signalled whenever any of the query's feeds has something new.
    pub waker: Arc<Notify>,
    /// One entry per feed opened by the query.
    pub kinds: Vec<FeedKind>,
    /// Some feed delivers `{state}` documents.
    pub include_states: bool,
    /// The longest `squash` interval in seconds (0 for none).
    pub min_interval: f64,
    /// The feeds' queues, for ending a squash wait early when one fills up.
    pub probes: Vec<Probe>,
    /// Set when a `limit` after the feed has delivered its last item.
    pub done: Arc<AtomicBool>,
}

impl FeedInfo {
    /// The notes of the feed's responses.
    pub fn notes(&self) -> Vec<ResponseNote> {
        let mut n = vec![match self.kinds.as_slice() {
            [FeedKind::Point] => ResponseNote::ATOM_FEED,
            [_] => ResponseNote::SEQUENCE_FEED,
            _ => ResponseNote::UNIONED_FEED,
        }];
        if self.include_states {
            n.push(ResponseNote::INCLUDES_STATES);
        }
        n
    }

    /// True when some feed's queue is more than half full.
    pub fn nearly_full(&self) -> bool {
        self.probes.iter().any(Probe::nearly_full)
    }

    /// True once a `limit` ended the stream.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }
}

/// The per-query feed state kept in `QueryCtx`.
pub struct FeedCtx {
    info: Mutex<Option<FeedInfo>>,
    queue_size: AtomicUsize,
}

impl Default for FeedCtx {
    fn default() -> Self {
        FeedCtx {
            info: Mutex::new(None),
            queue_size: AtomicUsize::new(changefeed::DEFAULT_QUEUE_SIZE),
        }
    }
}

impl FeedCtx {
    /// Sets the default queue size (the `changefeed_queue_size` global optarg).
    pub fn set_queue_size(&self, n: usize) {
        self.queue_size.store(n.max(1), Ordering::SeqCst);
    }

    /// True once the query opened a feed.
    pub fn active(&self) -> bool {
        self.info.lock().is_some()
    }

    /// Takes the feed state (the server keeps it with the cursor).
    pub fn take(&self) -> Option<FeedInfo> {
        self.info.lock().take()
    }

    fn with_info<R>(&self, f: impl FnOnce(&mut FeedInfo) -> R) -> R {
        let mut g = self.info.lock();
        let info = g.get_or_insert_with(|| FeedInfo {
            waker: Arc::new(Notify::new()),
            kinds: Vec::new(),
            include_states: false,
            min_interval: 0.0,
            probes: Vec::new(),
            done: Arc::new(AtomicBool::new(false)),
        });
        f(info)
    }
}

/// The checked options of one `.changes()`.
struct FeedOpts {
    options: Options,
    min_interval: f64,
    include_offsets: bool,
}

fn feed_opts(ev: &Ev) -> Result<FeedOpts> {
    let (squash, min_interval) = match ev.opt_datum("squash")? {
        None => (false, 0.0),
        Some(Datum::Bool(b)) => (b, 0.0),
        Some(Datum::Number(n)) if n < 0.0 => {
            return Err(logic(
                "Expected BOOL or a positive NUMBER but found a negative NUMBER.",
            ))
            .at_opt("squash")
        }
        Some(Datum::Number(n)) => (true, n),
        Some(d) => {
            return Err(logic(format!(
                "Expected BOOL or NUMBER but found {}.",
                d.type_name()
            )))
            .at_opt("squash")
        }
    };
    let queue_size = match ev.opt_datum("changefeed_queue_size")? {
        None => ev.ctx.feeds.queue_size.load(Ordering::SeqCst),
        Some(d) => {
            let n = crate::eval::expect_int(&d).at_opt("changefeed_queue_size")?;
            if n < 1 {
                return Err(logic(format!(
                    "Changefeed queue size must be at least 1 (got {n})."
                )))
                .at_opt("changefeed_queue_size");
            }
            n as usize
        }
    };
    Ok(FeedOpts {
        options: Options {
            squash,
            queue_size,
            include_initial: ev.opt_bool("include_initial", false)?,
            include_states: ev.opt_bool("include_states", false)?,
            include_types: ev.opt_bool("include_types", false)?,
        },
        min_interval,
        include_offsets: ev.opt_bool("include_offsets", false)?,
    })
}

/// The selection a feed watches.
struct Plan {
    table: Arc<dyn Table>,
    target: Target,
    kind: FeedKind,
    /// Transformation terms, innermost first; each has the selection as argument 0.
    transforms: Vec<Arc<Term>>,
}

fn table_of(ev: &Ev, t: &Arc<Term>) -> Result<Arc<dyn Table>> {
    match eval(ev.ctx, ev.env, t)? {
        Val::Table(t) => Ok(t),
        other => Err(logic(format!(
            "Expected type TABLE but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        ))),
    }
}

fn datum_of(ev: &Ev, t: &Arc<Term>) -> Result<Datum> {
    let v = eval(ev.ctx, ev.env, t)?;
    to_datum(ev.ctx, v)
}

fn check_primary(ev: &Ev, t: &Arc<dyn Table>, term: &Term) -> Result<()> {
    let Some(idx) = term.optarg("index") else {
        return Ok(());
    };
    let idx = datum_of(ev, idx)?;
    if idx.as_str() == Some(t.primary_key()) {
        return Ok(());
    }
    Err(op_failed(format!(
        "Changefeeds on secondary index `{}` are not supported by this server yet.",
        idx.as_str().unwrap_or_default()
    )))
}

fn bound(ev: &Ev, term: &Term, name: &str, default_closed: bool) -> Result<bool> {
    match term.optarg(name) {
        None => Ok(default_closed),
        Some(t) => match datum_of(ev, t)? {
            Datum::String(s) if &*s == "closed" => Ok(true),
            Datum::String(s) if &*s == "open" => Ok(false),
            d => Err(logic(format!(
                "Expected `open` or `closed` for optarg `{name}` (got `{}`).",
                d.to_json_string()
            ))),
        },
    }
}

fn arg(t: &Term, i: usize) -> Result<&Arc<Term>> {
    t.args
        .get(i)
        .ok_or_else(|| logic(format!("Missing argument {i}.")))
}

fn primary_key(d: Datum) -> Result<Datum> {
    datum::keys::encode_primary(&d).map_err(|e| logic(e.message().to_string()))?;
    Ok(d)
}

fn plan(ev: &Ev, t: &Arc<Term>) -> Result<Plan> {
    match t.tt {
        T::GET => {
            let table = table_of(ev, arg(t, 0)?)?;
            let key = primary_key(datum_of(ev, arg(t, 1)?)?)?;
            Ok(Plan {
                table,
                target: Target::Keys(vec![key]),
                kind: FeedKind::Point,
                transforms: Vec::new(),
            })
        }
        T::GET_ALL => {
            let table = table_of(ev, arg(t, 0)?)?;
            check_primary(ev, &table, t)?;
            let mut keys = Vec::new();
            for a in t.args.iter().skip(1) {
                keys.push(primary_key(datum_of(ev, a)?)?);
            }
            Ok(Plan {
                table,
                target: Target::Keys(keys),
                kind: FeedKind::Stream,
                transforms: Vec::new(),
            })
        }
        T::BETWEEN => {
            let table = table_of(ev, arg(t, 0)?)?;
            check_primary(ev, &table, t)?;
            let left_closed = bound(ev, t, "left_bound", true)?;
            let right_closed = bound(ev, t, "right_bound", false)?;
            let lower = match datum_of(ev, arg(t, 1)?)? {
                Datum::MinVal => Bound::Unbounded,
                d if left_closed => Bound::Included(d),
                d => Bound::Excluded(d),
            };
            let upper = match datum_of(ev, arg(t, 2)?)? {
                Datum::MaxVal => Bound::Unbounded,
                d if right_closed => Bound::Included(d),
                d => Bound::Excluded(d),
            };
            Ok(Plan {
                table,
                target: Target::Range { lower, upper },
                kind: FeedKind::Stream,
                transforms: Vec::new(),
            })
        }
        T::FILTER | T::PLUCK | T::WITH_FIELDS | T::WITHOUT | T::MERGE | T::HAS_FIELDS => {
            let mut p = plan(ev, arg(t, 0)?)?;
            p.transforms.push(t.clone());
            Ok(p)
        }
        T::MAP if t.args.len() == 2 => {
            let mut p = plan(ev, arg(t, 0)?)?;
            p.transforms.push(t.clone());
            Ok(p)
        }
        _ => match eval(ev.ctx, ev.env, t)? {
            Val::Table(table) => {
                if let Some(s) = table.slice() {
                    if s.index.is_some() || s.order.is_some() {
                        return Err(op_failed(
                            "Changefeeds on secondary indexes and ordered slices are not supported by this server yet.",
                        ));
                    }
                    return Ok(Plan {
                        table: s.base.clone(),
                        target: Target::Range {
                            lower: s.lower.clone(),
                            upper: s.upper.clone(),
                        },
                        kind: FeedKind::Stream,
                        transforms: Vec::new(),
                    });
                }
                Ok(Plan {
                    table,
                    target: Target::Range {
                        lower: Bound::Unbounded,
                        upper: Bound::Unbounded,
                    },
                    kind: FeedKind::Stream,
                    transforms: Vec::new(),
                })
            }
            Val::Single(s) => Ok(Plan {
                table: s.table,
                target: Target::Keys(vec![s.key]),
                kind: FeedKind::Point,
                transforms: Vec::new(),
            }),
            Val::Seq(_) | Val::Datum(Datum::Array(_)) => {
                Err(logic("Cannot call `changes` on an eager stream."))
            }
            other => Err(logic(format!(
                "Expected type SEQUENCE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            ))),
        },
    }
}

/// One transformation before `.changes()`.
enum Step {
    /// `filter` with a function predicate.
    Filter(Func),
    /// `map` with a function.
    Map(Func),
    /// Any other per-document term, re-evaluated on `[doc]`.
    Term(Arc<Term>),
}

/// Re-evaluates the transformation terms on one document.
fn transform_of(ev: &Ev, terms: Vec<Arc<Term>>) -> Option<Transform> {
    if terms.is_empty() {
        return None;
    }
    // A context of its own: the feed's must not be reachable from the hub (a cycle).
    let mut ctx = QueryCtx::new(ev.ctx.access.clone(), ev.ctx.db.clone(), ev.ctx.now);
    ctx.array_limit = ev.ctx.array_limit;
    let ctx = Arc::new(ctx);
    let env = ev.env.clone();
    // `filter(func)` and `map(func)` are called directly with the function evaluated
    // once; other terms are re-evaluated on a one-element array.
    let steps: Vec<Step> = terms
        .into_iter()
        .map(|t| {
            let fast = match t.tt {
                T::FILTER if t.optargs.is_empty() => Some(true),
                T::MAP => Some(false),
                _ => None,
            };
            match (fast, t.args.get(1).map(|a| eval(&ctx, &env, a))) {
                (Some(is_filter), Some(Ok(Val::Func(f)))) => {
                    if is_filter {
                        Step::Filter(f)
                    } else {
                        Step::Map(f)
                    }
                }
                _ => Step::Term(t),
            }
        })
        .collect();
    Some(Arc::new(move |d: &Datum| {
        let mut cur = d.clone();
        for step in &steps {
            let t = match step {
                Step::Filter(f) => {
                    let f = Val::Func(f.clone());
                    let keep = crate::terms::seq::apply(&ctx, &f, cur.clone()).ok()?;
                    if !keep.truthy() {
                        return None;
                    }
                    continue;
                }
                Step::Map(f) => {
                    cur = crate::terms::seq::apply(&ctx, &Val::Func(f.clone()), cur).ok()?;
                    continue;
                }
                Step::Term(t) => t,
            };
            let mut args = Vec::with_capacity(t.args.len());
            args.push(Term::datum(Datum::array(vec![cur])));
            args.extend(t.args.iter().skip(1).cloned());
            let term = Term {
                tt: t.tt,
                args,
                optargs: t.optargs.clone(),
                datum: Datum::Null,
            };
            let v = eval(&ctx, &env, &term).ok()?;
            match to_datum(&ctx, v).ok()? {
                Datum::Array(a) if a.len() == 1 => cur = a.first()?.clone(),
                _ => return None,
            }
        }
        Some(cur)
    }))
}

/// CHANGES.
pub fn changes(ev: &Ev) -> Result<Val> {
    let opts = feed_opts(ev)?;
    let src = arg(ev.term, 0)?;
    let p = plan(ev, src).at(0)?;
    if opts.include_offsets {
        return Err(logic("Cannot include offsets for range subs."));
    }
    let transform = transform_of(ev, p.transforms);
    let waker = ev.ctx.feeds.with_info(|i| i.waker.clone());
    let sub = p.table.subscribe(Request {
        target: p.target,
        transform,
        options: opts.options,
        waker,
    })?;
    let probe = sub.probe();
    ev.ctx.feeds.with_info(|i| {
        i.kinds.push(p.kind);
        i.include_states |= opts.options.include_states;
        i.min_interval = i.min_interval.max(opts.min_interval);
        i.probes.push(probe);
    });
    let mut sub = sub;
    let stream =
        std::iter::from_fn(move || sub.next_doc().map(|r| r.map_err(|e| op_failed(e.message))));
    Ok(Val::Seq(Sequence {
        stream: Box::new(stream),
        is_array: false,
        table: None,
        infinite: true,
    }))
}

/// `union` of sequences when one is a feed: polls each in turn and never drops one
/// that has nothing right now (a feed's `None` means "not yet").
pub fn union(seqs: Vec<Sequence>) -> Sequence {
    let mut streams: Vec<DatumStream> = seqs.into_iter().map(|s| s.stream).collect();
    let mut next = 0usize;
    let stream = std::iter::from_fn(move || {
        let n = streams.len();
        for i in 0..n {
            let idx = (next + i) % n;
            if let Some(x) = streams.get_mut(idx).and_then(|s| s.next()) {
                next = (idx + 1) % n;
                return Some(x);
            }
        }
        None
    });
    Sequence {
        stream: Box::new(stream),
        is_array: false,
        table: None,
        infinite: true,
    }
}

/// True when `seq` is (or contains) a feed of this query.
pub fn is_feed(ctx: &QueryCtx, seq: &Sequence) -> bool {
    seq.infinite && ctx.feeds.active()
}

/// `limit(n)` on a feed: ends the feed (for the server) after `n` items.
pub fn limit(ctx: &QueryCtx, seq: Sequence, n: usize) -> Sequence {
    let Some(done) = ctx.feeds.info.lock().as_ref().map(|i| i.done.clone()) else {
        return seq;
    };
    if n == 0 {
        done.store(true, Ordering::SeqCst);
    }
    let is_array = seq.is_array;
    let mut inner = seq.stream;
    let mut count = 0usize;
    let stream = std::iter::from_fn(move || {
        if count >= n {
            done.store(true, Ordering::SeqCst);
            return None;
        }
        let x = inner.next()?;
        count += 1;
        if count >= n {
            done.store(true, Ordering::SeqCst);
        }
        Some(x)
    });
    Sequence {
        stream: Box::new(stream),
        is_array,
        table: None,
        infinite: true,
    }
}
