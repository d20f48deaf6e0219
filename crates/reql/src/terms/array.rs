//! Array terms: `append`, `prepend`, `difference`, the `set_*` family, `insert_at`,
//! `splice_at`, `delete_at`, `change_at`, `offsets_of`, and `for_each`.
//!
//! Index rules follow RethinkDB: insertion points range over `[-(n+1), n]`, element
//! positions over `[-n, n)`; a too-large index reports the array size, a too-negative
//! one the index.

use datum::Datum;

use crate::error::{logic, nonexist, Result, WithFrame};
use crate::eval::{expect_array, Ev};
use crate::terms::math::int_of;
use crate::terms::seq::apply;
use crate::value::{Sequence, Val};

/// Argument `i` as an array. The array terms take their arguments as plain datums and
/// check them afterwards, so a wrong type is charged to the term itself.
fn array_arg(ev: &Ev, i: usize) -> Result<Vec<Datum>> {
    let d = ev.datum(i)?;
    Ok(expect_array(&d)?.to_vec())
}

fn done(ev: &Ev, v: Vec<Datum>) -> Result<Val> {
    crate::terms::control::check_array_size(ev, v.len())?;
    Ok(Val::Datum(Datum::array(v)))
}

/// APPEND.
pub fn append(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    a.push(ev.datum(1)?);
    done(ev, a)
}

/// PREPEND.
pub fn prepend(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    a.insert(0, ev.datum(1)?);
    done(ev, a)
}

/// DIFFERENCE: items of the first array not in the second.
pub fn difference(ev: &Ev) -> Result<Val> {
    let a = array_arg(ev, 0)?;
    let b = array_arg(ev, 1)?;
    done(ev, a.into_iter().filter(|x| !b.contains(x)).collect())
}

fn distinct(items: impl IntoIterator<Item = Datum>) -> Vec<Datum> {
    let mut out: Vec<Datum> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// SET_INSERT.
pub fn set_insert(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    a.push(ev.datum(1)?);
    done(ev, distinct(a))
}

/// SET_UNION.
pub fn set_union(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    a.extend(array_arg(ev, 1)?);
    done(ev, distinct(a))
}

/// SET_INTERSECTION.
pub fn set_intersection(ev: &Ev) -> Result<Val> {
    let a = array_arg(ev, 0)?;
    let b = array_arg(ev, 1)?;
    done(ev, distinct(a.into_iter().filter(|x| b.contains(x))))
}

/// SET_DIFFERENCE.
pub fn set_difference(ev: &Ev) -> Result<Val> {
    let a = array_arg(ev, 0)?;
    let b = array_arg(ev, 1)?;
    done(ev, distinct(a.into_iter().filter(|x| !b.contains(x))))
}

/// An index into `n` items; `insertion` allows `n` itself (and `-(n+1)`).
fn index(ev: &Ev, i: usize, n: usize, insertion: bool) -> Result<usize> {
    let d = ev.datum(i)?;
    let k = int_of(&d)?;
    let n = n as i64;
    let max = if insertion { n } else { n - 1 };
    let resolved = if k < 0 { k + max + 1 } else { k };
    if k > max {
        return Err(nonexist(format!(
            "Index `{k}` out of bounds for array of size: `{n}`."
        )));
    }
    if resolved < 0 {
        return Err(nonexist(format!("Index out of bounds: {k}")));
    }
    Ok(resolved as usize)
}

/// INSERT_AT.
pub fn insert_at(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    let i = index(ev, 1, a.len(), true)?;
    a.insert(i, ev.datum(2)?);
    done(ev, a)
}

/// SPLICE_AT.
pub fn splice_at(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    let i = index(ev, 1, a.len(), true)?;
    let b = array_arg(ev, 2)?;
    let tail = a.split_off(i);
    a.extend(b);
    a.extend(tail);
    done(ev, a)
}

/// DELETE_AT: one element, or the range `[i, j)`.
pub fn delete_at(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    if ev.nargs() == 2 {
        let i = index(ev, 1, a.len(), false)?;
        a.remove(i);
        return done(ev, a);
    }
    let i = index(ev, 1, a.len(), true)?;
    let n = a.len() as i64;
    let jd = ev.datum(2)?;
    let jk = int_of(&jd)?;
    let jr = if jk < 0 { jk + n } else { jk };
    if jk > n {
        return Err(nonexist(format!(
            "Index `{jk}` out of bounds for array of size: `{n}`."
        )));
    }
    if jr < 0 {
        return Err(nonexist(format!("Index out of bounds: {jk}")));
    }
    let j = jr as usize;
    if i > j {
        return Err(logic(format!(
            "Start index `{i}` is greater than end index `{j}`."
        )));
    }
    a.drain(i..j);
    done(ev, a)
}

/// CHANGE_AT.
pub fn change_at(ev: &Ev) -> Result<Val> {
    let mut a = array_arg(ev, 0)?;
    let i = index(ev, 1, a.len(), false)?;
    let v = ev.datum(2)?;
    if let Some(slot) = a.get_mut(i) {
        *slot = v;
    }
    done(ev, a)
}

/// OFFSETS_OF: positions of items equal to a value or matching a predicate.
pub fn offsets_of(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let target = match ev.arg(1)? {
        f @ Val::Func(_) => f,
        v => Val::Datum(ev.to_datum(v).at(1)?),
    };
    let ctx = ev.ctx.clone();
    let is_array = seq.is_array;
    let mut i = 0usize;
    let mut inner = seq.stream;
    let stream = std::iter::from_fn(move || loop {
        let d = match inner.next()? {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        let pos = i;
        i += 1;
        let hit = match &target {
            Val::Func(_) => match apply(&ctx, &target, d) {
                Ok(x) => x.truthy(),
                Err(e) => return Some(Err(e)),
            },
            Val::Datum(x) => &d == x,
            _ => false,
        };
        if hit {
            return Some(Ok(Datum::from(pos)));
        }
    });
    let mut out = Sequence::stream(Box::new(stream));
    out.is_array = is_array;
    Ok(Val::Seq(out))
}

/// FOR_EACH: runs a write query per item and sums the write results.
pub fn for_each(ev: &Ev) -> Result<Val> {
    let seq = ev.seq(0)?;
    let f = ev.arg(1)?;
    let mut total = datum::Object::new();
    for d in seq.stream {
        let d = d?;
        let r = match &f {
            Val::Func(_) => match ev.call(&f, vec![d]).at(1)? {
                Val::Datum(x) => x,
                Val::Single(s) => s.doc,
                Val::Seq(s) if s.is_array => Datum::array(s.collect(ev.ctx.array_limit)?),
                _ => return Err(logic("FOR_EACH expects one or more basic write queries.")).at(1),
            },
            Val::Datum(x) => x.clone(),
            _ => return Err(logic("FOR_EACH expects a function.")),
        };
        let results: Vec<Datum> = match &r {
            Datum::Object(_) => vec![r.clone()],
            Datum::Array(items) if items.iter().all(|x| matches!(x, Datum::Object(_))) => {
                items.to_vec()
            }
            other => {
                let found = match other {
                    Datum::Array(items) => items
                        .iter()
                        .find(|x| !matches!(x, Datum::Object(_)))
                        .map_or("ARRAY".into(), Datum::type_name),
                    x => x.type_name(),
                };
                return Err(logic(format!(
                    "FOR_EACH expects one or more basic write queries.  Expected type ARRAY but found {found}."
                )));
            }
        };
        for res in results {
            merge_stats(&mut total, &res);
        }
    }
    const WRITE_KEYS: [&str; 6] = [
        "deleted",
        "errors",
        "inserted",
        "replaced",
        "skipped",
        "unchanged",
    ];
    // Document writes get the full write-result shape; admin results (`db_create`,
    // `table_create`) keep only their own keys, as in RethinkDB.
    if total.is_empty() || total.keys().any(|k| WRITE_KEYS.contains(&&**k)) {
        for k in WRITE_KEYS {
            total
                .entry(datum::Str::from(k))
                .or_insert(Datum::Number(0.0));
        }
    }
    Ok(Val::Datum(Datum::object(total)))
}

/// Adds one write result into a running total (numbers add, lists concatenate,
/// the first `first_error` wins).
fn merge_stats(total: &mut datum::Object, res: &Datum) {
    let Some(o) = res.as_object() else { return };
    for (k, v) in o.iter() {
        let merged = match (total.get(k), v) {
            (Some(Datum::Number(a)), Datum::Number(b)) => Datum::Number(a + b),
            (Some(Datum::Array(a)), Datum::Array(b)) => {
                let mut x = a.to_vec();
                x.extend(b.iter().cloned());
                Datum::array(x)
            }
            (Some(old), _) => old.clone(),
            (None, v) => v.clone(),
        };
        total.insert(k.clone(), merged);
    }
}
