//! Joins: `inner_join`, `outer_join`, `eq_join` and `zip`.
//!
//! Results are `{left, right}` objects (`{left}` alone for an unmatched outer row), and
//! `zip` merges `right` into `left`. All joins are lazy over the left sequence. The
//! right side of `inner_join`/`outer_join` is scanned again for every left row when it
//! is a table (as RethinkDB's rewrite into `concat_map` + `filter` does) and collected
//! once, within the array limit, when it is a stream. `eq_join` looks each left key up
//! by primary key; a secondary `index` goes through `terms::index::eq_join`.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::access::Table;
use crate::error::{logic, ErrorKind, Result, WithFrame};
use crate::eval::{call, expect_func, to_datum, Ev};
use crate::terms::object::field_of;
use crate::value::{DatumStream, Sequence, Val};

/// `{left: l, right: r}`.
fn pair(l: Datum, r: Datum) -> Datum {
    Datum::from_pairs([("left", l), ("right", r)])
}

/// The right side of a nested-loop join.
enum Right {
    Table(Arc<dyn Table>),
    Items(Arc<datum::Array>),
}

impl Right {
    fn rows(&self) -> Result<DatumStream> {
        match self {
            Right::Table(t) => t.scan(Bound::Unbounded, Bound::Unbounded, false),
            Right::Items(a) => {
                let a = a.clone();
                let mut i = 0;
                Ok(Box::new(std::iter::from_fn(move || {
                    let d = a.get(i).cloned();
                    i += 1;
                    d.map(Ok)
                })))
            }
        }
    }
}

/// INNER_JOIN and OUTER_JOIN.
pub fn nested_join(ev: &Ev, outer: bool) -> Result<Val> {
    let left = ev.seq(0)?;
    let right = match ev.arg(1)? {
        Val::Table(t) => Right::Table(t),
        other => {
            let s = ev.to_seq(other).at(1)?;
            Right::Items(Arc::new(s.collect(ev.ctx.array_limit).at(1)?.into()))
        }
    };
    let f = expect_func(ev.arg(2)?).at(2)?;
    let ctx = ev.ctx.clone();
    let is_array = left.is_array;
    let infinite = left.infinite;
    let mut inner = left.stream;
    let mut pending: std::vec::IntoIter<Datum> = Vec::new().into_iter();
    let mut failed = false;
    let stream = std::iter::from_fn(move || loop {
        if let Some(d) = pending.next() {
            return Some(Ok(d));
        }
        if failed {
            return None;
        }
        let l = match inner.next()? {
            Ok(l) => l,
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        };
        let matched = (|| -> Result<Vec<Datum>> {
            let mut out = Vec::new();
            for r in right.rows()? {
                let r = r?;
                let v = call(&ctx, &f, vec![l.clone(), r.clone()]).at(2)?;
                if to_datum(&ctx, v).at(2)?.truthy() {
                    out.push(pair(l.clone(), r));
                }
            }
            if out.is_empty() && outer {
                out.push(Datum::from_pairs([("left", l.clone())]));
            }
            Ok(out)
        })();
        match matched {
            Ok(v) => pending = v.into_iter(),
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
    });
    let mut out = Sequence::stream(Box::new(stream));
    out.is_array = is_array;
    out.infinite = infinite;
    Ok(Val::Seq(out))
}

/// INNER_JOIN.
pub fn inner_join(ev: &Ev) -> Result<Val> {
    nested_join(ev, false)
}

/// OUTER_JOIN.
pub fn outer_join(ev: &Ev) -> Result<Val> {
    nested_join(ev, true)
}

/// EQ_JOIN: `left.eq_join(field_or_func, right_table, index=, ordered=)`.
pub fn eq_join(ev: &Ev) -> Result<Val> {
    let left = ev.seq(0)?;
    let key = ev.arg(1)?;
    let table = ev.table(2)?;
    let ordered = ev.opt_bool("ordered", false)?;
    let mut secondary = None;
    if let Some(idx) = ev.opt_datum("index")? {
        let name = crate::eval::expect_str(&idx).at_opt("index")?.to_string();
        if name != table.primary_key() {
            secondary = Some(name);
        }
    }
    let ctx = ev.ctx.clone();
    let is_array = left.is_array;
    let infinite = left.infinite;
    let key_of = move |d: &Datum| -> Result<Option<Datum>> {
        let r = match &key {
            Val::Datum(Datum::String(f)) => field_of(d, f, "get_field"),
            Val::Datum(other) => Err(crate::eval::type_error("STRING", other)),
            f => call(&ctx, f, vec![d.clone()]).and_then(|v| to_datum(&ctx, v)),
        };
        match r {
            Ok(Datum::Null) => Ok(None),
            Ok(k) => Ok(Some(k)),
            Err(e) if e.kind == ErrorKind::NonExistence => Ok(None),
            Err(e) => Err(e).at(1),
        }
    };
    if let Some(name) = secondary {
        return crate::terms::index::eq_join(
            left,
            key_of,
            &table,
            &name,
            ordered,
            ev.ctx.array_limit,
        );
    }
    let lookup = move |d: Datum| -> Result<Option<(Datum, Datum)>> {
        let Some(k) = key_of(&d)? else {
            return Ok(None);
        };
        // A key that can never be a primary key matches nothing.
        match table.get(&k) {
            Ok(Some(r)) => Ok(Some((k, pair(d, r)))),
            Ok(None) => Ok(None),
            Err(e) if e.kind == ErrorKind::QueryLogic => Ok(None),
            Err(e) => Err(e),
        }
    };
    if ordered {
        let items = left.collect(ev.ctx.array_limit)?;
        let mut keyed = Vec::new();
        for d in items {
            if let Some(kp) = lookup(d)? {
                keyed.push(kp);
            }
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let out: Vec<Datum> = keyed.into_iter().map(|(_, p)| p).collect();
        let mut s = Sequence::from_vec(out);
        s.is_array = is_array;
        return Ok(Val::Seq(s));
    }
    let seq = crate::terms::seq::map_items(left, move |d| Ok(lookup(d)?.map(|(_, p)| p)));
    Ok(Val::Seq(Sequence {
        table: None,
        is_array,
        infinite,
        ..seq
    }))
}

/// ZIP: `left` merged with `right` for every join result.
pub fn zip(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let mut out = crate::terms::seq::map_items(seq, |d| {
        let left = match &d {
            Datum::Object(o) if !d.is_ptype() => o.get("left").cloned(),
            _ => None,
        };
        let Some(left) = left else {
            return Err(logic("ZIP can only be called on the result of a join."));
        };
        match d.get("right") {
            Some(r) => crate::terms::object::merge_datum(&left, r).map(Some),
            None => Ok(Some(left)),
        }
    });
    out.table = None;
    Ok(Val::Seq(out))
}
