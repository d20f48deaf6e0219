//! Grouping: `group`, `ungroup`, and how every other term applies to grouped values.
//!
//! As in RethinkDB (`op_term_t::term_eval`), a term whose first argument is grouped runs
//! once per group and yields GROUPED_DATA. `group` makes a lazy GROUPED_STREAM of
//! `(group, item)` pairs; `map`, `filter` and `concat_map` stay lazy on it (applied to
//! batches of items, partitioned by group, in each group's order) and `count`, `sum`,
//! `avg`, `min`, `max` and `reduce` fold it with one accumulator per group, so a grouped
//! reduction over a table holds one value per group, not the table. Any other term
//! first collects the stream into GROUPED_DATA (bounded by the array limit, RethinkDB's
//! "Grouped data over size limit" error) and then runs on each group.
//!
//! Groups appear in ReQL order of their keys. A group whose reduction saw no value
//! (`sum('b')` where no item has `b`) is left out, as RethinkDB erases it.

use std::collections::BTreeMap;
use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::error::{logic, resource, ErrorKind, Result, WithFrame};
use crate::eval::{call, expect_func, expect_num, to_datum, type_error, Ev};
use crate::term::Term;
use crate::terms::object::field_of;
use crate::value::{Env, Grouped, GroupedData, GroupedStream, Val};

/// Items pulled from a grouped stream per batch by `map`/`filter`/`concat_map`.
const BATCH: usize = 256;

/// Terms that run once per group when their first argument is grouped.
fn groupable(tt: T) -> bool {
    matches!(
        tt,
        T::MAP
            | T::FILTER
            | T::CONCAT_MAP
            | T::COUNT
            | T::SUM
            | T::AVG
            | T::MIN
            | T::MAX
            | T::REDUCE
            | T::GROUP
            | T::FOLD
            | T::LIMIT
            | T::SKIP
            | T::NTH
            | T::SLICE
            | T::IS_EMPTY
            | T::ORDER_BY
            | T::DISTINCT
            | T::CONTAINS
            | T::WITH_FIELDS
            | T::UNION
            | T::SAMPLE
            | T::ZIP
            | T::OFFSETS_OF
            | T::INNER_JOIN
            | T::OUTER_JOIN
            | T::EQ_JOIN
            | T::BRACKET
            | T::GET_FIELD
            | T::PLUCK
            | T::WITHOUT
            | T::MERGE
            | T::HAS_FIELDS
            | T::KEYS
            | T::VALUES
            | T::COERCE_TO
            | T::TO_JSON_STRING
            | T::APPEND
            | T::PREPEND
            | T::DIFFERENCE
            | T::SET_INSERT
            | T::SET_UNION
            | T::SET_INTERSECTION
            | T::SET_DIFFERENCE
            | T::INSERT_AT
            | T::SPLICE_AT
            | T::DELETE_AT
            | T::CHANGE_AT
            | T::EQ
            | T::NE
            | T::LT
            | T::LE
            | T::GT
            | T::GE
            | T::NOT
            | T::ADD
            | T::SUB
            | T::MUL
            | T::DIV
            | T::MOD
            | T::FLOOR
            | T::CEIL
            | T::ROUND
    )
}

/// Terms that work on a grouped stream itself (RethinkDB's `grouped_seq_op_term_t`).
fn grouped_seq_op(ev: &Ev) -> bool {
    match ev.term.tt {
        T::MAP => ev.nargs() == 2,
        T::FILTER
        | T::CONCAT_MAP
        | T::COUNT
        | T::SUM
        | T::AVG
        | T::MIN
        | T::MAX
        | T::REDUCE
        | T::GROUP => true,
        _ => false,
    }
}

/// Evaluates `ev.term`, running it per group when its first argument is grouped.
pub fn eval_groupable(ev: &Ev) -> Result<Val> {
    if !groupable(ev.term.tt) || ev.term.args.is_empty() {
        return super::dispatch(ev);
    }
    // Before argument 0 is evaluated: an aggregation over a large table may run in
    // parallel key ranges (grouped or not).
    if let Some(v) = crate::parallel::aggregate(ev)? {
        return Ok(v);
    }
    // Or an index may answer it (`order_by(f)`, `.limit(n)`, `min`/`max(f)` of a table).
    if let Some(v) = crate::terms::optimized::before_arg0(ev)? {
        return Ok(v);
    }
    match ev.arg(0)? {
        Val::Grouped(Grouped::Stream(gs)) if grouped_seq_op(ev) => stream_op(ev, gs),
        Val::Grouped(g) => {
            let data = materialize(ev.ctx.array_limit, g).at(0)?;
            per_group(ev, &data)
        }
        other => {
            *ev.arg0.borrow_mut() = Some(other);
            super::dispatch(ev)
        }
    }
}

/// Runs `ev.term` once per group, the group's value standing for argument 0.
fn per_group(ev: &Ev, data: &GroupedData) -> Result<Val> {
    let mut out = GroupedData::new();
    for (k, v) in data.iter() {
        let mut one = Ev::new(ev.ctx, ev.env, ev.term);
        one.literal_ok = ev.literal_ok;
        *one.arg0.borrow_mut() = Some(Val::Datum(v.clone()));
        let r = super::dispatch(&one)?;
        out.insert(k.clone(), to_datum(ev.ctx, r)?);
    }
    Ok(Val::Grouped(Grouped::Data(Arc::new(out))))
}

/// Calls `f` once per group of `g` (FUNCALL on a grouped argument); `rest` are the
/// arguments after the grouped one.
pub fn funcall_each(ev: &Ev, f: &Val, g: Grouped, rest: Vec<Val>) -> Result<Val> {
    let data = materialize(ev.ctx.array_limit, g)?;
    let mut out = GroupedData::new();
    for (k, v) in data.iter() {
        let mut args = Vec::with_capacity(rest.len() + 1);
        args.push(Val::Datum(v.clone()));
        for r in &rest {
            args.push(r.share().unwrap_or(Val::Datum(Datum::Null)));
        }
        let r = crate::eval::call_vals(ev.ctx, f, args)?;
        out.insert(k.clone(), to_datum(ev.ctx, r)?);
    }
    Ok(Val::Grouped(Grouped::Data(Arc::new(out))))
}

/// The message of RethinkDB's grouped `to_array` over the array limit.
fn over_limit(limit: usize) -> crate::error::ReqlError {
    resource(format!(
        "Grouped data over size limit `{limit}`.  Try putting a reduction (like `.reduce` or `.count`) on the end."
    ))
}

/// Collects grouped values into GROUPED_DATA (each group of a stream becomes an array).
pub fn materialize(limit: usize, g: Grouped) -> Result<Arc<GroupedData>> {
    let gs = match g {
        Grouped::Data(d) => return Ok(d),
        Grouped::Stream(gs) => gs,
    };
    if gs.infinite {
        return Err(logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array."));
    }
    let mut groups: BTreeMap<Datum, Vec<Datum>> = BTreeMap::new();
    let mut n = 0usize;
    for item in gs.stream {
        let (k, d) = item?;
        n += 1;
        if n > limit {
            return Err(over_limit(limit));
        }
        groups.entry(k).or_default().push(d);
    }
    Ok(Arc::new(
        groups
            .into_iter()
            .map(|(k, v)| (k, Datum::array(v)))
            .collect(),
    ))
}

/// The datum sent to the client for grouped values:
/// `{"$reql_type$": "GROUPED_DATA", "data": [[group, value], ...]}`.
pub fn wire_datum(limit: usize, g: Grouped) -> Result<Datum> {
    let data = materialize(limit, g)?;
    let pairs = data
        .iter()
        .map(|(k, v)| Datum::array(vec![k.clone(), v.clone()]))
        .collect();
    Ok(Datum::from_pairs([
        ("$reql_type$", Datum::str("GROUPED_DATA")),
        ("data", Datum::array(pairs)),
    ]))
}

/// A copy of a term (terms are shared through `Arc` but are not `Clone`).
fn copy_term(t: &Term) -> Arc<Term> {
    Arc::new(Term {
        tt: t.tt,
        args: t.args.clone(),
        optargs: t.optargs.clone(),
        datum: t.datum.clone(),
        path: t.path.clone(),
    })
}

/// A term on a grouped stream: lazy transformations and per-group reductions.
fn stream_op(ev: &Ev, gs: GroupedStream) -> Result<Val> {
    match ev.term.tt {
        T::GROUP => Err(logic(
            "Cannot call `group` on the output of `group` (did you mean to `ungroup`?).",
        )),
        T::MAP | T::FILTER | T::CONCAT_MAP => Ok(batched_transform(ev, gs)),
        _ => reduce_stream(ev, gs),
    }
}

/// `map`, `filter`, `concat_map` on a grouped stream: batches of items are split by
/// group and the term runs on each group's array, so its own semantics (defaults,
/// errors, arity checks) hold unchanged.
fn batched_transform(ev: &Ev, gs: GroupedStream) -> Val {
    let ctx = ev.ctx.clone();
    let env: Env = ev.env.clone();
    let term = copy_term(ev.term);
    let infinite = gs.infinite;
    let mut inner = gs.stream;
    let mut pending: std::vec::IntoIter<(Datum, Datum)> = Vec::new().into_iter();
    let mut failed = false;
    let stream = std::iter::from_fn(move || loop {
        if let Some(p) = pending.next() {
            return Some(Ok(p));
        }
        if failed {
            return None;
        }
        let mut batch: BTreeMap<Datum, Vec<Datum>> = BTreeMap::new();
        let mut n = 0;
        while n < BATCH {
            match inner.next() {
                None => break,
                Some(Ok((k, d))) => {
                    batch.entry(k).or_default().push(d);
                    n += 1;
                }
                Some(Err(e)) => {
                    failed = true;
                    return Some(Err(e));
                }
            }
        }
        if n == 0 {
            return None;
        }
        let mut out = Vec::new();
        for (k, items) in batch {
            let one = Ev::new(&ctx, &env, &term);
            *one.arg0.borrow_mut() = Some(Val::Datum(Datum::array(items)));
            let r = super::dispatch(&one).and_then(|v| to_datum(&ctx, v));
            match r {
                Ok(Datum::Array(a)) => out.extend(a.iter().map(|d| (k.clone(), d.clone()))),
                Ok(other) => out.push((k, other)),
                Err(e) => {
                    failed = true;
                    return Some(Err(e));
                }
            }
        }
        pending = out.into_iter();
    });
    Val::Grouped(Grouped::Stream(GroupedStream {
        stream: Box::new(stream),
        infinite,
    }))
}

/// One group's accumulator.
pub(crate) enum Acc {
    Count(u64),
    Sum(f64),
    Avg(f64, u64),
    Best(Datum, Datum),
    Reduce(Datum),
}

/// `count`, `sum`, `avg`, `min`, `max`, `reduce` on a grouped stream.
fn reduce_stream(ev: &Ev, gs: GroupedStream) -> Result<Val> {
    let accs = fold_groups(ev, gs)?;
    finish_groups(accs)
}

/// The accumulators of each group, in ReQL order of the group keys.
pub(crate) type Accs = BTreeMap<Datum, Acc>;

/// Folds a grouped stream for `ev.term` (an aggregation) into one accumulator per group.
pub(crate) fn fold_groups(ev: &Ev, gs: GroupedStream) -> Result<Accs> {
    let tt = ev.term.tt;
    if gs.infinite {
        return Err(logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array."));
    }
    if matches!(tt, T::MIN | T::MAX) && ev.term.optarg("index").is_some() {
        let name = if tt == T::MIN { "min" } else { "max" };
        return Err(logic(format!("Cannot call {name} on an index.")));
    }
    let by = if ev.nargs() > 1 {
        let v = ev.arg(1)?;
        if tt == T::REDUCE {
            Some(expect_func(v).at(1)?)
        } else {
            Some(v)
        }
    } else {
        None
    };
    let mut accs: BTreeMap<Datum, Acc> = BTreeMap::new();
    let limit = ev.ctx.array_limit;
    for item in gs.stream {
        let (k, d) = item?;
        let key = match (tt, &by) {
            (T::COUNT, Some(Val::Func(_))) => {
                if !call_datum(ev, by.as_ref(), d.clone())?.truthy() {
                    continue;
                }
                None
            }
            (T::COUNT, Some(Val::Datum(x))) => {
                if &d != x {
                    continue;
                }
                None
            }
            (T::COUNT | T::REDUCE, _) => None,
            (_, None) => Some(d.clone()),
            (_, Some(Val::Datum(Datum::String(f)))) => match field_of(&d, f, "get_field") {
                Ok(x) => Some(x),
                Err(e) if e.kind == ErrorKind::NonExistence => continue,
                Err(e) => return Err(e),
            },
            (_, Some(Val::Datum(other))) => return Err(type_error("STRING", other)).at(1),
            (_, Some(f)) => match crate::eval::call(ev.ctx, f, vec![d.clone()])
                .and_then(|v| to_datum(ev.ctx, v))
            {
                Ok(x) => Some(x),
                Err(e) if e.kind == ErrorKind::NonExistence => continue,
                Err(e) => return Err(e).at(1),
            },
        };
        let is_new = !accs.contains_key(&k);
        if is_new && accs.len() >= limit {
            return Err(resource(format!("Too many groups (> {limit}).")));
        }
        match (tt, accs.remove(&k)) {
            (T::COUNT, prev) => {
                let n = match prev {
                    Some(Acc::Count(n)) => n,
                    _ => 0,
                };
                accs.insert(k, Acc::Count(n + 1));
            }
            (T::SUM, prev) => {
                let s = match prev {
                    Some(Acc::Sum(s)) => s,
                    _ => 0.0,
                };
                let x = expect_num(&key.unwrap_or(Datum::Null))?;
                accs.insert(k, Acc::Sum(s + x));
            }
            (T::AVG, prev) => {
                let (s, n) = match prev {
                    Some(Acc::Avg(s, n)) => (s, n),
                    _ => (0.0, 0),
                };
                let x = expect_num(&key.unwrap_or(Datum::Null))?;
                accs.insert(k, Acc::Avg(s + x, n + 1));
            }
            (T::MIN | T::MAX, prev) => {
                let key = key.unwrap_or(Datum::Null);
                let next = match prev {
                    Some(Acc::Best(bk, bd)) => {
                        let better = if tt == T::MIN { key < bk } else { key > bk };
                        if better {
                            Acc::Best(key, d)
                        } else {
                            Acc::Best(bk, bd)
                        }
                    }
                    _ => Acc::Best(key, d),
                };
                accs.insert(k, next);
            }
            (_, prev) => {
                let next = match prev {
                    Some(Acc::Reduce(a)) => {
                        let f = by
                            .as_ref()
                            .ok_or_else(|| logic("reduce needs a function"))?;
                        let old = a.clone();
                        let r = call(ev.ctx, f, vec![a, d]).at(1)?;
                        let new = to_datum(ev.ctx, r)?;
                        crate::terms::control::check_step_nesting(&old, &new).at(1)?;
                        new
                    }
                    _ => d,
                };
                accs.insert(k, Acc::Reduce(next));
            }
        }
    }
    Ok(accs)
}

/// Adds `later` (the accumulators of a later key range) into `into`, as if its items had
/// come after `into`'s: ties of `min`/`max` stay with the earlier one, `reduce` calls its
/// function on the two (RethinkDB's reductions combine shards' results the same way).
pub(crate) fn merge_groups(ev: &Ev, into: &mut Accs, later: Accs) -> Result<()> {
    let limit = ev.ctx.array_limit;
    for (k, b) in later {
        let merged = match (into.remove(&k), b) {
            (None, b) => b,
            (Some(Acc::Count(x)), Acc::Count(y)) => Acc::Count(x + y),
            (Some(Acc::Sum(x)), Acc::Sum(y)) => Acc::Sum(x + y),
            (Some(Acc::Avg(s, n)), Acc::Avg(t, m)) => Acc::Avg(s + t, n + m),
            (Some(Acc::Best(ak, ad)), Acc::Best(bk, bd)) => {
                let better = if ev.term.tt == T::MIN {
                    bk < ak
                } else {
                    bk > ak
                };
                if better {
                    Acc::Best(bk, bd)
                } else {
                    Acc::Best(ak, ad)
                }
            }
            (Some(Acc::Reduce(a)), Acc::Reduce(b)) => {
                let f = expect_func(ev.arg(1)?).at(1)?;
                let old = a.clone();
                let r = call(ev.ctx, &f, vec![a, b]).at(1)?;
                let new = to_datum(ev.ctx, r)?;
                crate::terms::control::check_step_nesting(&old, &new).at(1)?;
                Acc::Reduce(new)
            }
            _ => return Err(crate::error::internal("Mismatched group accumulators.")),
        };
        if into.len() >= limit {
            return Err(resource(format!("Too many groups (> {limit}).")));
        }
        into.insert(k, merged);
    }
    Ok(())
}

/// The GROUPED_DATA of folded groups.
pub(crate) fn finish_groups(accs: Accs) -> Result<Val> {
    let mut out = GroupedData::new();
    for (k, acc) in accs {
        let v = match acc {
            Acc::Count(n) => Datum::from(n as f64),
            Acc::Sum(s) => crate::terms::math::finite(s)?,
            Acc::Avg(s, n) => Datum::Number(s / n as f64),
            Acc::Best(_, d) | Acc::Reduce(d) => d,
        };
        out.insert(k, v);
    }
    Ok(Val::Grouped(Grouped::Data(Arc::new(out))))
}

fn call_datum(ev: &Ev, f: Option<&Val>, d: Datum) -> Result<Datum> {
    let f = f.ok_or_else(|| logic("missing predicate"))?;
    let r = call(ev.ctx, f, vec![d]).at(1)?;
    to_datum(ev.ctx, r)
}

/// One way of computing a group key.
enum KeyFn {
    /// A field name; the function RethinkDB makes of it is charged to the name's term.
    Field(Datum, crate::error::Path),
    /// A function; a result that is not a datum is charged to it.
    Func(Val, crate::error::Path),
}

/// GROUP: fields and functions, `multi`, and `index` on the primary key.
pub fn group(ev: &Ev) -> Result<Val> {
    let mut keys = Vec::new();
    for i in 1..ev.nargs() {
        let path = ev.term.args[i].path.clone();
        keys.push(match ev.arg(i)? {
            Val::Func(f) => KeyFn::Func(Val::Func(f), path),
            Val::Datum(d) => KeyFn::Field(d, path),
            other => KeyFn::Func(crate::eval::expect_func(other).at(i)?, path),
        });
    }
    let multi = ev.opt_bool("multi", false)?;
    if keys.is_empty() && ev.term.optarg("index").is_none() {
        return Err(logic("Cannot group by nothing."));
    }
    // Items with the secondary-index value to append to their key, if grouping by one.
    type Tagged = Box<dyn Iterator<Item = Result<(Datum, Option<Datum>)>> + Send>;
    let (items, infinite): (Tagged, bool) = match ev.opt_datum("index")? {
        None => {
            let seq = ev.seq(0)?;
            let inf = seq.infinite;
            (Box::new(seq.stream.map(|d| d.map(|d| (d, None)))), inf)
        }
        Some(idx) => {
            let name = crate::eval::expect_str(&idx).at_opt("index")?.to_string();
            let table = ev.table(0)?;
            if name != table.primary_key() {
                (group_by_secondary_index(&table, &name)?, false)
            } else {
                let path = ev
                    .term
                    .optarg("index")
                    .map(|t| t.path.clone())
                    .unwrap_or_default();
                keys.push(KeyFn::Field(Datum::str(&name), path));
                let seq = crate::eval::to_seq(Val::Table(table))?;
                (Box::new(seq.stream.map(|d| d.map(|d| (d, None)))), false)
            }
        }
    };
    let ctx = ev.ctx.clone();
    let mut inner = items;
    let mut pending: std::vec::IntoIter<(Datum, Datum)> = Vec::new().into_iter();
    let mut failed = false;
    let stream = std::iter::from_fn(move || loop {
        if let Some(p) = pending.next() {
            return Some(Ok(p));
        }
        if failed {
            return None;
        }
        let (d, extra) = match inner.next()? {
            Ok(p) => p,
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        };
        match group_keys(&ctx, &keys, &d, extra, multi) {
            Ok(ks) => {
                pending = ks
                    .into_iter()
                    .map(|k| (k, d.clone()))
                    .collect::<Vec<_>>()
                    .into_iter()
            }
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
    });
    Ok(Val::Grouped(Grouped::Stream(GroupedStream {
        stream: Box::new(stream),
        infinite,
    })))
}

/// Grouping by a secondary index: every index entry, as `(document, index value)`
/// (a document of a multi index once per value), in index order.
#[allow(clippy::type_complexity)]
fn group_by_secondary_index(
    table: &Arc<dyn crate::access::Table>,
    name: &str,
) -> Result<Box<dyn Iterator<Item = Result<(Datum, Option<Datum>)>> + Send>> {
    let pairs = table.index_pairs(name, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)?;
    Ok(Box::new(pairs.map(|p| p.map(|(v, d)| (d, Some(v))))))
}

/// The group keys of one item (see `fan_out`); a key function failing with a
/// non-existence error puts the item under null.
fn group_keys(
    ctx: &Arc<crate::ctx::QueryCtx>,
    keys: &[KeyFn],
    d: &Datum,
    index_value: Option<Datum>,
    multi: bool,
) -> Result<Vec<Datum>> {
    let mut parts = Vec::with_capacity(keys.len() + 1);
    for k in keys {
        let (r, path) = match k {
            KeyFn::Field(Datum::String(f), p) => (field_of(d, f, "get_field"), p),
            KeyFn::Field(other, p) => (Err(type_error("STRING", other)), p),
            KeyFn::Func(f, p) => (
                call(ctx, f, vec![d.clone()]).and_then(|v| to_datum(ctx, v)),
                p,
            ),
        };
        parts.push(match r {
            Ok(x) => x,
            Err(e) if e.kind == ErrorKind::NonExistence => Datum::Null,
            Err(e) => return Err(e.blame_path(path)),
        });
    }
    parts.extend(index_value);
    Ok(fan_out(parts, multi))
}

/// One value per key function (an array when there are several); with `multi`, arrays
/// fan out into one group per element (the cartesian product over several keys, null
/// for an empty array).
fn fan_out(parts: Vec<Datum>, multi: bool) -> Vec<Datum> {
    let join = |mut v: Vec<Datum>| -> Datum {
        if v.len() == 1 {
            v.pop().unwrap_or(Datum::Null)
        } else {
            Datum::array(v)
        }
    };
    if !multi {
        return vec![join(parts)];
    }
    let mut combos: Vec<Vec<Datum>> = vec![Vec::new()];
    for p in parts {
        let choices: Vec<Datum> = match &p {
            Datum::Array(a) if a.is_empty() => vec![Datum::Null],
            Datum::Array(a) => a.to_vec(),
            _ => vec![p.clone()],
        };
        let mut next = Vec::with_capacity(combos.len() * choices.len());
        for c in &combos {
            for x in &choices {
                let mut c2 = c.clone();
                c2.push(x.clone());
                next.push(c2);
            }
        }
        combos = next;
    }
    combos.into_iter().map(join).collect()
}

/// UNGROUP: `[{group, reduction}, ...]` in group order.
pub fn ungroup(ev: &Ev) -> Result<Val> {
    let g = match ev.arg(0)? {
        Val::Grouped(g) => g,
        other => {
            return Err(logic(format!(
                "Expected type GROUPED_DATA but found {}:\n{}",
                other.kind_name(),
                crate::eval::describe(&other)
            )))
            .at(0)
        }
    };
    let data = materialize(ev.ctx.array_limit, g).at(0)?;
    let out: Vec<Datum> = data
        .iter()
        .map(|(k, v)| Datum::from_pairs([("group", k.clone()), ("reduction", v.clone())]))
        .collect();
    Ok(Val::Datum(Datum::array(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(x: f64) -> Datum {
        Datum::Number(x)
    }

    #[test]
    fn multi_keys_fan_out_as_a_product() {
        let parts = vec![Datum::array(vec![n(1.0), n(2.0)]), Datum::array(vec![])];
        let ks = fan_out(parts.clone(), true);
        assert_eq!(
            ks,
            vec![
                Datum::array(vec![n(1.0), Datum::Null]),
                Datum::array(vec![n(2.0), Datum::Null])
            ]
        );
        assert_eq!(fan_out(parts[..1].to_vec(), false), vec![parts[0].clone()]);
        assert_eq!(fan_out(vec![n(3.0)], true), vec![n(3.0)]);
    }

    #[test]
    fn materialize_enforces_the_limit_and_orders_groups() {
        let items = || -> Vec<Result<(Datum, Datum)>> {
            (0..5)
                .map(|i| Ok((n(f64::from(1 - i % 2)), n(f64::from(i)))))
                .collect()
        };
        let gs = GroupedStream {
            stream: Box::new(items().into_iter()),
            infinite: false,
        };
        let err = materialize(3, Grouped::Stream(gs)).err();
        assert!(err.is_some_and(|e| e.message.starts_with("Grouped data over size limit `3`")));
        let gs = GroupedStream {
            stream: Box::new(items().into_iter()),
            infinite: false,
        };
        let data = materialize(10, Grouped::Stream(gs)).unwrap_or_default();
        let keys: Vec<Datum> = data.keys().cloned().collect();
        assert_eq!(keys, vec![n(0.0), n(1.0)]);
        assert_eq!(data.get(&n(0.0)), Some(&Datum::array(vec![n(1.0), n(3.0)])));
    }
}
