//! Which index ranges hold every document whose value lies in them.
//!
//! ReQL's order runs by type: arrays, booleans, null, numbers, objects, then binary,
//! times and strings (`datum::order`). Null, objects and arrays holding objects have no
//! index entry, so a range spanning their part of the order misses such documents:
//! `age > 30` also matches objects, `age < 30` also null and arrays. A range is served
//! when its part of the order holds none of them: either it lies within a band of
//! always-indexable types (booleans, numbers, or binary/times/strings to the end), or
//! the index's statistics (`crate::Unkeyed`, kept by every write, never an under-count)
//! say that no document has an unindexable value of a class the range spans.

use std::ops::Bound;

use datum::Datum;

use super::Interval;
use crate::Unkeyed;

/// Runs of ReQL's type order, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Band {
    Min,
    Array,
    Bool,
    Null,
    Number,
    /// Objects, geometry included (it orders as an object).
    Object,
    /// Binary, times and strings.
    Tail,
    Max,
}

fn band(d: &Datum) -> Band {
    match d {
        Datum::MinVal => Band::Min,
        Datum::Array(_) => Band::Array,
        Datum::Bool(_) => Band::Bool,
        Datum::Null => Band::Null,
        Datum::Number(_) => Band::Number,
        Datum::String(_) => Band::Tail,
        Datum::Object(_) => match d.reql_type() {
            Some("TIME" | "BINARY") => Band::Tail,
            _ => Band::Object,
        },
        Datum::MaxVal => Band::Max,
    }
}

/// The bands of an interval's two ends.
fn ends(i: &Interval) -> (Band, Band) {
    let lo = match &i.lo {
        Bound::Unbounded => Band::Min,
        Bound::Included(d) | Bound::Excluded(d) => band(d),
    };
    let hi = match &i.hi {
        Bound::Unbounded => Band::Max,
        Bound::Included(d) | Bound::Excluded(d) => band(d),
    };
    (lo, hi)
}

/// True when every document whose value lies in `i` has an entry in the index (or in
/// each element's place, for a `multi` index, whose ranges must hold no arrays), given
/// the index's statistics when known.
pub fn served(i: &Interval, multi: bool, unkeyed: Option<&Unkeyed>) -> bool {
    if let Some(p) = i.as_point() {
        return datum::keys::encode_secondary(p).is_ok()
            && !(multi && matches!(p, Datum::Array(_)));
    }
    let (lo, hi) = ends(i);
    if multi && lo <= Band::Array {
        return false;
    }
    match unkeyed {
        Some(u) => {
            let null = u.null > 0 && !i.intersect(&Interval::point(Datum::Null)).is_empty();
            let array = u.array > 0 && lo <= Band::Array;
            let object = u.object > 0 && lo <= Band::Object && hi >= Band::Object;
            !(null || array || object)
        }
        None => match lo {
            Band::Bool | Band::Number => hi == lo,
            Band::Tail => hi >= Band::Tail,
            _ => false,
        },
    }
}

/// True when no document has a value an index cannot hold, by the statistics: then
/// every document the function gives a value has an entry.
pub fn none_unkeyed(unkeyed: Option<&Unkeyed>) -> bool {
    unkeyed.is_some_and(|u| *u == Unkeyed::default())
}

/// True when `i`'s bounds can be encoded as primary-key bounds.
pub fn primary_bounds(i: &Interval) -> bool {
    [&i.lo, &i.hi].iter().all(|b| match b {
        Bound::Unbounded => true,
        Bound::Included(d) | Bound::Excluded(d) => datum::keys::encode_bound(d).is_ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ql2::TermType as T;

    fn n(x: f64) -> Datum {
        Datum::Number(x)
    }

    fn of(op: T, d: Datum) -> Interval {
        Interval::of(op, d).unwrap()
    }

    fn stats(null: u64, array: u64, object: u64) -> Unkeyed {
        Unkeyed {
            null,
            array,
            object,
        }
    }

    #[test]
    fn without_statistics_only_safe_bands() {
        assert!(!served(&of(T::GT, n(30.0)), false, None));
        assert!(!served(&of(T::LT, n(30.0)), false, None));
        assert!(served(&of(T::GT, Datum::str("m")), false, None));
        let within = Interval {
            lo: Bound::Excluded(n(30.0)),
            hi: Bound::Excluded(n(40.0)),
        };
        assert!(served(&within, false, None));
        assert!(!served(&Interval::point(Datum::Null), false, None));
    }

    #[test]
    fn statistics_open_the_bands_they_clear() {
        let gt = of(T::GT, n(30.0));
        let lt = of(T::LE, n(30.0));
        let none = stats(0, 0, 0);
        assert!(served(&gt, false, Some(&none)));
        assert!(served(&lt, false, Some(&none)));
        // Null and arrays lie below numbers: they matter only to `<`.
        let low = stats(3, 2, 0);
        assert!(served(&gt, false, Some(&low)));
        assert!(!served(&lt, false, Some(&stats(3, 0, 0))));
        assert!(!served(&lt, false, Some(&stats(0, 2, 0))));
        // Objects lie between numbers and strings: they matter to `>` and to a range
        // from a number to a string, not to one within the strings.
        let high = stats(0, 0, 1);
        assert!(!served(&gt, false, Some(&high)));
        assert!(served(&lt, false, Some(&high)));
        let across = Interval {
            lo: Bound::Included(n(1.0)),
            hi: Bound::Included(Datum::str("a")),
        };
        assert!(!served(&across, false, Some(&high)));
        assert!(served(&of(T::GT, Datum::str("m")), false, Some(&high)));
        // A range from below null to above it.
        let around_null = Interval {
            lo: Bound::Included(Datum::Bool(true)),
            hi: Bound::Excluded(n(0.0)),
        };
        assert!(!served(&around_null, false, Some(&stats(1, 0, 0))));
        assert!(served(&around_null, false, Some(&stats(0, 5, 5))));
    }

    #[test]
    fn multi_indexes_never_serve_arrays() {
        let none = stats(0, 0, 0);
        assert!(!served(&of(T::LT, n(30.0)), true, Some(&none)));
        assert!(served(&of(T::GT, n(30.0)), true, Some(&none)));
        let arr = Datum::array(vec![n(1.0)]);
        assert!(!served(&Interval::point(arr.clone()), true, Some(&none)));
        assert!(served(&Interval::point(arr), false, None));
    }
}
