//! Documents an index holds no entry for although its function gave them a value: null,
//! an object, or an array an index cannot hold (one holding an object). The query
//! optimizer needs to know whether such documents exist in the part of ReQL's order a
//! range predicate spans (`age > 30` also matches objects, `age < 30` also null and
//! arrays), because an index read would miss them.
//!
//! Each such document has a *marker* in the index's own storage space, written in the
//! same batch as the document (`index::stage_changes`) and by the backfill: the key
//! `0x00 ‖ class ‖ primary key`, empty value. Index values encode with a type tag of at
//! least `0x01` (`datum::keys`), so markers sort before every entry and no range read
//! of entries sees them (`IndexRange::key_bounds` starts unbounded reads at `0x01`).
//! The key `0x00 ‖ 0xFF` (`COMPLETE`) records that every document has its marker: it is
//! written once a backfill that wrote markers finished, so an index built before markers
//! existed never claims a count it does not have (it is re-backfilled at start-up).
//!
//! Invariant: while `SecondaryIndex::unkeyed_counts` answers, each count equals the
//! markers of its class, which equal the documents of that class: the counts are taken
//! with every write blocked (`index::track_entries`), only once `COMPLETE` is present, and
//! every later write adds its change under its stripe lock. An under-count would make an
//! index range miss matching documents, so a count that cannot be established is never
//! reported (`None`), and the optimizer then plans as if every band held such documents.

/// Why a document with a value has no entry: the value's part of ReQL's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unkeyed {
    /// Null (between booleans and numbers).
    Null = 0,
    /// An array the index cannot hold (arrays sort first).
    Array = 1,
    /// An object, geometry included (between numbers and binary values).
    Object = 2,
}

impl Unkeyed {
    /// Every class, in the order of their counts.
    pub const ALL: [Unkeyed; 3] = [Unkeyed::Null, Unkeyed::Array, Unkeyed::Object];

    /// The class of a value an index cannot hold.
    pub fn of(value: &datum::Datum) -> Unkeyed {
        match value {
            datum::Datum::Null => Unkeyed::Null,
            datum::Datum::Array(_) => Unkeyed::Array,
            _ => Unkeyed::Object,
        }
    }
}

/// Why an index function gave a document no keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoKeys {
    /// The function failed (a missing field): the document has no value at all.
    Failed(String),
    /// The function gave a value no index can hold.
    Unkeyable(Unkeyed),
}

const MARK: u8 = 0x00;
const COMPLETE_BYTE: u8 = 0xFF;

/// The key saying every document has its marker.
pub(crate) const COMPLETE: [u8; 2] = [MARK, COMPLETE_BYTE];

/// The marker key of a document with encoded primary key `pk`.
pub(crate) fn marker(class: Unkeyed, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(pk.len() + 2);
    k.push(MARK);
    k.push(class as u8);
    k.extend_from_slice(pk);
    k
}

/// The key bounds of one class's markers.
pub(crate) fn class_bounds(class: Unkeyed) -> (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>) {
    let c = class as u8;
    (
        std::ops::Bound::Included(vec![MARK, c]),
        std::ops::Bound::Excluded(vec![MARK, c + 1]),
    )
}

/// The lowest key an index entry can have (the smallest type tag, `MinVal`'s).
pub(crate) const FIRST_ENTRY: u8 = 0x01;

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound;

    #[test]
    fn markers_sort_before_entries_and_within_their_class() {
        let m = marker(Unkeyed::Object, &[0x40, 1]);
        assert!(m < vec![FIRST_ENTRY]);
        let (lo, hi) = class_bounds(Unkeyed::Object);
        assert!(matches!(lo, Bound::Included(ref l) if m >= *l));
        assert!(matches!(hi, Bound::Excluded(ref h) if m < *h));
        let (_, null_hi) = class_bounds(Unkeyed::Null);
        assert!(matches!(null_hi, Bound::Excluded(ref h) if marker(Unkeyed::Array, &[]) >= *h));
        // The completion key is no class's marker.
        for c in Unkeyed::ALL {
            let (lo, hi) = class_bounds(c);
            let inside = matches!((&lo, &hi), (Bound::Included(l), Bound::Excluded(h))
                if COMPLETE.as_slice() >= l.as_slice() && COMPLETE.as_slice() < h.as_slice());
            assert!(!inside);
        }
    }

    #[test]
    fn classes_follow_the_value() {
        use datum::Datum;
        assert_eq!(Unkeyed::of(&Datum::Null), Unkeyed::Null);
        assert_eq!(Unkeyed::of(&Datum::array(vec![])), Unkeyed::Array);
        assert_eq!(
            Unkeyed::of(&Datum::from_pairs([("a", Datum::Null)])),
            Unkeyed::Object
        );
    }
}
