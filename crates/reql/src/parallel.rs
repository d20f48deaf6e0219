//! Aggregations over a table in parallel key ranges.
//!
//! `count`, `sum`, `avg`, `min`, `max` and `reduce` over a chain of `map`, `filter`,
//! `concat_map`, `pluck`, `without`, `has_fields`, `with_fields` and field reads that
//! starts at a table are run once per primary-key range of the table, on their own
//! threads, and the partial results merged. The ranges come from `Table::split_points`
//! (about equal numbers of documents; none for a small table, which then runs as
//! before), one per core.
//!
//! Rules that keep the result the sequential one:
//! - every argument other than the chain must be deterministic (`write::is_deterministic`:
//!   no table reads, no randomness, no JavaScript or HTTP);
//! - each range evaluates the very same term with the table replaced by a variable bound
//!   to that range (a `TableSlice` over the table as the query opened it, so permission
//!   and interruption checks apply), so backtraces are the same too;
//! - an error in a range fails the query with the error of the lowest range, which is the
//!   one a sequential scan would have met first; `min`, `max` and `reduce` of an empty
//!   range are skipped, and the partial results merged by the same term over the array
//!   of partials (ties go to the lowest range, as they would in key order).
//!   Floating-point sums may differ in the last bits from a sequential sum (RethinkDB's
//!   shards merge partial sums too).

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::error::{ErrorKind, ReqlError, Result};
use crate::eval::{eval, to_datum, Ev};
use crate::slice::TableSlice;
use crate::term::Term;
use crate::terms::write::is_deterministic;
use crate::value::Val;

/// Tables smaller than this are aggregated on the calling thread.
pub const MIN_DOCS: u64 = 20_000;

/// The variable that stands for one range (far from the ids drivers generate).
const RANGE_VAR: i64 = -7_340_033;

/// Runs the aggregation `ev.term` in parallel ranges when it qualifies (see the module
/// note); `None` when it does not, and the caller evaluates it as usual.
pub fn aggregate(ev: &Ev) -> Result<Option<Val>> {
    let term = ev.term;
    if !matches!(
        term.tt,
        T::COUNT | T::SUM | T::AVG | T::MIN | T::MAX | T::REDUCE
    ) || !term.optargs.is_empty()
    {
        return Ok(None);
    }
    // The cheap test first: this runs for every aggregation, per document too.
    let Some(Source {
        table: source,
        grouped,
    }) = term.args.first().and_then(|a| table_source(a, false))
    else {
        return Ok(None);
    };
    // A plain `table.count()` is answered by the store without a scan.
    let plain_count = term.tt == T::COUNT && term.args.len() == 1 && !grouped;
    if plain_count && term.args.first().is_some_and(|a| a.tt == T::TABLE) {
        return Ok(None);
    }
    if !term.args.iter().skip(1).all(|a| is_deterministic(a)) {
        return Ok(None);
    }
    let table = match eval(ev.ctx, ev.env, source)? {
        Val::Table(t) if t.slice().is_none() => t,
        _ => return Ok(None),
    };
    let parts = std::thread::available_parallelism().map_or(1, usize::from);
    if parts < 2 || table.count()? < MIN_DOCS {
        return Ok(None);
    }
    // An index answers it reading a fraction of the table (`terms::optimized`).
    if crate::terms::optimized::preempts_parallel(ev.ctx, term, &table)? {
        return Ok(None);
    }
    let cuts = table.split_points(parts)?;
    if cuts.is_empty() {
        return Ok(None);
    }
    let var = Term {
        tt: T::VAR,
        args: vec![Term::datum(Datum::Number(RANGE_VAR as f64))],
        optargs: Vec::new(),
        datum: Datum::Null,
        // Charged where the table term stood, so a range's errors blame what a
        // sequential scan's would.
        path: source.path.clone(),
    };
    let per_range = replace_source(term, &Arc::new(var));
    let ranges = ranges(&cuts);
    let slices = ranges.into_iter().map(|(lower, upper)| {
        TableSlice {
            base: table.clone(),
            index: None,
            lower,
            upper,
            between: false,
            order: None,
        }
        .into_table()
    });
    let slices: Vec<_> = slices.collect();
    if grouped {
        return by_group(ev, &per_range, slices).map(Some);
    }
    if term.tt == T::AVG {
        return average(ev, &per_range, slices).map(Some);
    }
    let results = on_each_range(ev, &per_range, slices, |e| {
        eval(e.ctx, e.env, e.term).and_then(|v| to_datum(e.ctx, v))
    });
    merge(ev, results).map(Some)
}

/// Runs `f` on `per_range` once per range, each on its own thread with the range bound to
/// `RANGE_VAR` and a private copy of the term; the results in range order.
fn on_each_range<R: Send>(
    ev: &Ev,
    per_range: &Term,
    slices: Vec<Arc<dyn crate::access::Table>>,
    f: impl Fn(&Ev) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = slices
            .into_iter()
            .map(|slice| {
                let env = ev.env.bind(RANGE_VAR, Val::Table(slice));
                let ctx = ev.ctx;
                s.spawn(move || {
                    let _memory = ctx.memory.as_ref().map(|b| b.enter());
                    let own = private_copy(per_range);
                    f(&Ev::new(ctx, &env, &own))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(crate::error::internal("A parallel scan panicked.")))
            })
            .collect()
    })
}

/// AVG: each range's sum and count of the items it averaged, added up.
fn average(ev: &Ev, per_range: &Term, slices: Vec<Arc<dyn crate::access::Table>>) -> Result<Val> {
    use crate::terms::seq::{finish, fold, Fold};
    let results = on_each_range(ev, per_range, slices, fold);
    let mut total = Fold::default();
    for r in results {
        let part = r?;
        total.sum += part.sum;
        total.n += part.n;
    }
    finish(T::AVG, total)
}

/// An aggregation over grouped ranges: each range folds its groups (`group::fold_groups`)
/// and the accumulators are merged in key order (`group::merge_groups`).
fn by_group(ev: &Ev, per_range: &Term, slices: Vec<Arc<dyn crate::access::Table>>) -> Result<Val> {
    use crate::terms::group::{finish_groups, fold_groups, merge_groups, Accs};
    use crate::value::Grouped;
    let results = on_each_range(ev, per_range, slices, |e| match e.arg(0)? {
        Val::Grouped(Grouped::Stream(gs)) => fold_groups(e, gs),
        _ => Err(crate::error::internal("A grouped range did not group.")),
    });
    let mut total = Accs::new();
    for r in results {
        merge_groups(ev, &mut total, r?)?;
    }
    finish_groups(total)
}

/// The bottom of a chain of per-document terms: its TABLE term, and whether a `group`
/// (at most one, without `index`) sits in the chain.
struct Source<'a> {
    table: &'a Term,
    grouped: bool,
}

/// The source of `t` if it is such a chain. `strict_above` says that a term above `t`
/// would not stay lazy on a grouped stream (only `map` of one sequence, `filter` and
/// `concat_map` do): a `group` below it is then left to the sequential path.
fn table_source(t: &Term, strict_above: bool) -> Option<Source<'_>> {
    match t.tt {
        T::TABLE => Some(Source {
            table: t,
            grouped: false,
        }),
        T::MAP | T::CONCAT_MAP if t.args.len() == 2 => chain_link(t, strict_above),
        T::FILTER => chain_link(t, strict_above),
        T::PLUCK | T::WITHOUT | T::HAS_FIELDS | T::WITH_FIELDS | T::BRACKET | T::GET_FIELD => {
            chain_link(t, true)
        }
        T::GROUP if !strict_above && t.optarg("index").is_none() => {
            // Below a group, any chain will do, but not a second group.
            let below = chain_link(t, true)?;
            (!below.grouped).then_some(Source {
                grouped: true,
                ..below
            })
        }
        _ => None,
    }
}

fn chain_link(t: &Term, strict_above: bool) -> Option<Source<'_>> {
    let below = t.args.first().and_then(|a| table_source(a, strict_above))?;
    let rest_ok = t.args.iter().skip(1).all(|a| is_deterministic(a))
        && t.optargs.iter().all(|(_, a)| is_deterministic(a));
    rest_ok.then_some(below)
}

/// `t` with the TABLE term at the bottom of its argument-0 chain replaced by `var`.
fn replace_source(t: &Term, var: &Arc<Term>) -> Term {
    let first = match t.args.first() {
        Some(a) if a.tt == T::TABLE => var.clone(),
        Some(a) => Arc::new(replace_source(a, var)),
        None => var.clone(),
    };
    with_first(t, first)
}

/// A copy of `t` that shares no reference count with it: evaluation clones the literals
/// of a term for every document, and two threads cloning the same `Arc` fight over its
/// cache line (measured at 5% of a parallel scan's CPU).
fn private_copy(t: &Term) -> Term {
    Term {
        tt: t.tt,
        args: t.args.iter().map(|a| Arc::new(private_copy(a))).collect(),
        optargs: (t.optargs.iter())
            .map(|(k, a)| (k.clone(), Arc::new(private_copy(a))))
            .collect(),
        datum: private_datum(&t.datum),
        path: t.path.clone(),
    }
}

/// A deep copy of a literal (strings, arrays and objects allocated anew).
fn private_datum(d: &Datum) -> Datum {
    match d {
        Datum::String(_) | Datum::Array(_) | Datum::Object(_) => {
            datum::from_json_slice(&d.to_json_bytes()).unwrap_or_else(|_| d.clone())
        }
        other => other.clone(),
    }
}

/// `t` with argument 0 replaced.
fn with_first(t: &Term, first: Arc<Term>) -> Term {
    let mut args = t.args.clone();
    if let Some(a) = args.first_mut() {
        *a = first;
    }
    Term {
        tt: t.tt,
        args,
        optargs: t.optargs.clone(),
        datum: t.datum.clone(),
        path: t.path.clone(),
    }
}

/// Consecutive primary-key ranges cut at `cuts` (ascending), covering everything.
fn ranges(cuts: &[Datum]) -> Vec<(Bound<Datum>, Bound<Datum>)> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut lower = Bound::Unbounded;
    for c in cuts {
        out.push((lower, Bound::Excluded(c.clone())));
        lower = Bound::Included(c.clone());
    }
    out.push((lower, Bound::Unbounded));
    out
}

/// RethinkDB's error for `min`/`max`/`reduce` of an empty stream (a range may be empty
/// where the whole is not).
fn is_empty_stream(e: &ReqlError) -> bool {
    e.kind == ErrorKind::NonExistence
        && (e.message.starts_with("Cannot take the")
            || e.message == "Cannot reduce over an empty stream.")
}

/// Merges the ranges' results (in key order) into the aggregation's result.
fn merge(ev: &Ev, results: Vec<Result<Datum>>) -> Result<Val> {
    let term = ev.term;
    let mut partials = Vec::with_capacity(results.len());
    let mut empty = None;
    for r in results {
        match r {
            Ok(d) => partials.push(d),
            Err(e) if term.tt != T::COUNT && term.tt != T::SUM && is_empty_stream(&e) => {
                empty.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match term.tt {
        T::COUNT | T::SUM => {
            let total: f64 = partials.iter().filter_map(Datum::as_f64).sum();
            Ok(Val::Datum(Datum::Number(total)))
        }
        _ => {
            if partials.is_empty() {
                return Err(empty.unwrap_or_else(|| {
                    crate::error::internal("A parallel aggregation produced nothing.")
                }));
            }
            // The same term over the partial results: `min`/`max` by the same field
            // or function, `reduce` with the same function.
            let over = with_first(term, Term::datum(Datum::array(partials)));
            eval(ev.ctx, ev.env, &over)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_once() {
        let cuts = [Datum::Number(10.0), Datum::Number(20.0)];
        let r = ranges(&cuts);
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0],
            (Bound::Unbounded, Bound::Excluded(Datum::Number(10.0)))
        );
        assert_eq!(
            r[1],
            (
                Bound::Included(Datum::Number(10.0)),
                Bound::Excluded(Datum::Number(20.0))
            )
        );
        assert_eq!(
            r[2],
            (Bound::Included(Datum::Number(20.0)), Bound::Unbounded)
        );
    }
}
