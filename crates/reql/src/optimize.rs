//! The query optimizer's planning core: pure functions from a compiled predicate and the
//! facts of a table's indexes to the index ranges that can answer a `filter`, and the
//! index that can answer an `order_by(field)`/`min(field)`/`max(field)`. No I/O: the
//! shell that reads tables, estimates and records the plan is `terms::optimized`.
//!
//! RethinkDB has no optimizer (its issue #4150): `filter` always reads the whole table.
//! Ponder answers the same query from an index only where the answer is provably the
//! same, and the shell always re-applies the whole original predicate to every
//! document the index yields, so a plan only has to promise a *superset*:
//!
//! - The predicate must be in a small language that cannot fail except by a missing
//!   field (which `filter` turns into "no match" without a `default`): constants,
//!   top-level fields of the row (`r.row('f')`, `row['f']`, a lambda's parameter),
//!   `default(constant)` of such a field, `eq`/`ne`/`lt`/`le`/`gt`/`ge` of two operands,
//!   `and`, `or`, `not`; or an object (`filter({'f': v})`). Anything else (nested fields,
//!   which fail on non-objects, functions, `r.js`, variadic comparisons) is left alone.
//! - From it, `implied` derives for each field a union of intervals (in ReQL's total
//!   order) that a document's value must lie in for the predicate to be truthy; a field
//!   the document lacks makes the predicate fail, i.e. not match.
//! - An index serves a field only when its function is exactly `row(field)` (or, for a
//!   compound index, `[row(f1), row(f2), ...]`) and every document whose value lies in
//!   the intervals has an entry: null, objects and arrays that hold objects have none,
//!   so an interval may span their part of ReQL's order only when the index's
//!   statistics (kept by every write, never an under-count) say no document holds such a
//!   value there; otherwise only the bands of always-indexable types (`bands`).
//!   Equality with an indexable constant is always safe. Primary keys are always keys,
//!   so any interval is safe on the primary key.
//! - A multi index holds each element of an array value: it serves only intervals that
//!   hold no arrays (the shell removes documents read twice).
//! - `count()` of a served `filter` counts index entries without reading documents only
//!   when the predicate is *exactly* "these fields present with values in these sets"
//!   (`Analysis::exact`) and the index is on exactly those fields, one entry per
//!   document (not multi).
//!
//! Truncated index keys need nothing here: index reads and counts compare the whole
//! value (`store::index`), and the predicate is re-applied to documents anyway.

use std::collections::BTreeMap;
use std::ops::Bound;

use datum::Datum;
use proto::ql2::TermType as T;
use serde_json::Value as Json;

use crate::term::Term;
use crate::value::IMPLICIT_VAR_ID;
use crate::Unkeyed;

mod bands;
mod interval;

pub use bands::{none_unkeyed, primary_bounds, served};
use interval::intersect_sets;
pub use interval::{normalize, Interval, Set};

/// For each field: the values the field must hold (it must be present) for the
/// predicate to be truthy. A field not listed is unconstrained.
pub type Implied = BTreeMap<String, Set>;

/// The variable ids that stand for the row in a predicate's body.
struct Row {
    param: Option<i64>,
}

impl Row {
    fn is_row(&self, t: &Term) -> bool {
        match t.tt {
            T::IMPLICIT_VAR => true,
            T::VAR => {
                let id = t.var_id();
                id.is_some() && id == self.param
            }
            _ => false,
        }
    }

    /// `row('f')`: the field name.
    fn field<'t>(&self, t: &'t Term) -> Option<&'t str> {
        if !matches!(t.tt, T::BRACKET | T::GET_FIELD) || t.args.len() != 2 || !t.optargs.is_empty()
        {
            return None;
        }
        let (r, f) = (t.args.first()?, t.args.get(1)?);
        if !self.is_row(r) || f.tt != T::DATUM {
            return None;
        }
        f.datum.as_str()
    }
}

/// An operand of a comparison.
enum Operand<'t> {
    Const(&'t Datum),
    Field(&'t str),
    /// `row('f').default(d)`.
    Defaulted(&'t str, &'t Datum),
    /// Any other value of the language (a comparison, `and`, ...).
    Other,
}

fn operand<'t>(row: &Row, t: &'t Term) -> Option<Operand<'t>> {
    if t.tt == T::DATUM {
        return Some(Operand::Const(&t.datum));
    }
    if let Some(f) = row.field(t) {
        return Some(Operand::Field(f));
    }
    if t.tt == T::DEFAULT && t.args.len() == 2 && t.optargs.is_empty() {
        let (a, d) = (t.args.first()?, t.args.get(1)?);
        if let (Some(f), T::DATUM) = (row.field(a), d.tt) {
            return Some(Operand::Defaulted(f, &d.datum));
        }
        return None;
    }
    implied_in(row, t).map(|_| Operand::Other)
}

fn flip(op: T) -> T {
    match op {
        T::LT => T::GT,
        T::LE => T::GE,
        T::GT => T::LT,
        T::GE => T::LE,
        o => o,
    }
}

fn holds(op: T, a: &Datum, b: &Datum) -> bool {
    match op {
        T::EQ => a == b,
        T::NE => a != b,
        T::LT => a < b,
        T::LE => a <= b,
        T::GT => a > b,
        T::GE => a >= b,
        _ => true,
    }
}

/// What a truthy result of `t` implies, and whether exactly (`Analysis::exact`), or
/// `None` when `t` is outside the language.
fn implied_in(row: &Row, t: &Term) -> Option<Analysis> {
    if !t.optargs.is_empty() {
        return None;
    }
    let loose = |implied| {
        Some(Analysis {
            implied,
            exact: false,
        })
    };
    match t.tt {
        T::DATUM => loose(Implied::new()),
        T::EQ | T::NE | T::LT | T::LE | T::GT | T::GE => {
            if t.args.len() != 2 {
                return None;
            }
            let a = operand(row, t.args.first()?)?;
            let b = operand(row, t.args.get(1)?)?;
            let (op, field, c, default) = match (a, b) {
                (Operand::Field(f), Operand::Const(c)) => (t.tt, f, c, None),
                (Operand::Const(c), Operand::Field(f)) => (flip(t.tt), f, c, None),
                (Operand::Defaulted(f, d), Operand::Const(c)) => (t.tt, f, c, Some(d)),
                (Operand::Const(c), Operand::Defaulted(f, d)) => (flip(t.tt), f, c, Some(d)),
                (x, y) => {
                    // Both operands evaluated: each bare field must be present.
                    let mut m = Implied::new();
                    for o in [x, y] {
                        if let Operand::Field(f) = o {
                            m.insert(f.to_string(), vec![Interval::all()]);
                        }
                    }
                    return loose(m);
                }
            };
            // A missing field with a default compares the default: if that can be
            // truthy, the predicate says nothing about the field.
            if default.is_some_and(|d| holds(op, d, c)) {
                return loose(Implied::new());
            }
            let (set, exact) = match Interval::of(op, c.clone()) {
                // A lacking field fails the comparison (without a truthy default, as
                // here), which `filter` takes as no match: exactly "present and in".
                Some(i) => (vec![i], default.is_none()),
                None => (vec![Interval::all()], false),
            };
            Some(Analysis {
                implied: Implied::from([(field.to_string(), set)]),
                exact,
            })
        }
        T::AND => {
            // Truthy exactly when every part is (a failing part fails the whole).
            let mut m = Implied::new();
            let mut exact = true;
            for a in &t.args {
                let part = implied_in(row, a)?;
                exact &= part.exact;
                for (f, s) in part.implied {
                    let merged = match m.remove(&f) {
                        Some(old) => intersect_sets(&old, &s),
                        None => s,
                    };
                    m.insert(f, merged);
                }
            }
            Some(Analysis { implied: m, exact })
        }
        T::OR => {
            let mut parts = Vec::with_capacity(t.args.len());
            for a in &t.args {
                parts.push(implied_in(row, a)?);
            }
            let (first, rest) = parts.split_first()?;
            let mut m = Implied::new();
            for (f, s) in &first.implied {
                let mut u = s.clone();
                let mut everywhere = true;
                for p in rest {
                    match p.implied.get(f) {
                        Some(s2) => u.extend(s2.iter().cloned()),
                        None => everywhere = false,
                    }
                }
                if everywhere {
                    m.insert(f.clone(), normalize(u));
                }
            }
            // Exact when every part is exact about one and the same field: truthy
            // exactly when the field is present and in one of the parts' sets.
            let one_field = |p: &Analysis| p.exact && p.implied.len() == 1;
            let exact = parts.iter().all(one_field)
                && m.len() == 1
                && parts.iter().all(|p| p.implied.keys().eq(m.keys()));
            Some(Analysis { implied: m, exact })
        }
        T::NOT => {
            if t.args.len() != 1 {
                return None;
            }
            implied_in(row, t.args.first()?).and_then(|_| loose(Implied::new()))
        }
        T::DEFAULT => match operand(row, t)? {
            Operand::Defaulted(..) => loose(Implied::new()),
            _ => None,
        },
        // A bare field as the verdict: it must be present.
        _ => row
            .field(t)
            .and_then(|f| loose(Implied::from([(f.to_string(), vec![Interval::all()])]))),
    }
}

/// What a predicate implies for the fields of a matching document.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// For each constrained field, the values it must hold (it must be present).
    pub implied: Implied,
    /// True when the predicate is truthy for *exactly* the documents holding every
    /// field of `implied` with a value in its set (no residual test is needed, so an
    /// index read of those sets can be counted without reading documents).
    pub exact: bool,
}

/// What a `filter` predicate (argument 1 of FILTER, as compiled) implies for the fields
/// of a matching document, or `None` when the predicate is outside the language.
pub fn implied(pred: &Term) -> Option<Implied> {
    analyze(pred).map(|a| a.implied)
}

/// `implied`, with whether the implication is exact.
pub fn analyze(pred: &Term) -> Option<Analysis> {
    match pred.tt {
        // `filter({'f': v, ...})`: each field present and equal (an object value is
        // matched as a pattern: present, nothing more is said).
        T::DATUM => {
            let o = pred.datum.as_object()?;
            if pred.datum.reql_type().is_some() {
                return None;
            }
            let mut m = Implied::new();
            let mut exact = true;
            for (k, v) in o.iter() {
                let set = match v {
                    Datum::Object(_) => {
                        exact = false;
                        vec![Interval::all()]
                    }
                    v => vec![Interval::point(v.clone())],
                };
                m.insert(k.to_string(), set);
            }
            Some(Analysis { implied: m, exact })
        }
        T::FUNC => {
            let params = pred.args.first()?;
            let body = pred.args.get(1)?;
            let ps = params.datum.as_array()?;
            if ps.len() != 1 || matches!(body.tt, T::MAKE_OBJ | T::DATUM) {
                // A body that is an object literal is matched as a pattern.
                return None;
            }
            let param = ps.first().and_then(Datum::as_f64).map(|n| n as i64);
            let row = Row {
                param: param.filter(|p| *p != IMPLICIT_VAR_ID),
            };
            implied_in(&row, body)
        }
        _ => None,
    }
}

/// What an index function looks like, when the optimizer can use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// `row(field)`.
    Field(String),
    /// `[row(f1), row(f2), ...]`.
    Compound(Vec<String>),
}

fn json_field(j: &Json, param: i64) -> Option<String> {
    let a = j.as_array()?;
    let tt = a.first()?.as_i64()?;
    if tt != T::GET_FIELD as i64 && tt != T::BRACKET as i64 {
        return None;
    }
    let args = a.get(1)?.as_array()?;
    if args.len() != 2 || a.len() > 2 {
        return None;
    }
    let row = args.first()?.as_array()?;
    let is_row = match row.first()?.as_i64()? {
        x if x == T::IMPLICIT_VAR as i64 => true,
        x if x == T::VAR as i64 => row.get(1)?.as_array()?.first()?.as_i64()? == param,
        _ => false,
    };
    if !is_row {
        return None;
    }
    args.get(1)?.as_str().map(str::to_string)
}

/// The shape of an index function (a FUNC term in RethinkDB's JSON wire form).
pub fn index_shape(function: &Json) -> Option<Shape> {
    let f = function.as_array()?;
    if f.first()?.as_i64()? != T::FUNC as i64 {
        return None;
    }
    let args = f.get(1)?.as_array()?;
    let params = args.first()?.as_array()?;
    if params.first()?.as_i64()? != T::MAKE_ARRAY as i64 {
        return None;
    }
    let ps = params.get(1)?.as_array()?;
    if ps.len() != 1 {
        return None;
    }
    let param = ps.first()?.as_i64()?;
    let body = args.get(1)?;
    if let Some(f) = json_field(body, param) {
        return Some(Shape::Field(f));
    }
    let b = body.as_array()?;
    if b.first()?.as_i64()? != T::MAKE_ARRAY as i64 || b.len() > 2 {
        return None;
    }
    let items = b.get(1)?.as_array()?;
    let fields: Option<Vec<String>> = items.iter().map(|i| json_field(i, param)).collect();
    fields.filter(|f| !f.is_empty()).map(Shape::Compound)
}

/// An index the optimizer may read, as the catalog describes it.
#[derive(Debug, Clone)]
pub struct IndexFact {
    /// Its name.
    pub name: String,
    /// Its function's shape.
    pub shape: Shape,
    /// A multi index.
    pub multi: bool,
    /// Its entries, when counted (`IndexStatus::entries`).
    pub entries: Option<u64>,
    /// Its documents without entries by class, when counted (`IndexStatus::unkeyed`).
    pub unkeyed: Option<Unkeyed>,
}

/// Where a plan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The primary key.
    Primary,
    /// A secondary index.
    Index {
        /// Its name.
        name: String,
        /// A multi index (documents may be read twice).
        multi: bool,
    },
}

/// One way to answer a `filter`: ranges of one index.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The index read.
    pub source: Source,
    /// The ranges of index values read (disjoint, ascending).
    pub ranges: Set,
    /// True when the documents of these ranges are exactly the predicate's matches,
    /// each read once: counting the ranges' entries counts the matches.
    pub exact: bool,
}

/// Every index (and the primary key, first) that can answer a predicate with this
/// analysis. An empty list: only a scan.
pub fn candidates(a: &Analysis, primary_key: &str, indexes: &[IndexFact]) -> Vec<Candidate> {
    let imp = &a.implied;
    // Exact for an index on exactly the constrained fields (one entry per document).
    let exact_on = |fields: &[&str]| {
        a.exact && imp.len() == fields.len() && fields.iter().all(|f| imp.contains_key(*f))
    };
    let mut out = Vec::new();
    if let Some(set) = imp.get(primary_key) {
        if !set.iter().any(|i| *i == Interval::all()) && set.iter().all(primary_bounds) {
            out.push(Candidate {
                source: Source::Primary,
                ranges: set.clone(),
                exact: exact_on(&[primary_key]),
            });
        }
    }
    for ix in indexes {
        let stats = ix.unkeyed.as_ref();
        let (ranges, exact) = match &ix.shape {
            Shape::Field(f) => match imp.get(f) {
                Some(set) if set.iter().all(|i| served(i, ix.multi, stats)) => {
                    (set.clone(), !ix.multi && exact_on(&[f.as_str()]))
                }
                _ => continue,
            },
            Shape::Compound(fields) if !ix.multi => match compound_ranges(imp, fields, stats) {
                Some(r) => {
                    let names: Vec<&str> = fields.iter().map(String::as_str).collect();
                    (r, exact_on(&names))
                }
                None => continue,
            },
            Shape::Compound(_) => continue,
        };
        out.push(Candidate {
            source: Source::Index {
                name: ix.name.clone(),
                multi: ix.multi,
            },
            ranges,
            exact,
        });
    }
    out
}

/// A compound index's ranges: one value for every field but the last, whose intervals
/// must each be served; every field must be constrained (a document lacking one has no
/// entry). A compound value is an array, which an index holds unless an element is an
/// object: when the statistics say no document's value is unindexable, any prefix value
/// an array may hold and any interval of the last field is served.
fn compound_ranges(imp: &Implied, fields: &[String], stats: Option<&Unkeyed>) -> Option<Set> {
    let all_keyed = none_unkeyed(stats);
    let (last, init) = fields.split_last()?;
    let mut prefix = Vec::with_capacity(init.len());
    for f in init {
        let set = imp.get(f)?;
        let [one] = set.as_slice() else { return None };
        let p = one.as_point()?;
        let ok = if all_keyed {
            datum::keys::encode_secondary(&Datum::array(vec![p.clone()])).is_ok()
        } else {
            served(one, false, None)
        };
        if !ok {
            return None;
        }
        prefix.push(p.clone());
    }
    let set = imp.get(last)?;
    let mut out = Vec::with_capacity(set.len());
    for i in set {
        if !all_keyed && !served(i, false, None) {
            return None;
        }
        let wrap = |b: &Bound<Datum>, end: Datum| -> Bound<Datum> {
            let mut items = prefix.clone();
            match b {
                Bound::Unbounded => {
                    items.push(end);
                    Bound::Included(Datum::array(items))
                }
                Bound::Included(d) => {
                    items.push(d.clone());
                    Bound::Included(Datum::array(items))
                }
                Bound::Excluded(d) => {
                    items.push(d.clone());
                    Bound::Excluded(Datum::array(items))
                }
            }
        };
        out.push(Interval {
            lo: wrap(&i.lo, Datum::MinVal),
            hi: wrap(&i.hi, Datum::MaxVal),
        });
    }
    Some(out)
}

/// The index that orders documents by `field` exactly as `order_by(field)` sorts them:
/// a simple, non-multi index on the field holding an entry for every document
/// (`entries == documents`, so no document lacks the field or holds a value the index
/// cannot hold).
pub fn order_index<'a>(field: &str, docs: u64, indexes: &'a [IndexFact]) -> Option<&'a IndexFact> {
    indexes.iter().find(|ix| {
        !ix.multi && ix.shape == Shape::Field(field.to_string()) && ix.entries == Some(docs)
    })
}

/// Prints a bound for the plan's description.
pub fn describe_ranges(ranges: &Set) -> String {
    let one = |i: &Interval| {
        if let Some(p) = i.as_point() {
            return format!("equal to {}", p.to_json_string());
        }
        let lo = match &i.lo {
            Bound::Unbounded => "r.minval".to_string(),
            Bound::Included(d) | Bound::Excluded(d) => d.to_json_string(),
        };
        let hi = match &i.hi {
            Bound::Unbounded => "r.maxval".to_string(),
            Bound::Included(d) | Bound::Excluded(d) => d.to_json_string(),
        };
        let open = |b: &Bound<Datum>| matches!(b, Bound::Excluded(_));
        format!(
            "between {lo} and {hi} ({}, {})",
            if open(&i.lo) { "open" } else { "closed" },
            if open(&i.hi) { "open" } else { "closed" }
        )
    };
    ranges.iter().map(one).collect::<Vec<_>>().join(" or ")
}

#[cfg(test)]
mod tests;
