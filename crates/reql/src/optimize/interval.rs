//! Intervals of datums in ReQL's total order and unions of them (`Set`): the algebra
//! the planner derives a predicate's implications with.

use std::cmp::Ordering;
use std::ops::Bound;

use datum::Datum;
use proto::ql2::TermType as T;

/// An interval of datums in ReQL's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// The lower bound (`Unbounded` below everything).
    pub lo: Bound<Datum>,
    /// The upper bound (`Unbounded` above everything).
    pub hi: Bound<Datum>,
}

impl Interval {
    /// Every datum.
    pub fn all() -> Interval {
        Interval {
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
        }
    }

    /// Exactly `d`.
    pub fn point(d: Datum) -> Interval {
        Interval {
            lo: Bound::Included(d.clone()),
            hi: Bound::Included(d),
        }
    }

    /// The values `v` with `v op c` (`op` one of EQ, LT, LE, GT, GE).
    pub(super) fn of(op: T, c: Datum) -> Option<Interval> {
        let (lo, hi) = match op {
            T::EQ => return Some(Interval::point(c)),
            T::LT => (Bound::Unbounded, Bound::Excluded(c)),
            T::LE => (Bound::Unbounded, Bound::Included(c)),
            T::GT => (Bound::Excluded(c), Bound::Unbounded),
            T::GE => (Bound::Included(c), Bound::Unbounded),
            _ => return None,
        };
        Some(Interval { lo, hi })
    }

    /// True when no datum lies in it.
    pub fn is_empty(&self) -> bool {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        }
    }

    /// The values in both.
    pub(super) fn intersect(&self, o: &Interval) -> Interval {
        Interval {
            lo: tighter(&self.lo, &o.lo, Ordering::Greater),
            hi: tighter(&self.hi, &o.hi, Ordering::Less),
        }
    }

    /// True when this is exactly one value.
    pub fn as_point(&self) -> Option<&Datum> {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
            _ => None,
        }
    }
}

/// The tighter of two bounds: the larger lower bound (`want` Greater) or the smaller
/// upper bound (`want` Less); at equal values the exclusive one.
fn tighter(a: &Bound<Datum>, b: &Bound<Datum>, want: Ordering) -> Bound<Datum> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match x.cmp(y) {
                o if o == want => a.clone(),
                Ordering::Equal if matches!(a, Bound::Excluded(_)) => a.clone(),
                Ordering::Equal => b.clone(),
                _ => b.clone(),
            }
        }
    }
}

fn lower_cmp(a: &Bound<Datum>, b: &Bound<Datum>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x), Bound::Excluded(y)) if x == y => Ordering::Less,
        (Bound::Excluded(x), Bound::Included(y)) if x == y => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

/// True when an interval ending at `hi` overlaps or touches one starting at `lo`.
fn reaches(hi: &Bound<Datum>, lo: &Bound<Datum>) -> bool {
    match (hi, lo) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Excluded(h), Bound::Excluded(l)) => h > l,
        (Bound::Included(h) | Bound::Excluded(h), Bound::Included(l) | Bound::Excluded(l)) => {
            h >= l
        }
    }
}

/// A union of intervals, sorted and disjoint (`normalize`).
pub type Set = Vec<Interval>;

/// Sorts, drops empty intervals and merges overlapping ones.
pub fn normalize(mut s: Set) -> Set {
    s.retain(|i| !i.is_empty());
    s.sort_by(|a, b| lower_cmp(&a.lo, &b.lo));
    let mut out: Set = Vec::with_capacity(s.len());
    for i in s {
        match out.last_mut() {
            Some(last) if reaches(&last.hi, &i.lo) => last.hi = looser_upper(&last.hi, &i.hi),
            _ => out.push(i),
        }
    }
    out
}

/// The larger of two upper bounds; at equal values the inclusive one.
fn looser_upper(a: &Bound<Datum>, b: &Bound<Datum>) -> Bound<Datum> {
    match (a, b) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => Bound::Unbounded,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match x.cmp(y) {
                Ordering::Greater => a.clone(),
                Ordering::Less => b.clone(),
                Ordering::Equal if matches!(a, Bound::Included(_)) => a.clone(),
                Ordering::Equal => b.clone(),
            }
        }
    }
}

pub(super) fn intersect_sets(a: &Set, b: &Set) -> Set {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            out.push(x.intersect(y));
        }
    }
    normalize(out)
}
