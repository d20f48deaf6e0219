//! Sequence terms that build new streams: `fold` (with `emit`/`final_emit`), `sample`,
//! and the answers RethinkDB takes from a table's primary-key order: `distinct` and
//! argument-less `min`/`max` on a whole table (`union` lives in `terms::union`).
//!
//! `fold` with `emit` stays lazy. `sample` holds at most `n` items (reservoir sampling).

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::error::{logic, nonexist, Result, WithFrame};
use crate::eval::{call, expect_func, expect_int, to_datum, Ev};
use crate::terms::control::check_step_nesting;
use crate::value::{DatumStream, Sequence, Val};

/// FOLD: `seq.fold(base, f)` → the last accumulator; with `emit`, a stream of everything
/// `emit(old_acc, row, new_acc)` returns, then `final_emit(acc)`.
pub fn fold(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let base = ev.datum(1)?;
    let f = expect_func(ev.arg(2)?).at(2)?;
    let emit = match ev.opt("emit")? {
        Some(v) => Some(expect_func(v).at_opt("emit")?),
        None => None,
    };
    let final_emit = match ev.opt("final_emit")? {
        Some(v) => Some(expect_func(v).at_opt("final_emit")?),
        None => None,
    };
    let ctx = ev.ctx.clone();
    let Some(emit) = emit else {
        if seq.infinite {
            return Err(logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array."));
        }
        let mut acc = base;
        for d in seq.stream {
            let old = acc.clone();
            let r = call(&ctx, &f, vec![acc, d?]).at(2)?;
            acc = to_datum(&ctx, r).at(2)?;
            check_step_nesting(&old, &acc).at(2)?;
        }
        return match final_emit {
            None => Ok(Val::Datum(acc)),
            // Without `emit`, RethinkDB returns what `final_emit` returns, array or not.
            Some(fe) => {
                let r = call(&ctx, &fe, vec![acc]).at_opt("final_emit")?;
                Ok(Val::Datum(to_datum(&ctx, r).at_opt("final_emit")?))
            }
        };
    };
    let is_array = seq.is_array;
    let infinite = seq.infinite;
    let mut inner = seq.stream;
    let mut acc = Some(base);
    let mut pending: std::vec::IntoIter<Datum> = Vec::new().into_iter();
    let mut done = false;
    let emitted =
        |ctx: &Arc<crate::ctx::QueryCtx>, v: Result<Val>, opt: &str| -> Result<Vec<Datum>> {
            let d = to_datum(ctx, v?).at_opt(opt)?;
            Ok(crate::eval::expect_array(&d).at_opt(opt)?.to_vec())
        };
    let stream = std::iter::from_fn(move || loop {
        if let Some(d) = pending.next() {
            return Some(Ok(d));
        }
        if done {
            return None;
        }
        let row = match inner.next() {
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                done = true;
                return Some(Err(e));
            }
            None => {
                done = true;
                let (Some(fe), Some(a)) = (&final_emit, acc.take()) else {
                    return None;
                };
                match emitted(&ctx, call(&ctx, fe, vec![a]), "final_emit") {
                    Ok(v) => pending = v.into_iter(),
                    Err(e) => return Some(Err(e)),
                }
                continue;
            }
        };
        let old = acc.take().unwrap_or(Datum::Null);
        let step = call(&ctx, &f, vec![old.clone(), row.clone()])
            .and_then(|v| to_datum(&ctx, v))
            .and_then(|new| check_step_nesting(&old, &new).map(|()| new))
            .at(2);
        let new = match step {
            Ok(n) => n,
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
        };
        match emitted(&ctx, call(&ctx, &emit, vec![old, row, new.clone()]), "emit") {
            Ok(v) => pending = v.into_iter(),
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
        }
        acc = Some(new);
    });
    let mut out = Sequence::stream(Box::new(stream));
    out.is_array = is_array;
    out.infinite = infinite;
    Ok(Val::Seq(out))
}

/// SAMPLE: up to `n` items chosen uniformly (reservoir sampling), as an array.
pub fn sample(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let n = expect_int(&ev.datum(1)?).at(1)?;
    if n < 0 {
        return Err(logic(format!(
            "Number of items to sample must be non-negative, got `{n}`."
        )));
    }
    if seq.infinite {
        return Err(logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array."));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let table = seq.table.clone();
    let mut kept: Vec<Datum> = Vec::new();
    let mut rng = Rng::seeded();
    for (seen, d) in seq.stream.enumerate() {
        let d = d?;
        if kept.len() < n {
            // The sample is an array: the array limit bounds it as it grows.
            crate::terms::control::check_array_size(ev, kept.len() + 1)?;
            kept.push(d);
        } else {
            let j = rng.below(seen as u64 + 1);
            if let Some(slot) = usize::try_from(j).ok().and_then(|j| kept.get_mut(j)) {
                *slot = d;
            }
        }
    }
    // Reservoir order is biased towards the input order; shuffle it.
    for i in (1..kept.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        kept.swap(i, j);
    }
    let mut out = Sequence::from_vec(kept);
    out.table = table;
    Ok(Val::Seq(out))
}

/// A small xorshift generator seeded from the clock (sampling needs no cryptography).
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9E37_79B9_7F4A_7C15);
        Rng(t | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        if n == 0 {
            0
        } else {
            x % n
        }
    }
}

/// DISTINCT on a whole table: a stream in primary-key order (rows are distinct by their
/// key); with `index` set to the primary key, the distinct keys. `None` when this is not
/// that case, for `seq::distinct` to handle.
pub fn distinct_table(ev: &Ev) -> Result<Option<Val>> {
    let v = ev.arg(0)?;
    let idx = ev.opt_datum("index")?;
    let t = match v {
        Val::Table(t) => t,
        other => {
            if idx.is_some() {
                return Err(logic("Can only perform an indexed distinct on a TABLE.")).at(0);
            }
            *ev.arg0.borrow_mut() = Some(other);
            return Ok(None);
        }
    };
    let stream = t.scan(Bound::Unbounded, Bound::Unbounded, false)?;
    let out: DatumStream = match idx {
        None => stream,
        Some(i) => {
            let name = crate::eval::expect_str(&i).at_opt("index")?.to_string();
            if name != t.primary_key() || t.slice().is_some() {
                return crate::terms::index::distinct_on(&t, name).map(Some);
            }
            Box::new(stream.map(move |d| {
                let d = d?;
                Ok(d.get(&name).cloned().unwrap_or(Datum::Null))
            }))
        }
    };
    Ok(Some(Val::Seq(Sequence::stream(out))))
}

/// `min`/`max` without a function on a whole table (or with `index`): the first or last
/// row in index order. `None` when this is not that case.
pub fn min_max_table(ev: &Ev) -> Result<Option<Val>> {
    let idx = ev.opt_datum("index")?;
    let name = if ev.term.tt == T::MIN { "min" } else { "max" };
    if idx.is_some() && ev.nargs() > 1 {
        return Err(logic(format!(
            "Cannot provide both a function and an index to {name}."
        )));
    }
    let v = ev.arg(0)?;
    let t = match v {
        Val::Table(t) if ev.nargs() == 1 => t,
        other => {
            if idx.is_some() {
                return Err(logic(format!(
                    "Expected type TABLE but found {}.",
                    other.kind_name()
                )))
                .at(0);
            }
            *ev.arg0.borrow_mut() = Some(other);
            return Ok(None);
        }
    };
    if let Some(i) = idx {
        let iname = crate::eval::expect_str(&i).at_opt("index")?.to_string();
        if iname != t.primary_key() || t.slice().is_some() {
            return crate::terms::index::min_max_on(&t, iname, ev.term.tt == T::MAX).map(Some);
        }
    }
    let mut stream = t.scan(Bound::Unbounded, Bound::Unbounded, ev.term.tt == T::MAX)?;
    match stream.next() {
        Some(d) => {
            let d = d?;
            let key = d.get(t.primary_key()).cloned().unwrap_or(Datum::Null);
            Ok(Some(Val::Single(crate::value::SingleSel {
                table: t,
                key,
                doc: d,
            })))
        }
        None => Err(nonexist(format!(
            "`{name}` found no entries in the specified index."
        ))),
    }
}

/// The error for a secondary index this module cannot read (the secondary-index engine
/// answers these terms itself once it exists).
pub fn secondary_index_missing(
    t: &Arc<dyn crate::access::Table>,
    name: &str,
) -> crate::error::ReqlError {
    crate::error::op_failed(format!(
        "Index `{}` was not found on table `{}.{}`.",
        name,
        t.db(),
        t.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_stays_below_its_bound() {
        let mut r = Rng(12345);
        for n in 1..50u64 {
            assert!(r.below(n) < n);
        }
        assert_eq!(r.below(0), 0);
    }
}
