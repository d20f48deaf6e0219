//! Index-aware reads: `get_all`, `between`, `order_by(index=)`, `distinct(index=)`,
//! `min`/`max(index=)`, `eq_join(index=)` and `info()` of table slices.
//!
//! Ranges and orders over an index are `TableSlice`s (`crate::slice`): `between` and
//! `order_by(index=)` return one as a `Val::Table`, so they chain as in RethinkDB and
//! `count()` of a slice counts index entries without reading documents. A missing or
//! unready index fails when the slice is read (RethinkDB's `info` does not read).

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::access::Table;
use crate::error::{logic, nonexist, Result, WithFrame};
use crate::eval::{describe, type_error, Ev};
use crate::slice::TableSlice;
use crate::term::Term;
use crate::terms::index::index_opt;
use crate::value::{Sequence, Val};

fn primary_or(t: &Arc<dyn Table>, name: Option<String>) -> Option<String> {
    name.filter(|n| n != t.primary_key())
}

fn check_key(k: &Datum, secondary: bool) -> Result<()> {
    if k.reql_type() == Some("GEOMETRY") {
        return Err(logic(
            "Cannot use a geospatial index with `get_all`. Use `get_intersecting` instead.",
        ));
    }
    if secondary && matches!(k, Datum::Null) {
        return Err(nonexist("Keys cannot be NULL."));
    }
    Ok(())
}

/// GET_ALL by primary key or secondary index.
pub fn get_all(ev: &Ev) -> Result<Val> {
    let t = match ev.arg(0)? {
        Val::Table(t) if t.slice().is_none() => t,
        other => {
            return Err(logic(format!(
                "Expected type TABLE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
        }
    };
    let index = primary_or(&t, index_opt(ev)?);
    geo_misuse(&t, &index)?;
    let mut keys = Vec::new();
    for i in 1..ev.nargs() {
        let k = ev.datum(i)?;
        check_key(&k, index.is_some()).map_err(|e| e.with_frame(crate::error::Frame::Pos(i)))?;
        if index.is_none() {
            datum::keys::encode_primary(&k).map_err(|e| {
                logic(e.message().to_string()).with_frame(crate::error::Frame::Pos(i))
            })?;
        }
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let table = t.clone();
    let stream: crate::value::DatumStream = match index {
        None => {
            let mut it = keys.into_iter();
            Box::new(std::iter::from_fn(move || loop {
                let k = it.next()?;
                match table.get(&k) {
                    Ok(Some(d)) => return Some(Ok(d)),
                    Ok(None) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }))
        }
        Some(name) => {
            // The first scan runs now, so a missing or unready index fails here.
            let mut it = keys.into_iter();
            let mut cur: Option<crate::value::DatumStream> = match it.next() {
                Some(k) => Some(t.index_scan(
                    &name,
                    Bound::Included(k.clone()),
                    Bound::Included(k),
                    false,
                )?),
                None => {
                    t.index_count_upto(
                        &name,
                        Bound::Included(Datum::MaxVal),
                        Bound::Included(Datum::MaxVal),
                        1,
                    )?;
                    None
                }
            };
            Box::new(std::iter::from_fn(move || loop {
                if let Some(s) = cur.as_mut() {
                    if let Some(d) = s.next() {
                        return Some(d);
                    }
                }
                let k = it.next()?;
                match table.index_scan(&name, Bound::Included(k.clone()), Bound::Included(k), false)
                {
                    Ok(s) => cur = Some(s),
                    Err(e) => return Some(Err(e)),
                }
            }))
        }
    };
    Ok(Val::Seq(Sequence {
        stream,
        is_array: false,
        table: Some(t),
        infinite: false,
    }))
}

fn geo_misuse(t: &Arc<dyn Table>, index: &Option<String>) -> Result<()> {
    if let Some(name) = index {
        if t.index_status()?
            .iter()
            .any(|s| &s.name == name && s.spec.geo)
        {
            return Err(logic(format!(
                "Index `{name}` is a geospatial index.  Only get_nearest and get_intersecting can use a geospatial index."
            )));
        }
    }
    Ok(())
}

/// BETWEEN: a table slice of one index's range.
pub fn between(ev: &Ev) -> Result<Val> {
    let t = match ev.arg(0)? {
        Val::Table(t) => t,
        other => {
            return Err(logic(format!(
                "Expected type TABLE_SLICE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
            .at(0)
        }
    };
    let lo = ev.datum(1)?;
    let hi = ev.datum(2)?;
    if matches!(lo, Datum::Null) || matches!(hi, Datum::Null) {
        return Err(logic(
            "Cannot use `null` in BETWEEN, use `r.minval` or `r.maxval` to denote unboundedness.",
        ));
    }
    let left_open = ev.opt_open("left_bound", false)?;
    let right_closed = !ev.opt_open("right_bound", true)?;
    let requested = index_opt(ev)?;
    let mut slice = match t.slice() {
        Some(s) => {
            if s.between {
                return Err(logic("Cannot perform multiple BETWEENs on the same table."));
            }
            // Without `index`, RethinkDB's `between` uses the index the slice is already
            // ordered by (the primary key for a plain table).
            let want = requested
                .clone()
                .unwrap_or_else(|| s.index_name().to_string());
            if want != s.index_name() {
                return Err(logic(format!(
                    "Cannot call BETWEEN on index `{want}` after ordering on index `{}`.",
                    s.index_name()
                )));
            }
            s.clone()
        }
        None => TableSlice::whole(&t, requested),
    };
    geo_misuse(&slice.base, &slice.index)?;
    slice.lower = match lo {
        Datum::MinVal => Bound::Unbounded,
        d if left_open => Bound::Excluded(d),
        d => Bound::Included(d),
    };
    slice.upper = match hi {
        Datum::MaxVal => Bound::Unbounded,
        d if right_closed => Bound::Included(d),
        d => Bound::Excluded(d),
    };
    slice.between = true;
    // A missing or unready index fails when the slice is read (`info` does not read).
    Ok(Val::Table(slice.into_table()))
}

/// The index of `order_by(index=...)` and whether it is descending.
fn order_index(ev: &Ev) -> Result<(String, bool)> {
    let term = ev
        .term
        .optarg("index")
        .cloned()
        .ok_or_else(|| logic("Expected an index name."))?;
    let (desc, inner) = match term.tt {
        T::DESC => (true, term.args.first().cloned()),
        T::ASC => (false, term.args.first().cloned()),
        _ => (false, Some(term.clone())),
    };
    let inner = inner.ok_or_else(|| logic("Expected an index name."))?;
    // A bad name is charged to the term that produced it: the optarg, or the argument
    // of its `r.asc`/`r.desc`.
    let wrapped = matches!(term.tt, T::DESC | T::ASC);
    let name = (|| {
        let v = crate::eval::eval(ev.ctx, ev.env, &inner)?;
        match ev.to_datum(v)? {
            Datum::String(s) => Ok(s.to_string()),
            d => Err(type_error("STRING", &d)),
        }
    })();
    let name = if wrapped { name.at(0) } else { name };
    Ok((name.at_opt("index")?, desc))
}

/// ORDER_BY with an `index`: the table (slice) ordered by that index; further sort keys
/// order documents with equal index values.
pub fn order_by_index(ev: &Ev) -> Result<Val> {
    let t = match ev.arg(0)? {
        Val::Table(t) => t,
        _ => {
            return Err(logic("Indexed order_by can only be performed on a TABLE or TABLE_SLICE. Make sure order_by comes before any transformations (such as map) or filters."))
        }
    };
    let (name, desc) = order_index(ev)?;
    let mut slice = match t.slice() {
        Some(s) => {
            if s.order.is_some() {
                return Err(logic(
                    "Cannot perform multiple indexed ORDER_BYs on the same table.",
                ));
            }
            let wanted = if name == s.base.primary_key() {
                None
            } else {
                Some(name.clone())
            };
            if s.between && wanted != s.index {
                return Err(logic(format!(
                    "Cannot order by index `{name}` after calling BETWEEN on index `{}`.",
                    s.index_name()
                )));
            }
            let mut s = s.clone();
            s.index = wanted;
            s
        }
        None => TableSlice::whole(&t, Some(name)),
    };
    geo_misuse(&slice.base, &slice.index)?;
    slice.order = Some(desc);
    if ev.nargs() > 1 {
        return order_within_index(ev, &slice, desc);
    }
    Ok(Val::Table(slice.into_table()))
}

/// `order_by(keys..., index=)`: index order, documents with equal index values ordered
/// by the other keys (an array, as RethinkDB's).
fn order_within_index(ev: &Ev, slice: &TableSlice, desc: bool) -> Result<Val> {
    let limit = ev.ctx.array_limit;
    let over = || crate::error::resource(format!("Array over size limit `{limit}`."));
    let mut pairs: Vec<(Datum, Datum)> = Vec::new();
    match &slice.index {
        None => {
            let pk = slice.base.primary_key().to_string();
            for d in slice
                .base
                .scan(slice.lower.clone(), slice.upper.clone(), false)?
            {
                let d = d?;
                pairs.push((d.get(&pk).cloned().unwrap_or(Datum::Null), d));
                if pairs.len() > limit {
                    return Err(over());
                }
            }
        }
        Some(name) => {
            for p in slice
                .base
                .index_pairs(name, slice.lower.clone(), slice.upper.clone())?
            {
                pairs.push(p?);
                if pairs.len() > limit {
                    return Err(over());
                }
            }
        }
    }
    // Each extra key: (descending, field name or function).
    let mut keys = Vec::new();
    for i in 1..ev.nargs() {
        let t = ev
            .term
            .args
            .get(i)
            .cloned()
            .ok_or_else(|| logic("missing sort key"))?;
        let (kdesc, inner) = match t.tt {
            T::DESC => (true, t.args.first().cloned()),
            T::ASC => (false, t.args.first().cloned()),
            _ => (false, Some(t.clone())),
        };
        let inner = inner.ok_or_else(|| logic("missing sort key"))?;
        keys.push((kdesc, crate::eval::eval(ev.ctx, ev.env, &inner)?));
    }
    let mut keyed = Vec::with_capacity(pairs.len());
    for (v, d) in pairs {
        let mut ks = Vec::with_capacity(keys.len());
        for (_, k) in &keys {
            ks.push(match k {
                Val::Datum(Datum::String(f)) => d.get(f).cloned().unwrap_or(Datum::MinVal),
                f => crate::terms::seq::apply(ev.ctx, f, d.clone())?,
            });
        }
        keyed.push((v, ks, d));
    }
    keyed.sort_by(|a, b| {
        let o = if desc { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) };
        keys.iter().enumerate().fold(o, |o, (i, (kdesc, _))| {
            o.then_with(|| {
                let c = a.1.get(i).cmp(&b.1.get(i));
                if *kdesc {
                    c.reverse()
                } else {
                    c
                }
            })
        })
    });
    let out: Vec<Datum> = keyed.into_iter().map(|(_, _, d)| d).collect();
    let mut s = Sequence::from_vec(out);
    s.table = Some(slice.base.clone());
    Ok(Val::Seq(s))
}

/// `info()` of a table slice: its index, bounds and order around the table's info.
pub fn slice_info(ev: &Ev, t: &Arc<dyn Table>) -> Result<Datum> {
    let s = t.slice().ok_or_else(|| logic("Expected a table slice."))?;
    let term = Term {
        tt: T::INFO,
        args: vec![Term::datum(Datum::Null)],
        optargs: Vec::new(),
        datum: Datum::Null,
        path: ev.term.path.clone(),
    };
    let sub = Ev::new(ev.ctx, ev.env, &term);
    *sub.arg0.borrow_mut() = Some(Val::Table(s.base.clone()));
    let table_info = crate::terms::control::info(&sub).and_then(|v| ev.to_datum(v))?;
    let unachievable = matches!(
        s.lower,
        Bound::Included(Datum::MaxVal) | Bound::Excluded(Datum::MaxVal)
    ) || matches!(
        s.upper,
        Bound::Included(Datum::MinVal) | Bound::Excluded(Datum::MinVal)
    );
    let sorting = match s.order {
        None => "UNORDERED",
        Some(false) => "ASCENDING",
        Some(true) => "DESCENDING",
    };
    let mut pairs = vec![
        ("index", Datum::str(s.index_name())),
        ("table", table_info),
        ("type", Datum::str("TABLE_SLICE")),
        ("sorting", Datum::str(sorting)),
    ];
    for (side, side_type, b) in [
        ("left_bound", "left_bound_type", &s.lower),
        ("right_bound", "right_bound_type", &s.upper),
    ] {
        let (ty, v) = match b {
            _ if unachievable => ("unachievable", None),
            Bound::Unbounded => ("unbounded", None),
            Bound::Included(d) => ("closed", Some(d.clone())),
            Bound::Excluded(d) => ("open", Some(d.clone())),
        };
        if let Some(v) = v {
            pairs.push((side, v));
        }
        pairs.push((side_type, Datum::str(ty)));
    }
    Ok(Datum::from_pairs(pairs))
}

/// The slice a `distinct`/`min`/`max` with an index reads.
fn slice_on(t: &Arc<dyn Table>, name: String) -> Result<TableSlice> {
    let mut s = match t.slice() {
        Some(s) => s.clone(),
        None => TableSlice::whole(t, None),
    };
    let wanted = if name == s.base.primary_key() {
        None
    } else {
        Some(name)
    };
    if s.between && wanted != s.index {
        return Err(logic(format!(
            "Cannot use index `{}` after calling BETWEEN on index `{}`.",
            wanted.as_deref().unwrap_or_else(|| s.base.primary_key()),
            s.index_name()
        )));
    }
    s.index = wanted;
    geo_misuse(&s.base, &s.index)?;
    Ok(s)
}

/// DISTINCT with an `index` on a table (slice): the distinct index values, in index
/// order, read from the index entries (no document is fetched for a secondary index).
pub fn distinct_on(t: &Arc<dyn Table>, name: String) -> Result<Val> {
    if name == t.primary_key() {
        // Primary keys are distinct already: RethinkDB maps the slice (whatever index it
        // was read on) to each document's key.
        let s = match t.slice() {
            Some(s) => s.clone(),
            None => TableSlice::whole(t, None),
        };
        let pk = name;
        let docs = s.stream()?;
        let keys = docs.map(move |d| d.map(|d| d.get(&pk).cloned().unwrap_or(Datum::Null)));
        return Ok(Val::Seq(Sequence::stream(Box::new(keys))));
    }
    let s = slice_on(t, name)?;
    let desc = s.order.unwrap_or(false);
    let inner: crate::value::DatumStream = match &s.index {
        None => {
            let pk = s.base.primary_key().to_string();
            let docs = s.base.scan(s.lower.clone(), s.upper.clone(), desc)?;
            Box::new(docs.map(move |d| d.map(|d| d.get(&pk).cloned().unwrap_or(Datum::Null))))
        }
        Some(name) => s
            .base
            .index_values(name, s.lower.clone(), s.upper.clone(), desc)?,
    };
    let mut last: Option<Datum> = None;
    let stream = inner.filter_map(move |d| match d {
        Ok(d) if last.as_ref() == Some(&d) => None,
        Ok(d) => {
            last = Some(d.clone());
            Some(Ok(d))
        }
        Err(e) => Some(Err(e)),
    });
    Ok(Val::Seq(Sequence::stream(Box::new(stream))))
}

/// MIN/MAX with an `index` on a table (slice): the document with the smallest/largest
/// index value (the first entry read from either end of the index).
pub fn min_max_on(t: &Arc<dyn Table>, name: String, max: bool) -> Result<Val> {
    let mut s = slice_on(t, name)?;
    s.order = Some(max);
    let first = s.stream()?.next().transpose()?;
    let what = if max { "max" } else { "min" };
    first.map(Val::Datum).ok_or_else(|| {
        nonexist(format!("Cannot take the {what} of an empty stream.  (If you passed `{what}` a field name, it may be that no elements of the stream had that field.)"))
    })
}

/// EQ_JOIN on a secondary index: each left item joins every document of `table` whose
/// index value equals the item's key (once per matching entry of a multi index).
pub fn eq_join(
    left: Sequence,
    key_of: impl Fn(&Datum) -> Result<Option<Datum>> + Send + 'static,
    table: &Arc<dyn Table>,
    name: &str,
    ordered: bool,
    array_limit: usize,
) -> Result<Val> {
    // Fails now for a missing, unready or geospatial index.
    geo_misuse(table, &Some(name.to_string()))?;
    table.index_count_upto(
        name,
        Bound::Included(Datum::MaxVal),
        Bound::Included(Datum::MaxVal),
        1,
    )?;
    let table = table.clone();
    let name = name.to_string();
    let is_array = left.is_array;
    let lookup = move |d: &Datum| -> Result<Vec<(Datum, Datum)>> {
        let Some(k) = key_of(d)? else {
            return Ok(Vec::new());
        };
        if k.reql_type() == Some("GEOMETRY") {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for r in table.index_scan(
            &name,
            Bound::Included(k.clone()),
            Bound::Included(k.clone()),
            false,
        )? {
            out.push((k.clone(), pair(d.clone(), r?)));
        }
        Ok(out)
    };
    if ordered {
        let mut keyed = Vec::new();
        for d in left.collect(array_limit)? {
            keyed.extend(lookup(&d)?);
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let out: Vec<Datum> = keyed.into_iter().map(|(_, p)| p).collect();
        let mut s = Sequence::from_vec(out);
        s.is_array = is_array;
        return Ok(Val::Seq(s));
    }
    let mut inner = left.stream;
    let mut pending: std::vec::IntoIter<(Datum, Datum)> = Vec::new().into_iter();
    let stream = std::iter::from_fn(move || loop {
        if let Some((_, p)) = pending.next() {
            return Some(Ok(p));
        }
        let d = match inner.next()? {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        match lookup(&d) {
            Ok(v) => pending = v.into_iter(),
            Err(e) => return Some(Err(e)),
        }
    });
    let mut s = Sequence::stream(Box::new(stream));
    s.is_array = is_array;
    Ok(Val::Seq(s))
}

fn pair(left: Datum, right: Datum) -> Datum {
    Datum::from_pairs([("left", left), ("right", right)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTable;

    #[test]
    fn distinct_on_the_primary_key_follows_a_between_on_another_index() {
        let n = |x: f64| Datum::Number(x);
        let docs = (0..6)
            .map(|i| Datum::from_pairs([("id", n(f64::from(i))), ("a", n(f64::from(i % 2)))]))
            .collect();
        let table: Arc<dyn Table> = Arc::new(MemTable::new(docs));
        let mut s = TableSlice::whole(&table, Some("a".into()));
        s.lower = Bound::Included(n(0.0));
        s.upper = Bound::Excluded(n(1.0));
        s.between = true;
        let slice = s.into_table();
        let keys = match distinct_on(&slice, "id".into()) {
            Ok(Val::Seq(seq)) => seq.collect(100).ok(),
            _ => None,
        };
        assert_eq!(keys, Some(vec![n(0.0), n(2.0), n(4.0)]));
        // Another secondary index after BETWEEN is still an error.
        let e = distinct_on(&slice, "b".into()).err().map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("Cannot use index `b` after calling BETWEEN on index `a`.")
        );
    }
}
