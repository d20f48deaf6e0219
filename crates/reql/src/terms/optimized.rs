//! The query optimizer's shell: reads the catalog facts and statistics `crate::optimize`
//! plans with, runs the plan it picks, and records what ran (`PlanLog`, shown by
//! `profile: true`).
//!
//! - `filter` on a whole table (not a slice, never a changefeed: `terms::changes` plans
//!   its own terms and never evaluates this) is answered from the primary key or from the
//!   secondary index whose range is smallest, when that range holds at most half the
//!   table and no more than the array limit. A secondary index yields documents in index
//!   order: they are collected, de-duplicated (a multi index yields a document once per
//!   matching element) and sorted back into primary-key order, the order of the scan
//!   they replace. The whole original predicate is applied to each, so the index only
//!   has to yield a superset (`crate::optimize`).
//! - `order_by(field)` (with or without `limit`), `min(field)` and `max(field)` on a
//!   whole table are read from a simple index on the field when its entry count (kept
//!   up to date by every write) equals the table's document count: then every document
//!   has the field with an indexable value, and index order (value, then primary key)
//!   is the order `order_by` sorts into. Ties of a descending order are put back into
//!   primary-key order, as the stable sort has them.
//!
//! Departure from RethinkDB: `order_by(field).limit(n)` served from an index does not
//! read the whole table, so on a table larger than the array limit it answers where
//! RethinkDB (and Ponder with the optimizer off) fails with the array size error.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Instant;

use datum::Datum;
use parking_lot::Mutex;
use proto::ql2::TermType as T;

use crate::access::Table;
use crate::ctx::QueryCtx;
use crate::error::Result;
use crate::eval::Ev;
use crate::optimize::{self, Candidate, IndexFact, Source};
use crate::term::Term;
use crate::value::{DatumStream, Sequence, Val};

/// One step of a query's plan, for the profile.
pub struct PlanNote {
    /// What ran.
    pub description: String,
    /// Documents read so far.
    pub read: Arc<AtomicU64>,
    /// Time spent planning and (for plans that collect) reading, in milliseconds.
    pub ms: f64,
}

/// The plan steps of one query, in the order they ran (bounded: later ones are dropped).
#[derive(Default)]
pub struct PlanLog {
    notes: Mutex<Vec<PlanNote>>,
}

/// The most plan steps a query records.
const MAX_NOTES: usize = 64;

impl PlanLog {
    fn push(&self, description: String, ms: f64) -> Arc<AtomicU64> {
        let read = Arc::new(AtomicU64::new(0));
        let mut g = self.notes.lock();
        if g.len() < MAX_NOTES {
            g.push(PlanNote {
                description,
                read: read.clone(),
                ms,
            });
        }
        read
    }

    /// Each step's description (ending with the documents it has read) and duration.
    pub fn snapshot(&self) -> Vec<(String, f64)> {
        self.notes
            .lock()
            .iter()
            .map(|n| {
                let read = n.read.load(AtomicOrdering::Relaxed);
                (
                    format!(
                        "{}, {} document{} read.",
                        n.description,
                        thousands(read),
                        if read == 1 { "" } else { "s" }
                    ),
                    n.ms,
                )
            })
            .collect()
    }
}

/// `1204` as `1,204`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn counted(stream: DatumStream, read: Arc<AtomicU64>) -> DatumStream {
    Box::new(stream.inspect(move |d| {
        if d.is_ok() {
            read.fetch_add(1, AtomicOrdering::Relaxed);
        }
    }))
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The indexes the optimizer may read: ready, not geospatial, of a known shape, with
/// their statistics (`Table::index_statistics`, which may cost a round of requests: read
/// once per plan and passed along). None for system tables (`rethinkdb.*`, computed rows
/// without ranges), and when the list cannot be read (the scan then reports what is
/// wrong).
fn facts(t: &Arc<dyn Table>) -> Result<Vec<IndexFact>> {
    if t.db() == "rethinkdb" {
        return Ok(Vec::new());
    }
    Ok(t.index_statistics()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.ready && !s.spec.geo)
        .filter_map(|s| {
            Some(IndexFact {
                shape: optimize::index_shape(&s.spec.function)?,
                name: s.name,
                multi: s.spec.multi,
                entries: s.entries,
                unkeyed: s.unkeyed,
            })
        })
        .collect())
}

fn table_name(t: &Arc<dyn Table>) -> String {
    format!("`{}.{}`", t.db(), t.name())
}

/// The documents `filter` tests, for a filter over the whole table `t`: an index plan's
/// superset in primary-key order, or the table scan. Either way counted in the plan log.
pub fn filter_source(ev: &Ev, t: &Arc<dyn Table>) -> Result<Sequence> {
    let began = Instant::now();
    let stream = if ev.ctx.optimizer {
        plan_filter(ev, t, began)?
    } else {
        None
    };
    let stream = match stream {
        Some(s) => s,
        None => {
            let why = if ev.ctx.optimizer {
                ""
            } else {
                " (optimizer off)"
            };
            let read = ev.ctx.plans.push(
                format!("Table scan of {}{why}", table_name(t)),
                ms_since(began),
            );
            counted(t.scan(Bound::Unbounded, Bound::Unbounded, false)?, read)
        }
    };
    Ok(Sequence {
        stream,
        is_array: false,
        table: Some(t.clone()),
        infinite: false,
    })
}

/// Whether `filter`'s `default` keeps a document lacking a field out (none, or a
/// constant that is not truthy); only then may an index, which lacks such documents,
/// answer it.
fn default_drops_missing(term: &Term) -> bool {
    match term.optarg("default") {
        None => true,
        Some(d) => d.tt == T::DATUM && !d.datum.truthy(),
    }
}

/// Every candidate plan of `filter` term `filter` over the whole table `t` (none with
/// the optimizer off or outside the planner's language), with the index facts they
/// were planned from.
fn filter_candidates(
    ctx: &QueryCtx,
    filter: &Term,
    t: &Arc<dyn Table>,
) -> Result<(Vec<Candidate>, Vec<IndexFact>)> {
    if !ctx.optimizer || t.db() == "rethinkdb" || !default_drops_missing(filter) {
        return Ok((Vec::new(), Vec::new()));
    }
    let Some(analysis) = filter.args.get(1).and_then(|p| optimize::analyze(p)) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let facts = facts(t)?;
    let cands = optimize::candidates(&analysis, t.primary_key(), &facts);
    Ok((cands, facts))
}

/// The entries (documents, for the primary key) in a candidate's ranges, counting no
/// further than `cap` (an answer of `cap` or more means "at least `cap`").
fn entries_in(t: &Arc<dyn Table>, c: &Candidate, cap: u64) -> Result<u64> {
    match &c.source {
        Source::Primary => sum_ranges(&c.ranges, |lo, hi| t.count_range(lo, hi)),
        Source::Index { name, .. } => {
            let mut n = 0u64;
            for r in &c.ranges {
                let left = cap.saturating_sub(n);
                if left == 0 {
                    break;
                }
                n = n.saturating_add(t.index_count_upto(name, r.lo.clone(), r.hi.clone(), left)?);
            }
            Ok(n)
        }
    }
}

/// The candidate with the fewest entries in its ranges, with that number. A secondary
/// index is a plan only below `cap` entries (past that the scan is cheaper); the primary
/// key always is (its ranges are a part of the scan). Each count stops at the best so
/// far, so the cost of choosing is bounded by the cheapest plan's, not the widest's;
/// candidates whose index holds fewer entries overall (a count every write keeps) are
/// counted first, so that a selective one bounds the rest early.
fn cheapest(
    t: &Arc<dyn Table>,
    mut cands: Vec<Candidate>,
    facts: &[IndexFact],
    cap: u64,
) -> Result<Option<(u64, Candidate)>> {
    let total = |c: &Candidate| match &c.source {
        Source::Primary => 0,
        Source::Index { name, .. } => facts
            .iter()
            .find(|f| f.name == *name)
            .and_then(|f| f.entries)
            .unwrap_or(u64::MAX),
    };
    cands.sort_by_key(total);
    let mut best: Option<(u64, Candidate)> = None;
    for c in cands {
        let best_est = best.as_ref().map(|(b, _)| *b);
        if c.source == Source::Primary {
            let est = entries_in(t, &c, u64::MAX)?;
            if best_est.is_none_or(|b| est < b) {
                best = Some((est, c));
            }
            continue;
        }
        let bound = best_est.map_or(cap, |b| b.min(cap));
        if bound == 0 {
            continue;
        }
        let est = entries_in(t, &c, bound)?;
        if est < bound {
            best = Some((est, c));
        }
    }
    Ok(best)
}

/// The plan `filter` term `filter` over the whole table `t` would run: the candidate
/// read, or `None` for the table scan. Reads index keys for the estimates, no document.
pub fn choose_filter(
    ctx: &QueryCtx,
    filter: &Term,
    t: &Arc<dyn Table>,
) -> Result<Option<Candidate>> {
    let (mut cands, facts) = filter_candidates(ctx, filter, t)?;
    if cands.len() <= 1 && cands.first().is_some_and(|c| c.source == Source::Primary) {
        // Alone, the primary key needs no estimate: its ranges are a part of the scan.
        return Ok(cands.pop());
    }
    if cands.is_empty() {
        return Ok(None);
    }
    // Not selective past this: the scan reads each document once, in order already.
    let cap = (t.count()? / 2)
        .min(ctx.array_limit as u64)
        .saturating_add(1);
    Ok(cheapest(t, cands, &facts, cap)?.map(|(_, c)| c))
}

fn plan_filter(ev: &Ev, t: &Arc<dyn Table>, began: Instant) -> Result<Option<DatumStream>> {
    let Some(chosen) = choose_filter(ev.ctx, ev.term, t)? else {
        return Ok(None);
    };
    let described = optimize::describe_ranges(&chosen.ranges);
    match &chosen.source {
        Source::Primary => {
            let read = ev.ctx.plans.push(
                format!(
                    "Optimizer: primary key `{}` of {}, {described}",
                    t.primary_key(),
                    table_name(t)
                ),
                ms_since(began),
            );
            Ok(Some(counted(primary_ranges(t, &chosen.ranges)?, read)))
        }
        Source::Index { name, multi } => {
            let limit = ev.ctx.array_limit as u64;
            let pk = t.primary_key().to_string();
            let mut found: Vec<(Datum, Datum)> = Vec::new();
            let mut read = 0u64;
            for r in &chosen.ranges {
                for d in t.index_scan(name, r.lo.clone(), r.hi.clone(), false)? {
                    let d = d?;
                    read += 1;
                    if read > limit {
                        // The estimate was stale (writes since): scan instead.
                        return Ok(None);
                    }
                    found.push((d.get(&pk).cloned().unwrap_or(Datum::Null), d));
                }
            }
            found.sort_by(|a, b| a.0.cmp(&b.0));
            if *multi || chosen.ranges.len() > 1 {
                found.dedup_by(|a, b| a.0 == b.0);
            }
            let note = ev.ctx.plans.push(
                format!(
                    "Optimizer: index `{name}` of {}, {described}",
                    table_name(t)
                ),
                ms_since(began),
            );
            note.store(read, AtomicOrdering::Relaxed);
            let docs: Vec<Datum> = found.into_iter().map(|(_, d)| d).collect();
            Ok(Some(Sequence::from_vec(docs).stream))
        }
    }
}

/// True when the aggregation `term` over the whole table `t` is better answered by the
/// optimizer than in parallel ranges (`crate::parallel`): a `min`/`max` of a field an
/// index orders, a `count()` of a `filter` counted from index keys (`count_filter`), or
/// a chain whose first step is a `filter` an index answers.
pub fn preempts_parallel(ctx: &QueryCtx, term: &Term, t: &Arc<dyn Table>) -> Result<bool> {
    if !ctx.optimizer {
        return Ok(false);
    }
    if let Some(filter) = counted_filter(term) {
        if filter.args.first().is_some_and(|a| a.tt == T::TABLE)
            && filter_candidates(ctx, filter, t)?.0.iter().any(|c| c.exact)
        {
            return Ok(true);
        }
    }
    if matches!(term.tt, T::MIN | T::MAX) && term.args.len() == 2 {
        let field = term
            .args
            .get(1)
            .filter(|a| a.tt == T::DATUM)
            .and_then(|a| a.datum.as_str());
        if let (Some(f), Some(T::TABLE)) = (field, term.args.first().map(|a| a.tt)) {
            if order_source(t, f)?.is_some() {
                return Ok(true);
            }
        }
    }
    let mut cur = term;
    while let Some(a) = cur.args.first() {
        if a.tt == T::TABLE {
            return Ok(cur.tt == T::FILTER && choose_filter(ctx, cur, t)?.is_some());
        }
        cur = a;
    }
    Ok(false)
}

fn sum_ranges(
    ranges: &optimize::Set,
    mut count: impl FnMut(Bound<Datum>, Bound<Datum>) -> Result<u64>,
) -> Result<u64> {
    let mut n = 0u64;
    for r in ranges {
        n = n.saturating_add(count(r.lo.clone(), r.hi.clone())?);
    }
    Ok(n)
}

/// The documents of disjoint ascending primary-key ranges, in order, lazily.
fn primary_ranges(t: &Arc<dyn Table>, ranges: &optimize::Set) -> Result<DatumStream> {
    let mut parts: Vec<DatumStream> = Vec::with_capacity(ranges.len());
    for r in ranges {
        parts.push(t.scan(r.lo.clone(), r.hi.clone(), false)?);
    }
    Ok(Box::new(parts.into_iter().flatten()))
}

/// `(field, descending)` of an `order_by` term with one key that is a field name.
fn order_key(order_by: &Term) -> Option<(String, bool)> {
    if order_by.tt != T::ORDER_BY || order_by.args.len() != 2 || !order_by.optargs.is_empty() {
        return None;
    }
    let k = order_by.args.get(1)?;
    let (desc, inner) = match k.tt {
        T::DESC => (true, k.args.first()?),
        T::ASC => (false, k.args.first()?),
        _ => (false, k),
    };
    (inner.tt == T::DATUM)
        .then(|| inner.datum.as_str().map(|s| (s.to_string(), desc)))
        .flatten()
}

/// The whole table a term names, when it is a plain `table` term.
fn plain_table(ev: &Ev, t: &Term) -> Result<Option<Arc<dyn Table>>> {
    if t.tt != T::TABLE {
        return Ok(None);
    }
    match crate::eval::eval(ev.ctx, ev.env, t)? {
        Val::Table(t) if t.slice().is_none() => Ok(Some(t)),
        _ => Ok(None),
    }
}

/// The index that sorts `t` by `field` as `order_by` does (see the module note).
fn order_source(t: &Arc<dyn Table>, field: &str) -> Result<Option<String>> {
    let docs = t.count()?;
    let facts = facts(t)?;
    Ok(optimize::order_index(field, docs, &facts).map(|f| f.name.clone()))
}

/// `order_by` of the term `order_by` (one field key, no index) on a whole table, the
/// first `limit` documents (all of them, within the array limit, without): read from an
/// index, or `None` to sort as usual.
fn order_by(ev: &Ev, order_by: &Term, limit: Option<usize>) -> Result<Option<Val>> {
    if !ev.ctx.optimizer {
        return Ok(None);
    }
    let Some((field, desc)) = order_key(order_by) else {
        return Ok(None);
    };
    let Some(table_term) = order_by.args.first() else {
        return Ok(None);
    };
    let began = Instant::now();
    let Some(t) = plain_table(ev, table_term)? else {
        return Ok(None);
    };
    let Some(name) = order_source(&t, &field)? else {
        return Ok(None);
    };
    let cap = ev.ctx.array_limit;
    let want = match limit {
        Some(n) => n,
        // Without a limit the whole table becomes an array: over the limit, fail as usual.
        None if t.count()? > cap as u64 => return Ok(None),
        None => cap,
    };
    let pk = t.primary_key().to_string();
    let mut docs: Vec<Datum> = Vec::new();
    let mut read = 0u64;
    if want > 0 {
        let stream = t.index_scan(&name, Bound::Unbounded, Bound::Unbounded, desc)?;
        let mut last: Option<Datum> = None;
        for d in stream {
            // Past `want`, read on only through the tie with the last one kept (a
            // descending order puts ties back into primary-key order below); an
            // ascending read stops at once, without decoding a document's fields.
            if docs.len() >= want && !desc {
                break;
            }
            let d = d?;
            if desc {
                let v = d.get(&field).cloned().unwrap_or(Datum::Null);
                if docs.len() >= want && last.as_ref() != Some(&v) {
                    break;
                }
                last = Some(v);
            }
            read += 1;
            if docs.len() >= cap {
                return Ok(None);
            }
            docs.push(d);
        }
        if desc {
            let key = |d: &Datum| (d.get(&field).cloned(), d.get(&pk).cloned());
            docs.sort_by(|a, b| {
                let (va, pa) = key(a);
                let (vb, pb) = key(b);
                vb.cmp(&va).then(pa.cmp(&pb))
            });
            docs.truncate(want);
        }
    }
    let what = match limit {
        Some(n) => format!("order_by(`{field}`).limit({n})"),
        None => format!("order_by(`{field}`)"),
    };
    let note = ev.ctx.plans.push(
        format!(
            "Optimizer: {what} of {} from index `{name}`{}",
            table_name(&t),
            if desc { " (descending)" } else { "" }
        ),
        ms_since(began),
    );
    note.store(read, AtomicOrdering::Relaxed);
    let mut s = Sequence::from_vec(docs);
    s.table = Some(t);
    Ok(Some(Val::Seq(s)))
}

/// Terms the optimizer answers before their argument 0 is evaluated (which would read
/// the table): `order_by(field)`, `order_by(field).limit(n)`, `min`/`max(field)` of a
/// whole table. `None`: evaluate as usual.
pub fn before_arg0(ev: &Ev) -> Result<Option<Val>> {
    if !ev.ctx.optimizer {
        return Ok(None);
    }
    match ev.term.tt {
        T::ORDER_BY => order_by(ev, ev.term, None),
        T::LIMIT if ev.nargs() == 2 => {
            let Some(inner) = ev.term.args.first() else {
                return Ok(None);
            };
            let on_table = inner.args.first().is_some_and(|a| a.tt == T::TABLE);
            if order_key(inner).is_none() || !on_table {
                return Ok(None);
            }
            let n = crate::terms::seq::non_negative(ev, 1, "LIMIT")?;
            order_by(ev, inner, Some(n))
        }
        T::MIN | T::MAX => min_max(ev),
        T::COUNT => count_filter(ev),
        _ => Ok(None),
    }
}

/// The `filter` term of a `count()` term without a predicate (`filter(...).count()`).
fn counted_filter(count: &Term) -> Option<&Term> {
    if count.tt != T::COUNT || count.args.len() != 1 || !count.optargs.is_empty() {
        return None;
    }
    count
        .args
        .first()
        .map(|f| &**f)
        .filter(|f| f.tt == T::FILTER)
}

/// `table.filter(pred).count()` from index keys alone, when a plan reads exactly the
/// matching documents once each (`Candidate::exact`): then the number of entries in its
/// ranges is the answer, and no document is read. Entries holding a truncated value are
/// checked against the range with their whole value (`Table::index_count`). The
/// cheapest exact plan is taken however many entries it holds: counting keys is cheaper
/// than reading documents. `None`: count as usual (maybe from an index plan).
fn count_filter(ev: &Ev) -> Result<Option<Val>> {
    let Some(filter) = counted_filter(ev.term) else {
        return Ok(None);
    };
    let Some(table_term) = filter.args.first() else {
        return Ok(None);
    };
    let began = Instant::now();
    let Some(t) = plain_table(ev, table_term)? else {
        return Ok(None);
    };
    let (cands, facts) = filter_candidates(ev.ctx, filter, &t)?;
    let exact: Vec<Candidate> = cands.into_iter().filter(|c| c.exact).collect();
    let Some((n, chosen)) = cheapest(&t, exact, &facts, u64::MAX)? else {
        return Ok(None);
    };
    let what = match &chosen.source {
        Source::Primary => format!("primary key `{}`", t.primary_key()),
        Source::Index { name, .. } => format!("index `{name}`"),
    };
    ev.ctx.plans.push(
        format!(
            "Optimizer: count() of {what} of {}, {}, counted from index keys",
            table_name(&t),
            optimize::describe_ranges(&chosen.ranges)
        ),
        ms_since(began),
    );
    Ok(Some(Val::Datum(Datum::Number(n as f64))))
}

/// `min(field)`/`max(field)` on a whole table from an index (see the module note), or
/// `None` to fold as usual. Of equal values the one first in primary-key order wins,
/// as in the fold.
fn min_max(ev: &Ev) -> Result<Option<Val>> {
    if !ev.ctx.optimizer || ev.nargs() != 2 || !ev.term.optargs.is_empty() {
        return Ok(None);
    }
    let Some(field) = ev
        .term
        .args
        .get(1)
        .filter(|a| a.tt == T::DATUM)
        .and_then(|a| a.datum.as_str())
    else {
        return Ok(None);
    };
    let Some(table_term) = ev.term.args.first() else {
        return Ok(None);
    };
    let began = Instant::now();
    let Some(t) = plain_table(ev, table_term)? else {
        return Ok(None);
    };
    let Some(name) = order_source(&t, field)? else {
        return Ok(None);
    };
    let max = ev.term.tt == T::MAX;
    let mut read = 0u64;
    let Some(first) = t
        .index_scan(&name, Bound::Unbounded, Bound::Unbounded, max)?
        .next()
        .transpose()?
    else {
        // An empty table: the fold's error.
        return Ok(None);
    };
    read += 1;
    let doc = if max {
        // The first of the largest values in primary-key order.
        let v = first.get(field).cloned().unwrap_or(Datum::Null);
        read += 1;
        t.index_scan(&name, Bound::Included(v.clone()), Bound::Included(v), false)?
            .next()
            .transpose()?
            .unwrap_or(first)
    } else {
        first
    };
    let note = ev.ctx.plans.push(
        format!(
            "Optimizer: {}(`{field}`) of {} from index `{name}`",
            if max { "max" } else { "min" },
            table_name(&t)
        ),
        ms_since(began),
    );
    note.store(read, AtomicOrdering::Relaxed);
    Ok(Some(Val::Datum(doc)))
}
