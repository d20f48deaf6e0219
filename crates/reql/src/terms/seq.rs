//! Sequence terms: `filter`, `map`, `concat_map`, `count`, `limit`, `skip`, `nth`,
//! `slice`, `is_empty`, `order_by`, `distinct`, `reduce`, `sum`/`avg`/`min`/`max`,
//! `contains`, `with_fields`.
//!
//! Streams stay lazy: per-item terms wrap the input iterator; only `order_by`, `distinct`
//! and aggregations consume it, bounded by the array limit where they must hold items.

use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::ctx::QueryCtx;
use crate::error::{logic, nonexist, ErrorKind, Result, WithFrame};
use crate::eval::{call, expect_int, expect_num, to_datum, Ev};
use crate::terms::object::{field_of, pluck_datum};
use crate::value::{Func, Sequence, Val};

/// Maps items lazily; `f` returning `None` drops the item.
pub fn map_items(
    seq: Sequence,
    mut f: impl FnMut(Datum) -> Result<Option<Datum>> + Send + 'static,
) -> Sequence {
    let mut inner = seq.stream;
    let mut failed = false;
    let stream = std::iter::from_fn(move || loop {
        if failed {
            return None;
        }
        let d = match inner.next()? {
            Ok(d) => d,
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        };
        match f(d) {
            Ok(Some(x)) => return Some(Ok(x)),
            Ok(None) => continue,
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
    });
    Sequence {
        stream: Box::new(stream),
        is_array: seq.is_array,
        table: seq.table,
        infinite: seq.infinite,
    }
}

/// Filters items lazily (the selection is kept).
pub fn filter_items(
    seq: Sequence,
    mut pred: impl FnMut(&Datum) -> Result<bool> + Send + 'static,
) -> Sequence {
    map_items(seq, move |d| Ok(if pred(&d)? { Some(d) } else { None }))
}

fn shared(v: &Val) -> Result<Val> {
    v.share()
        .ok_or_else(|| logic("Expected type FUNCTION but found SEQUENCE."))
}

/// Calls `f` on one item and returns a datum.
pub fn apply(ctx: &Arc<QueryCtx>, f: &Val, d: Datum) -> Result<Datum> {
    let r = crate::eval::call1(ctx, f, d)?;
    to_datum(ctx, r)
}

/// RethinkDB's `filter_match`: does `value` match the object `pred` (a `filter`
/// predicate given as an object, or returned by a function whose body is an object
/// literal)? Each field of the pattern must be in `value` and equal, nested objects
/// matching as patterns in turn; `r.literal(v)` matches `v` exactly. A field `value`
/// lacks is a non-existence error, so `filter`'s `default` decides about the row.
pub fn filter_match(pred: &Datum, value: &Datum) -> Result<bool> {
    if pred.reql_type() == Some("LITERAL") {
        return Ok(pred.get("value") == Some(value));
    }
    let Some(pattern) = pred.as_object() else {
        return Ok(pred == value);
    };
    for (k, want) in pattern.iter() {
        let fields = crate::eval::expect_object(value)?;
        match fields.get(&**k) {
            None => return Err(nonexist(format!("No attribute `{k}` in object."))),
            Some(elt) if matches!(want, Datum::Object(_)) && matches!(elt, Datum::Object(_)) => {
                if !filter_match(want, elt)? {
                    return Ok(false);
                }
            }
            Some(elt) => {
                if elt != want {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// A `filter` predicate: a function, a constant, or (for `count(x)`) a value to be equal
/// to. RethinkDB matches an object result as a pattern only when it is the predicate
/// itself or the function's body is an object literal; any other object result is
/// simply truthy.
pub enum Predicate {
    /// A function; `pattern` when its body is an object literal.
    Func {
        /// The function.
        f: Func,
        /// Match an object result as a pattern.
        pattern: bool,
    },
    /// A constant: an object is a pattern, anything else is its own truth.
    Const(Datum),
    /// Equal to this value (`count(x)`, RethinkDB's `new_eq_comparison_func`).
    Equal(Datum),
}

impl Predicate {
    /// The predicate `pred` as `filter` takes it: a function, or a value that stands
    /// for a constant function (RethinkDB's `CONSTANT_SHORTCUT`).
    pub fn new(ctx: &QueryCtx, pred: Val) -> Result<Predicate> {
        match pred {
            Val::Func(f) => Ok(Predicate::of_func(f)),
            v @ (Val::Datum(_) | Val::Single(_)) => Ok(Predicate::Const(to_datum(ctx, v)?)),
            Val::Seq(s) if s.is_array => Ok(Predicate::Const(to_datum(ctx, Val::Seq(s))?)),
            other => Err(logic(format!(
                "Expected type FUNCTION but found {}:\n{}",
                other.kind_name(),
                crate::eval::describe(&other)
            ))),
        }
    }

    /// The predicate of a function value.
    pub fn of_func(f: Func) -> Predicate {
        let pattern = matches!(f.body.tt, T::MAKE_OBJ | T::DATUM);
        Predicate::Func { f, pattern }
    }

    /// RethinkDB's `filter_helper`: the predicate's verdict on `doc`; errors (a missing
    /// field among them) are the caller's to judge.
    pub fn test(&self, ctx: &Arc<QueryCtx>, doc: &Datum) -> Result<bool> {
        match self {
            Predicate::Equal(x) => Ok(doc == x),
            Predicate::Const(p @ Datum::Object(_)) => filter_match(p, doc),
            Predicate::Const(p) => Ok(p.truthy()),
            Predicate::Func { f, pattern } => match apply(ctx, &Val::Func(f.clone()), doc.clone())?
            {
                r @ Datum::Object(_) if *pattern => filter_match(&r, doc),
                r => Ok(r.truthy()),
            },
        }
    }
}

/// RethinkDB's `filter_call`: the predicate's verdict, where a non-existence error
/// (a missing field) gives the value of `default` (evaluated afresh for each such row,
/// as RethinkDB calls it as a function of no arguments), or false without one. A
/// `default` that raises `r.error()` re-raises the row's own error; any other error of
/// the `default` is raised.
pub fn filter_call(
    ctx: &Arc<QueryCtx>,
    env: &crate::value::Env,
    pred: &Predicate,
    default: Option<&Arc<crate::term::Term>>,
    doc: &Datum,
) -> Result<bool> {
    match pred.test(ctx, doc) {
        Ok(b) => Ok(b),
        Err(e) if e.kind == ErrorKind::NonExistence => match default {
            None => Ok(false),
            Some(t) => match crate::eval::eval(ctx, env, t) {
                Ok(v) => Ok(to_datum(ctx, v).at_opt("default")?.truthy()),
                Err(x) if x.kind == ErrorKind::EmptyUser => Err(e),
                Err(x) => Err(x).at_opt("default"),
            },
        },
        Err(e) => Err(e).at(1),
    }
}

/// FILTER.
pub fn filter(ev: &Ev) -> Result<Val> {
    let seq = match ev.arg(0)? {
        // A whole table: maybe answered from an index (`terms::optimized`).
        Val::Table(t) if t.slice().is_none() => {
            crate::terms::optimized::filter_source(ev, &t).at(0)?
        }
        v => ev.to_seq(v).at(0)?,
    };
    // The predicate may be an object holding `r.literal` (RethinkDB evaluates it with
    // `LITERAL_OK`); such a value is matched as itself.
    let pred = Predicate::new(ev.ctx, ev.arg_literal_ok(1)?).at(1)?;
    let default = ev.term.optarg("default").cloned();
    let ctx = ev.ctx.clone();
    let env = ev.env.clone();
    Ok(Val::Seq(filter_items(seq, move |d| {
        filter_call(&ctx, &env, &pred, default.as_ref(), d)
    })))
}

/// MAP (one or more sequences, zipped).
pub fn map(ev: &Ev) -> Result<Val> {
    let n = ev.nargs();
    let f = crate::eval::expect_func(ev.arg(n - 1)?).at(n - 1)?;
    if let Val::Func(func) = &f {
        let arity = func.params.len();
        if !crate::terms::js::is_js_func(func) && arity != 0 && arity != n - 1 {
            return Err(logic(format!(
                "The function passed to `map` expects {arity} argument{}, but {} sequence{} found.",
                if arity == 1 { "" } else { "s" },
                n - 1,
                if n == 2 { " was" } else { "s were" }
            )));
        }
    }
    let ctx = ev.ctx.clone();
    if n == 2 {
        let seq = ev.seq(0)?;
        // A result that is not a datum is charged to the function (its errors inside
        // already are to their own terms).
        let mut out = map_items(seq, move |d| apply(&ctx, &f, d).at(1).map(Some));
        out.table = None;
        return Ok(Val::Seq(out));
    }
    let mut seqs = Vec::new();
    for i in 0..n - 1 {
        seqs.push(ev.seq(i)?);
    }
    let all_arrays = seqs.iter().all(|s| s.is_array);
    let infinite = seqs.iter().all(|s| s.infinite);
    let mut streams: Vec<_> = seqs.into_iter().map(|s| s.stream).collect();
    let stream = std::iter::from_fn(move || {
        let mut args = Vec::with_capacity(streams.len());
        for s in streams.iter_mut() {
            match s.next()? {
                Ok(d) => args.push(d),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(
            call(&ctx, &f, args)
                .and_then(|v| to_datum(&ctx, v))
                .at(n - 1),
        )
    });
    let mut seq = Sequence::stream(Box::new(stream));
    seq.is_array = all_arrays;
    seq.infinite = infinite;
    Ok(Val::Seq(seq))
}

/// CONCAT_MAP.
pub fn concat_map(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let f = crate::eval::expect_func(ev.arg(1)?).at(1)?;
    let ctx = ev.ctx.clone();
    let is_array = seq.is_array;
    let mut inner = seq.stream;
    let mut pending: std::vec::IntoIter<Datum> = Vec::new().into_iter();
    let stream = std::iter::from_fn(move || loop {
        if let Some(d) = pending.next() {
            return Some(Ok(d));
        }
        let d = match inner.next()? {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        let r = call(&ctx, &f, vec![d]).and_then(|v| match v {
            Val::Seq(s) => s.collect(ctx.array_limit),
            other => match to_datum(&ctx, other)? {
                Datum::Array(a) => Ok(a.to_vec()),
                other => Err(logic(format!(
                    "Cannot convert {} to SEQUENCE",
                    other.type_name()
                ))),
            },
        });
        match r {
            Ok(v) => pending = v.into_iter(),
            // The function's result is charged to the function.
            Err(e) => return Some(Err(e.with_frame(crate::error::Frame::Pos(1)))),
        }
    });
    let mut out = Sequence::stream(Box::new(stream));
    out.is_array = is_array;
    Ok(Val::Seq(out))
}

/// COUNT (all, equal to a value, or matching a predicate).
pub fn count(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    if ev.nargs() == 1 {
        match v {
            Val::Table(t) => return Ok(Val::Datum(Datum::from(t.count()? as f64))),
            Val::Datum(Datum::String(s)) => return Ok(Val::Datum(Datum::from(s.chars().count()))),
            Val::Datum(Datum::Array(a)) => return Ok(Val::Datum(Datum::from(a.len()))),
            Val::Datum(Datum::Object(ref o)) if v_is_binary(o) => {
                let Val::Datum(d) = v else { unreachable_val() };
                let n = datum::ptype::binary_bytes(&d).map_or(0, |b| b.len());
                return Ok(Val::Datum(Datum::from(n)));
            }
            Val::Datum(Datum::Object(ref o)) => {
                return Ok(Val::Datum(Datum::from(o.len())));
            }
            Val::Single(ref s) => {
                if let Datum::Object(o) = &s.doc {
                    return Ok(Val::Datum(Datum::from(o.len())));
                }
            }
            _ => {}
        }
    }
    let seq = ev.to_seq(v).at(0)?;
    if seq.infinite {
        return Err(crate::terms::changes::infinite_error(ev.ctx));
    }
    // `count(f)` is `filter(f).count()` (a row lacking a field the function reads is
    // not counted); `count(x)` counts the items equal to `x`.
    let pred = if ev.nargs() > 1 {
        match ev.arg(1)? {
            Val::Func(f) => Some(Predicate::of_func(f)),
            other => Some(Predicate::Equal(ev.to_datum(other).at(1)?)),
        }
    } else {
        None
    };
    let env = crate::value::Env::default();
    let mut n = 0u64;
    for d in seq.stream {
        let d = d?;
        let hit = match &pred {
            None => true,
            Some(p) => filter_call(ev.ctx, &env, p, None, &d)?,
        };
        if hit {
            n += 1;
        }
    }
    Ok(Val::Datum(Datum::from(n as f64)))
}

fn v_is_binary(o: &datum::Object) -> bool {
    o.get("$reql_type$").and_then(Datum::as_str) == Some("BINARY")
}

fn unreachable_val() -> ! {
    // Only reached after a pattern already proved the shape.
    std::process::abort()
}

/// A non-negative integer argument of LIMIT/SKIP.
pub(crate) fn non_negative(ev: &Ev, i: usize, what: &str) -> Result<usize> {
    let d = ev.datum(i)?;
    let n = expect_int(&d).at(i)?;
    if n < 0 {
        return Err(logic(format!(
            "{what} takes a non-negative argument (got {n})"
        )));
    }
    Ok(n as usize)
}

/// LIMIT.
pub fn limit(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let n = non_negative(ev, 1, "LIMIT")?;
    if crate::terms::changes::is_feed(ev.ctx, &seq) {
        // Not `take`: it counts the polls that find nothing queued yet.
        return Ok(Val::Seq(crate::terms::changes::limit(ev.ctx, seq, n)));
    }
    let stream = seq.stream.take(n);
    Ok(Val::Seq(Sequence {
        stream: Box::new(stream),
        infinite: false,
        ..seq_flags(&seq.is_array, seq.table)
    }))
}

fn seq_flags(is_array: &bool, table: Option<Arc<dyn crate::access::Table>>) -> Sequence {
    Sequence {
        stream: Box::new(std::iter::empty()),
        is_array: *is_array,
        table,
        infinite: false,
    }
}

/// SKIP.
pub fn skip(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let n = expect_int(&ev.datum(1)?).at(1)?;
    if n < 0 {
        // RethinkDB's skip is `slice(n)`: from the end of an array, an error on a stream.
        if !seq.is_array {
            return Err(logic("Cannot use a negative left index on a stream."));
        }
        let items = seq.collect(ev.ctx.array_limit)?;
        let from = items
            .len()
            .saturating_sub(usize::try_from(-n).unwrap_or(usize::MAX));
        return Ok(Val::Datum(Datum::array(
            items.into_iter().skip(from).collect(),
        )));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if crate::terms::changes::is_feed(ev.ctx, &seq) {
        return Ok(Val::Seq(crate::terms::changes::skip(seq, n)));
    }
    let infinite = seq.infinite;
    let mut out = seq_flags(&seq.is_array, seq.table);
    out.stream = Box::new(seq.stream.skip(n));
    out.infinite = infinite;
    Ok(Val::Seq(out))
}

/// NTH.
pub fn nth(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let idx = ev.datum(1)?;
    nth_of(ev, v, &idx)
}

/// The item at an index of a sequence (negative indexes count from the end of arrays).
pub fn nth_of(ev: &Ev, v: Val, idx: &Datum) -> Result<Val> {
    let i = expect_int(idx).at(1)?;
    let table = match &v {
        Val::Table(t) => Some(t.clone()),
        Val::Seq(s) => s.table.clone(),
        _ => None,
    };
    let wrap = |d: Datum| -> Result<Val> {
        match &table {
            Some(t) => {
                let key = d.get(t.primary_key()).cloned().unwrap_or(Datum::Null);
                Ok(Val::Single(crate::value::SingleSel {
                    table: t.clone(),
                    key,
                    doc: d,
                }))
            }
            None => Ok(Val::Datum(d)),
        }
    };
    if let Val::Datum(Datum::Array(a)) = &v {
        let len = a.len() as i64;
        let j = if i < 0 { len + i } else { i };
        return match a.get(usize::try_from(j).unwrap_or(usize::MAX)) {
            Some(d) => Ok(Val::Datum(d.clone())),
            None => Err(nonexist(format!("Index out of bounds: {i}"))),
        };
    }
    let seq = ev.to_seq(v).at(0)?;
    if i < 0 {
        if seq.is_array {
            let items = seq.collect(ev.ctx.array_limit)?;
            let j = items.len() as i64 + i;
            return match items.get(usize::try_from(j).unwrap_or(usize::MAX)) {
                Some(d) => Ok(Val::Datum(d.clone())),
                None => Err(nonexist(format!("Index out of bounds: {i}"))),
            };
        }
        return Err(logic("Cannot use a negative index on a stream."));
    }
    for (k, d) in seq.stream.enumerate() {
        let d = d?;
        if k as i64 == i {
            return wrap(d);
        }
    }
    Err(nonexist(format!("Index out of bounds: {i}")))
}

/// SLICE on sequences, strings and binary.
pub fn slice(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let start = expect_int(&ev.datum(1)?).at(1)?;
    let end = if ev.nargs() > 2 {
        Some(ev.datum(2)?)
    } else {
        None
    };
    let left_open = ev.opt_open("left_bound", false)?;
    let right_closed = !ev.opt_open("right_bound", true)?;
    let end_i = match &end {
        None => None,
        Some(Datum::Number(_)) => Some(expect_int(end.as_ref().unwrap_or(&Datum::Null)).at(2)?),
        Some(d) => return Err(crate::eval::type_error("NUMBER", d)).at(2),
    };
    let bounds = |len: i64| -> (i64, i64) {
        let mut s = if start < 0 { len + start } else { start };
        if left_open {
            s += 1;
        }
        let mut e = match end_i {
            None => len,
            Some(e) if e < 0 => len + e,
            Some(e) => e,
        };
        if right_closed && end_i.is_some() {
            e += 1;
        }
        (s.max(0), e.min(len))
    };
    match &v {
        Val::Datum(Datum::String(st)) => {
            let chars: Vec<char> = st.chars().collect();
            let (s, e) = bounds(chars.len() as i64);
            let out: String = if s < e {
                chars[s as usize..e as usize].iter().collect()
            } else {
                String::new()
            };
            return Ok(Val::Datum(Datum::from(out)));
        }
        Val::Datum(d) if d.reql_type() == Some("BINARY") => {
            let b = datum::ptype::binary_bytes(d).unwrap_or_default();
            let (s, e) = bounds(b.len() as i64);
            let out = if s < e {
                &b[s as usize..e as usize]
            } else {
                &[][..]
            };
            return Ok(Val::Datum(datum::ptype::make_binary(out)));
        }
        _ => {}
    }
    let seq = ev.to_seq(v).at(0)?;
    let mut end_i = end_i;
    if !seq.is_array {
        if start < 0 {
            return Err(logic("Cannot use a negative left index on a stream."));
        }
        match end_i {
            Some(e) if e < -1 => return Err(logic("Cannot use a right index < -1 on a stream.")),
            Some(-1) if !right_closed => {
                return Err(logic(
                    "Cannot slice to an open right index of -1 on a stream.",
                ))
            }
            Some(-1) => end_i = None,
            _ => {}
        }
    }
    if seq.is_array {
        let items = seq.collect(ev.ctx.array_limit)?;
        let (s, e) = bounds(items.len() as i64);
        let out = if s < e {
            items[s as usize..e as usize].to_vec()
        } else {
            Vec::new()
        };
        return Ok(Val::Datum(Datum::array(out)));
    }
    let s = if left_open { start + 1 } else { start } as usize;
    let table = seq.table.clone();
    let stream: crate::value::DatumStream = match end_i {
        None => Box::new(seq.stream.skip(s)),
        Some(e) => {
            let e = if right_closed { e + 1 } else { e } as usize;
            Box::new(seq.stream.skip(s).take(e.saturating_sub(s)))
        }
    };
    Ok(Val::Seq(Sequence {
        stream,
        is_array: false,
        table,
        infinite: false,
    }))
}

/// IS_EMPTY.
pub fn is_empty(ev: &Ev) -> Result<Val> {
    let mut seq = ev.seq(0)?;
    let first = seq.stream.next().transpose()?;
    Ok(Val::Datum(Datum::Bool(first.is_none())))
}

/// A sort key: ascending or descending on a field or function.
enum SortKey {
    /// A field name: the function RethinkDB makes of it is charged to the name's term.
    Field(String, bool, crate::error::Path),
    Func(Val, bool),
}

fn sort_key_of(ev: &Ev, i: usize) -> Result<SortKey> {
    let t = ev
        .term
        .args
        .get(i)
        .ok_or_else(|| logic("missing sort key"))?;
    let (inner_desc, term) = match t.tt {
        T::DESC => (true, t.args.first().cloned()),
        T::ASC => (false, t.args.first().cloned()),
        _ => (false, Some(t.clone())),
    };
    let term = term.ok_or_else(|| logic("missing sort key"))?;
    let v = crate::eval::eval(ev.ctx, ev.env, &term).at(i)?;
    Ok(match v {
        Val::Datum(Datum::String(s)) => {
            SortKey::Field(s.to_string(), inner_desc, term.path.clone())
        }
        Val::Func(f) => SortKey::Func(Val::Func(f), inner_desc),
        Val::Datum(d) => {
            return Err(logic(format!(
                "Expected type STRING but found {}.",
                d.type_name()
            )))
            .at(i)
        }
        other => SortKey::Func(shared(&other)?, inner_desc),
    })
}

/// ORDER_BY (without an index): sorts into an array.
pub fn order_by(ev: &Ev) -> Result<Val> {
    if ev.term.optarg("index").is_some() {
        let v = ev.arg(0)?;
        if matches!(&v, Val::Seq(s) if crate::terms::changes::is_feed(ev.ctx, s)) {
            return Err(logic(crate::terms::changes::TERMINAL_ON_FEED));
        }
        *ev.arg0.borrow_mut() = Some(v);
        return crate::terms::index::order_by_index(ev);
    }
    let seq = ev.seq(0)?;
    if crate::terms::changes::is_feed(ev.ctx, &seq) {
        return Err(logic(crate::terms::changes::TERMINAL_ON_FEED));
    }
    let mut keys = Vec::new();
    for i in 1..ev.nargs() {
        keys.push(sort_key_of(ev, i)?);
    }
    let table = seq.table.clone();
    let items = seq.collect(ev.ctx.array_limit)?;
    let mut keyed = Vec::with_capacity(items.len());
    for d in items {
        let mut ks = Vec::with_capacity(keys.len());
        for k in &keys {
            ks.push(match k {
                SortKey::Field(f, _, path) => match field_of(&d, f, "get_field") {
                    Ok(x) => x,
                    Err(e) if e.kind == ErrorKind::NonExistence => Datum::MinVal,
                    Err(e) => return Err(e.blame_path(path)),
                },
                SortKey::Func(f, _) => apply(ev.ctx, f, d.clone())?,
            });
        }
        keyed.push((ks, d));
    }
    keyed.sort_by(|(a, _), (b, _)| {
        for (i, k) in keys.iter().enumerate() {
            let desc = match k {
                SortKey::Field(_, d, _) | SortKey::Func(_, d) => *d,
            };
            let (x, y) = (a.get(i), b.get(i));
            let o = x.cmp(&y);
            let o = if desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    let out: Vec<Datum> = keyed.into_iter().map(|(_, d)| d).collect();
    let mut s = Sequence::from_vec(out);
    s.table = table;
    Ok(Val::Seq(s))
}

/// DISTINCT (without an index): sorted unique items as an array.
pub fn distinct(ev: &Ev) -> Result<Val> {
    if let Some(v) = crate::terms::stream::distinct_table(ev)? {
        return Ok(v);
    }
    let seq = ev.seq(0)?;
    let mut items = seq.collect(ev.ctx.array_limit)?;
    items.sort();
    items.dedup();
    Ok(Val::Datum(Datum::array(items)))
}

/// REDUCE.
pub fn reduce(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    if seq.infinite {
        return Err(crate::terms::changes::infinite_error(ev.ctx));
    }
    let f = crate::eval::expect_func(ev.arg(1)?).at(1)?;
    let mut acc: Option<Datum> = None;
    for d in seq.stream {
        let d = d?;
        acc = Some(match acc {
            None => d,
            Some(a) => {
                let old = a.clone();
                let r = call(ev.ctx, &f, vec![a, d]).at(1)?;
                let new = to_datum(ev.ctx, r)?;
                crate::terms::control::check_step_nesting(&old, &new).at(1)?;
                new
            }
        });
    }
    acc.map(Val::Datum)
        .ok_or_else(|| nonexist("Cannot reduce over an empty stream."))
}

/// SUM, AVG, MIN, MAX (optionally by field or function).
pub fn aggregate(ev: &Ev) -> Result<Val> {
    if matches!(ev.term.tt, T::MIN | T::MAX) {
        if let Some(v) = crate::terms::stream::min_max_table(ev)? {
            return Ok(v);
        }
    }
    let acc = fold(ev)?;
    finish(ev.term.tt, acc)
}

/// What `sum`, `avg`, `min` and `max` accumulate over a stream.
#[derive(Default)]
pub(crate) struct Fold {
    /// The sum of the numbers (`sum`, `avg`).
    pub(crate) sum: f64,
    /// How many items counted (`avg`; items without the field are skipped).
    pub(crate) n: usize,
    /// The best key and its item so far (`min`, `max`).
    pub(crate) best: Option<(Datum, Datum)>,
}

/// Accumulates the stream of argument 0 for `ev.term` (SUM, AVG, MIN or MAX).
pub(crate) fn fold(ev: &Ev) -> Result<Fold> {
    let seq = ev.seq(0)?;
    if seq.infinite {
        return Err(crate::terms::changes::infinite_error(ev.ctx));
    }
    let tt = ev.term.tt;
    let by = if ev.nargs() > 1 {
        Some(ev.arg(1)?)
    } else {
        None
    };
    let mut sum = 0.0;
    let mut n = 0usize;
    let mut best: Option<(Datum, Datum)> = None;
    for d in seq.stream {
        let d = d?;
        let key = match &by {
            None => d.clone(),
            Some(Val::Datum(Datum::String(f))) => match field_of(&d, f, "get_field") {
                Ok(x) => x,
                Err(e) if e.kind == ErrorKind::NonExistence => continue,
                Err(e) => return Err(e),
            },
            Some(f) => match apply(ev.ctx, f, d.clone()) {
                Ok(x) => x,
                Err(e) if e.kind == ErrorKind::NonExistence => continue,
                Err(e) => return Err(e).at(1),
            },
        };
        match tt {
            T::SUM | T::AVG => {
                sum += expect_num(&key)?;
                n += 1;
            }
            _ => {
                let better = match &best {
                    None => true,
                    Some((bk, _)) => {
                        if tt == T::MIN {
                            key < *bk
                        } else {
                            key > *bk
                        }
                    }
                };
                if better {
                    best = Some((key, d));
                }
            }
        }
    }
    Ok(Fold { sum, n, best })
}

/// The result of SUM, AVG, MIN or MAX from its accumulation.
pub(crate) fn finish(tt: T, acc: Fold) -> Result<Val> {
    let Fold { sum, n, best } = acc;
    match tt {
        T::SUM => Ok(Val::Datum(crate::terms::math::finite(sum)?)),
        T::AVG => {
            if n == 0 {
                return Err(nonexist("Cannot take the average of an empty stream.  (If you passed `avg` a field name, it may be that no elements of the stream had that field.)"));
            }
            Ok(Val::Datum(Datum::Number(sum / n as f64)))
        }
        _ => {
            let name = if tt == T::MIN { "min" } else { "max" };
            best.map(|(_, d)| Val::Datum(d)).ok_or_else(|| {
                nonexist(format!("Cannot take the {name} of an empty stream.  (If you passed `{name}` a field name, it may be that no elements of the stream had that field.)"))
            })
        }
    }
}

/// CONTAINS: every argument (value or predicate) matches some item.
pub fn contains(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    // Bag semantics, as RethinkDB: each item satisfies at most one wanted value and
    // one wanted predicate.
    let mut values = Vec::new();
    let mut funcs = Vec::new();
    for i in 1..ev.nargs() {
        match ev.arg(i)? {
            f @ Val::Func(_) => funcs.push(f),
            v => values.push(ev.to_datum(v).at(i)?),
        }
    }
    if values.is_empty() && funcs.is_empty() {
        return Ok(Val::Datum(Datum::Bool(true)));
    }
    for d in seq.stream {
        let d = d?;
        if let Some(j) = values.iter().position(|x| *x == d) {
            values.swap_remove(j);
        }
        let mut hit = None;
        for (j, f) in funcs.iter().enumerate() {
            if apply(ev.ctx, f, d.clone())?.truthy() {
                hit = Some(j);
                break;
            }
        }
        if let Some(j) = hit {
            funcs.swap_remove(j);
        }
        if values.is_empty() && funcs.is_empty() {
            return Ok(Val::Datum(Datum::Bool(true)));
        }
    }
    Ok(Val::Datum(Datum::Bool(false)))
}

/// WITH_FIELDS: `has_fields` then `pluck`.
pub fn with_fields(ev: &Ev) -> Result<Val> {
    let seq = match ev.arg(0)? {
        Val::Datum(d) if !matches!(d, Datum::Array(_)) => {
            return Err(logic(format!(
                "Cannot perform has_fields on a non-object non-sequence `{}`.",
                d.to_json_string()
            )))
        }
        v => ev.to_seq(v).at(0)?,
    };
    let mut sel = Vec::new();
    for i in 1..ev.nargs() {
        let s = ev.datum(i)?;
        if !matches!(s, Datum::String(_) | Datum::Array(_) | Datum::Object(_)) {
            return Err(logic(format!(
                "Invalid path argument `{}`.",
                s.to_json_string()
            )));
        }
        sel.push(s);
    }
    let mut out = map_items(seq, move |d| {
        let ok = match &d {
            Datum::Object(o) => sel.iter().all(|s| crate::terms::object::has_path(o, s)),
            _ => false,
        };
        if ok {
            pluck_datum(&d, &sel).map(Some)
        } else {
            Ok(None)
        }
    });
    out.table = None;
    Ok(Val::Seq(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Datum {
        datum::from_json_value(&serde_json::from_str(s).expect("json")).expect("datum")
    }

    #[test]
    fn filter_match_follows_rethinkdb() {
        assert_eq!(
            filter_match(&j(r#"{"a":1}"#), &j(r#"{"a":1,"b":2}"#)).ok(),
            Some(true)
        );
        assert_eq!(
            filter_match(&j(r#"{"a":1}"#), &j(r#"{"a":2}"#)).ok(),
            Some(false)
        );
        assert_eq!(filter_match(&j("{}"), &j("5")).ok(), Some(true));
        // Nested objects match as patterns; a nested non-object must be equal.
        assert_eq!(
            filter_match(&j(r#"{"a":{"b":1}}"#), &j(r#"{"a":{"b":1,"c":2}}"#)).ok(),
            Some(true)
        );
        assert_eq!(
            filter_match(&j(r#"{"a":{"b":1}}"#), &j(r#"{"a":5}"#)).ok(),
            Some(false)
        );
        // r.literal matches exactly.
        let lit = j(r#"{"a":{"$reql_type$":"LITERAL","value":{"b":1}}}"#);
        assert_eq!(filter_match(&lit, &j(r#"{"a":{"b":1}}"#)).ok(), Some(true));
        assert_eq!(
            filter_match(&lit, &j(r#"{"a":{"b":1,"c":2}}"#)).ok(),
            Some(false)
        );
        // A missing field is a non-existence error (filter's `default` decides).
        let e = filter_match(&j(r#"{"a":1}"#), &j(r#"{"b":1}"#)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NonExistence);
        assert_eq!(e.message, "No attribute `a` in object.");
        let e = filter_match(&j(r#"{"a":{"b":1}}"#), &j(r#"{"a":{}}"#)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NonExistence);
        // A value that is not an object is a type error.
        let e = filter_match(&j(r#"{"a":1}"#), &j("5")).unwrap_err();
        assert_eq!(e.message, "Expected type OBJECT but found NUMBER.");
    }
}
