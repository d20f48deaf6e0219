//! `union`: concatenation of its inputs, or, with `interleave` set to an ordering, a
//! merge of inputs that are already in that order (RethinkDB's ordered union).
//!
//! `interleave` is `true` (the default: any interleaving; Ponder concatenates in argument
//! order, one of the orders RethinkDB may produce), `false` (concatenation in argument
//! order), a field name, a function, `r.asc`/`r.desc` of either, or an array of those
//! (compared in turn, as `order_by` compares its keys). RethinkDB's comparison rules
//! apply: a key whose field or function fails with a non-existence error sorts before
//! every value (after every value for `r.desc`).
//!
//! The merge is lazy and holds one item per input: it yields the smallest head, then
//! pulls the next item of that input, which must not sort before the item it follows,
//! or the union fails with "The streams given as arguments are not ordered by given
//! ordering." (checked as items are pulled, as RethinkDB checks it). Ties go to the
//! earlier input; RethinkDB leaves their order open.

use std::cmp::Ordering;
use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::ctx::QueryCtx;
use crate::error::{logic, ErrorKind, Result, WithFrame};
use crate::eval::{call, to_datum, Ev};
use crate::term::Term;
use crate::terms::object::field_of;
use crate::value::{DatumStream, Sequence, Val};

/// RethinkDB's error for an input that is out of the `interleave` order.
const NOT_ORDERED: &str = "The streams given as arguments are not ordered by given ordering.";

/// One key of a merge ordering.
enum Key {
    /// A field of each item.
    Field(String),
    /// A function of each item.
    Func(Val),
}

/// One key and its direction (`true` for `r.desc`).
struct Ordered {
    key: Key,
    desc: bool,
}

/// UNION.
pub fn union(ev: &Ev) -> Result<Val> {
    let keys = merge_keys(ev)?;
    let mut seqs = Vec::new();
    for i in 0..ev.nargs() {
        seqs.push(ev.seq(i)?);
    }
    if keys.is_none()
        && seqs
            .iter()
            .any(|s| crate::terms::changes::is_feed(ev.ctx, s))
    {
        return Ok(Val::Seq(crate::terms::changes::union(seqs)));
    }
    let is_array = seqs.iter().all(|s| s.is_array);
    let infinite = seqs.iter().any(|s| s.infinite);
    let streams = seqs.into_iter().map(|s| s.stream);
    let stream: DatumStream = match keys {
        None => Box::new(streams.flatten()),
        Some(keys) => Box::new(Merge::new(ev.ctx.clone(), streams.collect(), keys)),
    };
    let mut out = Sequence::stream(stream);
    out.is_array = is_array;
    out.infinite = infinite;
    Ok(Val::Seq(out))
}

/// The ordering `interleave` asks for, or `None` to concatenate.
fn merge_keys(ev: &Ev) -> Result<Option<Vec<Ordered>>> {
    let Some(t) = ev.term.optarg("interleave") else {
        return Ok(None);
    };
    let keys = match t.tt {
        T::ASC | T::DESC => vec![ordered(ev, t)?],
        T::MAKE_ARRAY => t
            .args
            .iter()
            .map(|a| ordered(ev, a))
            .collect::<Result<Vec<_>>>()?,
        _ => match crate::eval::eval(ev.ctx, ev.env, t).at_opt("interleave")? {
            Val::Datum(Datum::Bool(_)) => return Ok(None),
            Val::Datum(Datum::Array(items)) => items
                .iter()
                .map(|d| match d {
                    Datum::String(s) => Ok(Ordered {
                        key: Key::Field(s.to_string()),
                        desc: false,
                    }),
                    other => Err(logic(format!(
                        "Expected type STRING but found {}.",
                        other.type_name()
                    ))),
                })
                .collect::<Result<Vec<_>>>()
                .at_opt("interleave")?,
            v => vec![Ordered {
                key: key_of(v).at_opt("interleave")?,
                desc: false,
            }],
        },
    };
    Ok(Some(keys))
}

/// A key given as a term: `r.asc(k)`, `r.desc(k)` or `k` (a field name or function).
fn ordered(ev: &Ev, t: &Arc<Term>) -> Result<Ordered> {
    let (desc, inner) = match t.tt {
        T::DESC => (true, t.args.first()),
        T::ASC => (false, t.args.first()),
        _ => (false, Some(t)),
    };
    let inner = inner.ok_or_else(|| logic("Expected 1 argument but found 0."))?;
    let v = crate::eval::eval(ev.ctx, ev.env, inner).at_opt("interleave")?;
    Ok(Ordered {
        key: key_of(v).at_opt("interleave")?,
        desc,
    })
}

fn key_of(v: Val) -> Result<Key> {
    match v {
        Val::Datum(Datum::String(s)) => Ok(Key::Field(s.to_string())),
        Val::Func(f) => Ok(Key::Func(Val::Func(f))),
        Val::Datum(d) => Err(logic(format!(
            "Expected BOOL, STRING or FUNCTION for optarg `interleave` but found {}.",
            d.type_name()
        ))),
        other => Err(logic(format!(
            "Expected type DATUM but found {}.",
            other.kind_name()
        ))),
    }
}

/// The lazy k-way merge.
struct Merge {
    ctx: Arc<QueryCtx>,
    streams: Vec<DatumStream>,
    keys: Vec<Ordered>,
    /// Each input's next item with its key values (`None` for a missing key); filled on
    /// the first pull.
    heads: Vec<Option<(Vec<Option<Datum>>, Datum)>>,
    started: bool,
    failed: bool,
}

impl Merge {
    fn new(ctx: Arc<QueryCtx>, streams: Vec<DatumStream>, keys: Vec<Ordered>) -> Merge {
        Merge {
            ctx,
            streams,
            keys,
            heads: Vec::new(),
            started: false,
            failed: false,
        }
    }

    /// The key values of one item; a non-existence error is a missing key.
    fn key_values(&self, d: &Datum) -> Result<Vec<Option<Datum>>> {
        let mut out = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            let v = match &k.key {
                Key::Field(f) => field_of(d, f, "get_field"),
                Key::Func(f) => {
                    call(&self.ctx, f, vec![d.clone()]).and_then(|v| to_datum(&self.ctx, v))
                }
            };
            out.push(match v {
                Ok(x) => Some(x),
                Err(e) if e.kind == ErrorKind::NonExistence => None,
                Err(e) => return Err(e),
            });
        }
        Ok(out)
    }

    /// RethinkDB's `lt_cmp_t`: the order of two items' key values.
    fn order(&self, a: &[Option<Datum>], b: &[Option<Datum>]) -> Ordering {
        for (k, (x, y)) in self.keys.iter().zip(a.iter().zip(b.iter())) {
            let o = match (x, y) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => x.cmp(y),
            };
            let o = if k.desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    /// The next item of input `i` with its key values.
    fn pull(&mut self, i: usize) -> Result<Option<(Vec<Option<Datum>>, Datum)>> {
        let Some(s) = self.streams.get_mut(i) else {
            return Ok(None);
        };
        match s.next() {
            None => Ok(None),
            Some(d) => {
                let d = d?;
                Ok(Some((self.key_values(&d)?, d)))
            }
        }
    }

    fn step(&mut self) -> Result<Option<Datum>> {
        if !self.started {
            self.started = true;
            for i in 0..self.streams.len() {
                let h = self.pull(i)?;
                self.heads.push(h);
            }
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let better = match best
                .and_then(|b| self.heads.get(b))
                .and_then(Option::as_ref)
            {
                None => true,
                Some((bk, _)) => self.order(k, bk).is_lt(),
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else {
            return Ok(None);
        };
        let Some((keys, item)) = self.heads.get_mut(i).and_then(Option::take) else {
            return Ok(None);
        };
        let next = self.pull(i)?;
        if let Some((next_keys, _)) = &next {
            if self.order(next_keys, &keys).is_lt() {
                return Err(logic(NOT_ORDERED));
            }
        }
        if let Some(slot) = self.heads.get_mut(i) {
            *slot = next;
        }
        Ok(Some(item))
    }
}

impl Iterator for Merge {
    type Item = Result<Datum>;

    fn next(&mut self) -> Option<Result<Datum>> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(d) => d.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
