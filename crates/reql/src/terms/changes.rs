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
//! `get_all`/`between` on a secondary index subscribe to the whole table with a
//! pre-filter that evaluates the index function on each changed document (an entry of a
//! multi index matches when any of its values does). Top-n feeds
//! (`order_by(index=).limit(n)`, `min`/`max(index=)`) live in `changes_limit`.

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
use crate::terms::changes_limit::{LimitOpts, LimitSpec};
use crate::value::{DatumStream, Func, Sequence, Val};

/// RethinkDB's error for terminals (`order_by`, `count`, ...) on a feed.
pub const TERMINAL_ON_FEED: &str =
    "Cannot call a terminal (`reduce`, `count`, etc.) on an infinite stream (such as a changefeed).";

/// The kind of one feed, which decides the response note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedKind {
    /// `get(...).changes()`.
    Point,
    /// `order_by(index=).limit(n).changes()` and `min`/`max(index=)`.
    Limit,
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
            [FeedKind::Limit] => ResponseNote::ORDER_BY_LIMIT_FEED,
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
    /// Keeps only documents of a secondary-index selection.
    prefilter: Option<Prefilter>,
}

/// A membership test on documents (secondary-index `get_all`/`between`).
type Prefilter = Arc<dyn Fn(&Datum) -> bool + Send + Sync>;

/// The documents of `table` whose values in index `name` satisfy `pred`.
fn index_prefilter(
    table: &Arc<dyn Table>,
    name: &str,
    pred: impl Fn(&Datum) -> bool + Send + Sync + 'static,
) -> Result<Prefilter> {
    let st = table.index_status()?;
    let Some(s) = st.iter().find(|s| s.name == name) else {
        return Err(crate::access::index_not_found(
            name,
            table.db(),
            table.name(),
        ));
    };
    let multi = s.spec.multi;
    let f = crate::terms::index::IndexFunction::compile(&s.spec.function)?;
    Ok(Arc::new(move |d: &Datum| match f.eval(d) {
        Ok(Datum::Array(a)) if multi => a.iter().any(&pred),
        Ok(v) => pred(&v),
        Err(_) => false,
    }))
}

fn bounds_pred(lower: Bound<Datum>, upper: Bound<Datum>) -> impl Fn(&Datum) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    move |v: &Datum| {
        let lo = match &lower {
            Bound::Unbounded => true,
            Bound::Included(b) => datum::cmp(v, b) != Less,
            Bound::Excluded(b) => datum::cmp(v, b) == Greater,
        };
        let hi = match &upper {
            Bound::Unbounded => true,
            Bound::Included(b) => datum::cmp(v, b) != Greater,
            Bound::Excluded(b) => datum::cmp(v, b) == Less,
        };
        lo && hi
    }
}

fn whole() -> Target {
    Target::Range {
        lower: Bound::Unbounded,
        upper: Bound::Unbounded,
    }
}

/// The secondary index named by `term`'s `index` optarg (`None` for the primary key).
fn secondary(ev: &Ev, t: &Arc<dyn Table>, term: &Term) -> Result<Option<String>> {
    let Some(idx) = term.optarg("index") else {
        return Ok(None);
    };
    match datum_of(ev, idx)? {
        Datum::String(s) if &*s == t.primary_key() => Ok(None),
        Datum::String(s) => Ok(Some(s.to_string())),
        d => Err(logic(format!(
            "Expected type STRING but found {}.",
            d.type_name()
        ))),
    }
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

/// A bound optarg of `term` (not the term being evaluated): true when closed.
fn bound(ev: &Ev, term: &Term, name: &str, default_closed: bool) -> Result<bool> {
    match term.optarg(name) {
        None => Ok(default_closed),
        Some(t) => Ok(!crate::eval::open_bound(name, &datum_of(ev, t)?)?),
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
    let planned = matches!(
        t.tt,
        T::GET
            | T::GET_ALL
            | T::BETWEEN
            | T::FILTER
            | T::PLUCK
            | T::WITH_FIELDS
            | T::WITHOUT
            | T::MERGE
            | T::HAS_FIELDS
            | T::MAP
    );
    if planned && t.args.iter().any(|a| a.tt == T::ARGS) {
        // The plan reads the arguments one by one: splice `r.args` in first (and check
        // the count, as evaluating the term would).
        let expanded = crate::eval::expand_args(ev.ctx, ev.env, t)?;
        return plan(ev, &Arc::new(expanded));
    }
    match t.tt {
        T::GET => {
            let table = table_of(ev, arg(t, 0)?)?;
            let key = primary_key(datum_of(ev, arg(t, 1)?)?)?;
            Ok(Plan {
                table,
                target: Target::Keys(vec![key]),
                kind: FeedKind::Point,
                transforms: Vec::new(),
                prefilter: None,
            })
        }
        T::GET_ALL => {
            let table = table_of(ev, arg(t, 0)?)?;
            if let Some(name) = secondary(ev, &table, t)? {
                let mut keys = Vec::new();
                for a in t.args.iter().skip(1) {
                    keys.push(datum_of(ev, a)?);
                }
                let prefilter = index_prefilter(&table, &name, move |v| keys.contains(v))?;
                return Ok(Plan {
                    table,
                    target: whole(),
                    kind: FeedKind::Stream,
                    transforms: Vec::new(),
                    prefilter: Some(prefilter),
                });
            }
            let mut keys = Vec::new();
            for a in t.args.iter().skip(1) {
                keys.push(primary_key(datum_of(ev, a)?)?);
            }
            Ok(Plan {
                table,
                target: Target::Keys(keys),
                kind: FeedKind::Stream,
                transforms: Vec::new(),
                prefilter: None,
            })
        }
        T::BETWEEN => {
            let table = table_of(ev, arg(t, 0)?)?;
            let index = secondary(ev, &table, t)?;
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
            if let Some(name) = index {
                let prefilter = index_prefilter(&table, &name, bounds_pred(lower, upper))?;
                return Ok(Plan {
                    table,
                    target: whole(),
                    kind: FeedKind::Stream,
                    transforms: Vec::new(),
                    prefilter: Some(prefilter),
                });
            }
            Ok(Plan {
                table,
                target: Target::Range { lower, upper },
                kind: FeedKind::Stream,
                transforms: Vec::new(),
                prefilter: None,
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
                    if s.order.is_some() {
                        return Err(logic(
                            "Cannot call `changes` on an `order_by` without a `limit`.",
                        ));
                    }
                    if let Some(name) = &s.index {
                        let pred = bounds_pred(s.lower.clone(), s.upper.clone());
                        let prefilter = index_prefilter(&s.base, name, pred)?;
                        return Ok(Plan {
                            table: s.base.clone(),
                            target: whole(),
                            kind: FeedKind::Stream,
                            transforms: Vec::new(),
                            prefilter: Some(prefilter),
                        });
                    }
                    return Ok(Plan {
                        table: s.base.clone(),
                        target: Target::Range {
                            lower: s.lower.clone(),
                            upper: s.upper.clone(),
                        },
                        kind: FeedKind::Stream,
                        transforms: Vec::new(),
                        prefilter: None,
                    });
                }
                Ok(Plan {
                    table,
                    target: whole(),
                    kind: FeedKind::Stream,
                    transforms: Vec::new(),
                    prefilter: None,
                })
            }
            Val::Single(s) => Ok(Plan {
                table: s.table,
                target: Target::Keys(vec![s.key]),
                kind: FeedKind::Point,
                transforms: Vec::new(),
                prefilter: None,
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
    Filter(crate::terms::seq::Predicate),
    /// `map` with a function.
    Map(Func),
    /// Any other per-document term, re-evaluated on `[doc]`.
    Term(Arc<Term>),
}

/// Re-evaluates the transformation terms on one document.
fn transform_of(ev: &Ev, terms: Vec<Arc<Term>>, prefilter: Option<Prefilter>) -> Option<Transform> {
    if terms.is_empty() {
        let pf = prefilter?;
        return Some(Arc::new(move |d: &Datum| pf(d).then(|| d.clone())));
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
                        Step::Filter(crate::terms::seq::Predicate::of_func(f))
                    } else {
                        Step::Map(f)
                    }
                }
                _ => Step::Term(t),
            }
        })
        .collect();
    Some(Arc::new(move |d: &Datum| {
        if let Some(pf) = &prefilter {
            if !pf(d) {
                return None;
            }
        }
        let mut cur = d.clone();
        for step in &steps {
            let t = match step {
                Step::Filter(p) => {
                    // As `filter` without `default`: an error (a missing field) drops
                    // the change.
                    let keep = p.test(&ctx, &cur).ok()?;
                    if !keep {
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
                path: t.path.clone(),
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
    if let Some(spec) = limit_spec(ev, src).at(0)? {
        return open_limit(ev, spec, &opts);
    }
    let p = plan(ev, src).at(0)?;
    if opts.include_offsets {
        return Err(logic("Cannot include offsets for range subs."));
    }
    let hint = crate::terms::changes_hint::eq_hint(&p.transforms);
    let transform = transform_of(ev, p.transforms, p.prefilter);
    let waker = ev.ctx.feeds.with_info(|i| i.waker.clone());
    let sub = p.table.subscribe(Request {
        target: p.target,
        transform,
        hint,
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

/// The top-n feed `src` describes: `order_by(index=).limit(n)` or `min`/`max(index=)`.
fn limit_spec(ev: &Ev, src: &Arc<Term>) -> Result<Option<LimitSpec>> {
    match src.tt {
        T::LIMIT => {
            let inner = arg(src, 0)?;
            if inner.tt != T::ORDER_BY || inner.optarg("index").is_none() || inner.args.len() != 1 {
                return Ok(None);
            }
            let Val::Table(t) = eval(ev.ctx, ev.env, inner)? else {
                return Ok(None);
            };
            let Some(s) = t.slice() else {
                return Ok(None);
            };
            let Some(desc) = s.order else {
                return Ok(None);
            };
            let n = crate::eval::expect_int(&datum_of(ev, arg(src, 1)?)?).at(1)?;
            if n < 0 {
                return Err(logic("LIMIT takes a non-negative argument (got -1)"));
            }
            Ok(Some(LimitSpec {
                table: s.base.clone(),
                index: s.index.clone(),
                lower: s.lower.clone(),
                upper: s.upper.clone(),
                desc,
                n: usize::try_from(n).unwrap_or(usize::MAX),
            }))
        }
        T::MIN | T::MAX if src.optarg("index").is_some() && src.args.len() == 1 => {
            let table = table_of(ev, arg(src, 0)?)?;
            let (base, lower, upper) = match table.slice() {
                Some(s) => (s.base.clone(), s.lower.clone(), s.upper.clone()),
                None => (table.clone(), Bound::Unbounded, Bound::Unbounded),
            };
            let index = secondary(ev, &base, src)?;
            Ok(Some(LimitSpec {
                table: base,
                index,
                lower,
                upper,
                desc: src.tt == T::MAX,
                n: 1,
            }))
        }
        _ => Ok(None),
    }
}

fn open_limit(ev: &Ev, spec: LimitSpec, opts: &FeedOpts) -> Result<Val> {
    let waker = ev.ctx.feeds.with_info(|i| i.waker.clone());
    let o = &opts.options;
    let lopts = LimitOpts {
        include_initial: o.include_initial,
        include_states: o.include_states,
        include_types: o.include_types,
        include_offsets: opts.include_offsets,
        queue_size: o.queue_size,
    };
    let (seq, probe) = crate::terms::changes_limit::open(spec, lopts, waker)?;
    ev.ctx.feeds.with_info(|i| {
        i.kinds.push(FeedKind::Limit);
        i.include_states |= o.include_states;
        i.min_interval = i.min_interval.max(opts.min_interval);
        i.probes.push(probe);
    });
    Ok(Val::Seq(seq))
}

/// RethinkDB's error for an aggregation over an infinite stream: the changefeed text
/// for a feed, the generic one otherwise (`r.range()`).
pub fn infinite_error(ctx: &QueryCtx) -> crate::error::ReqlError {
    if ctx.feeds.active() {
        logic(TERMINAL_ON_FEED)
    } else {
        logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array.")
    }
}

/// `skip(n)` on a feed: drops the first `n` items delivered (a poll that finds nothing
/// queued is not an item).
pub fn skip(seq: Sequence, n: usize) -> Sequence {
    let mut inner = seq.stream;
    let mut left = n;
    let stream = std::iter::from_fn(move || loop {
        let x = inner.next()?;
        if left == 0 {
            return Some(x);
        }
        if x.is_err() {
            return Some(x);
        }
        left -= 1;
    });
    Sequence {
        stream: Box::new(stream),
        ..seq
    }
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
