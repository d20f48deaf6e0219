//! `KeyRange`: the primary-key range a shard owns, in encoded keys.
//!
//! The shards of a table cut its key space at split points: shard `i` owns
//! `[cut[i-1], cut[i])`, the first from the start and the last to the end. Every read of
//! the shard's documents (scans, counts, index backfills, the count and key sample at
//! open) is clamped to its range, so the shards of one table may share storage spaces.

use std::ops::Bound;

/// A half-open range of encoded primary keys: `[lower, upper)`, `None` unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key in the range.
    pub lower: Option<Vec<u8>>,
    /// The first key past the range.
    pub upper: Option<Vec<u8>>,
}

type KeyBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange::default()
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.lower.as_deref().is_none_or(|l| key >= l)
            && self.upper.as_deref().is_none_or(|u| key < u)
    }

    /// The intersection of `[lo, hi]` with this range, or `None` when it is empty.
    pub fn clamp(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Option<KeyBounds> {
        let lo = match (&self.lower, lo) {
            (None, b) => b,
            (Some(l), Bound::Unbounded) => Bound::Included(l.clone()),
            (Some(l), Bound::Included(k)) => Bound::Included(if k >= *l { k } else { l.clone() }),
            (Some(l), Bound::Excluded(k)) if k >= *l => Bound::Excluded(k),
            (Some(l), Bound::Excluded(_)) => Bound::Included(l.clone()),
        };
        let hi = match (&self.upper, hi) {
            (None, b) => b,
            (Some(u), Bound::Unbounded) => Bound::Excluded(u.clone()),
            (Some(u), Bound::Included(k)) if k < *u => Bound::Included(k),
            (Some(u), Bound::Included(_)) => Bound::Excluded(u.clone()),
            (Some(u), Bound::Excluded(k)) => Bound::Excluded(if k <= *u { k } else { u.clone() }),
        };
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        (!empty).then_some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn clamps_to_the_intersection() {
        let r = KeyRange {
            lower: Some(k("c")),
            upper: Some(k("m")),
        };
        assert!(r.contains(b"c") && r.contains(b"l") && !r.contains(b"m") && !r.contains(b"a"));
        assert_eq!(
            r.clamp(Bound::Unbounded, Bound::Unbounded),
            Some((Bound::Included(k("c")), Bound::Excluded(k("m"))))
        );
        assert_eq!(
            r.clamp(Bound::Excluded(k("d")), Bound::Included(k("z"))),
            Some((Bound::Excluded(k("d")), Bound::Excluded(k("m"))))
        );
        assert_eq!(
            r.clamp(Bound::Included(k("a")), Bound::Included(k("e"))),
            Some((Bound::Included(k("c")), Bound::Included(k("e"))))
        );
        assert_eq!(r.clamp(Bound::Included(k("m")), Bound::Unbounded), None);
        assert_eq!(r.clamp(Bound::Unbounded, Bound::Excluded(k("c"))), None);
        assert_eq!(
            r.clamp(Bound::Included(k("x")), Bound::Included(k("y"))),
            None
        );
        assert_eq!(
            KeyRange::all().clamp(Bound::Included(k("a")), Bound::Unbounded),
            Some((Bound::Included(k("a")), Bound::Unbounded))
        );
    }
}
