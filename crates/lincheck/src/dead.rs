//! Dominance between search configurations, for histories with indeterminate operations.
//!
//! An indeterminate operation never has to be linearized and never completes, so having
//! it still pending is never worse than having it placed: if the configuration (set S,
//! state s) cannot be completed, no configuration (S plus some indeterminate operations,
//! s) can be either — any completion of the latter is one of the former. Porcupine's
//! cache only recognizes equal sets, and with many indeterminate operations the sets
//! differing only in which of them were placed multiply; this index prunes them.
//!
//! Invariant: only configurations the search has *left* (every continuation failed) and
//! whose last operation was determinate are recorded — the search's restriction after an
//! indeterminate operation (`model::next_state`) explores less than "every completion", so
//! those failures prove nothing about the set alone.

use std::collections::HashMap;

use crate::bitset::Bitset;

/// A dead set split into (determinate part, indeterminate part), as words.
type Split = (Box<[u64]>, Box<[u64]>);

/// Dead configurations by (hash of their determinate operations, state).
pub(crate) struct DeadIndex {
    /// Bits of the indeterminate operations.
    optional: Bitset,
    /// Per key: (determinate part, indeterminate part) of each dead set.
    map: HashMap<(u64, u32), Vec<Split>>,
}

impl DeadIndex {
    /// An empty index; `optional` marks the indeterminate operations.
    pub(crate) fn new(optional: Bitset) -> Self {
        Self {
            optional,
            map: HashMap::new(),
        }
    }

    /// Records that (`set`, `state`) cannot be completed; returns the bytes it took.
    pub(crate) fn insert(&mut self, det_hash: u64, state: u32, set: &Bitset) -> usize {
        let opt = self.optional.words();
        let det: Box<[u64]> = set.words().iter().zip(opt).map(|(w, o)| w & !o).collect();
        let ind: Box<[u64]> = set.words().iter().zip(opt).map(|(w, o)| w & o).collect();
        let bytes = (det.len() + ind.len()) * 8 + 48;
        self.map
            .entry((det_hash, state))
            .or_default()
            .push((det, ind));
        bytes
    }

    /// Whether a recorded dead configuration has the same determinate operations and
    /// state as (`set`, `state`) and a subset of its indeterminate ones.
    pub(crate) fn dominates(&self, det_hash: u64, state: u32, set: &Bitset) -> bool {
        let Some(bucket) = self.map.get(&(det_hash, state)) else {
            return false;
        };
        let (words, opt) = (set.words(), self.optional.words());
        bucket.iter().any(|(det, ind)| {
            words
                .iter()
                .zip(opt)
                .zip(det.iter().zip(ind.iter()))
                .all(|((w, o), (d, i))| w & !o == *d && i & !w == 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_placed_indeterminate_operations_dominate() {
        let mut optional = Bitset::new(4);
        optional.set(2);
        optional.set(3);
        let mut idx = DeadIndex::new(optional);
        let mut dead = Bitset::new(4);
        dead.set(0);
        dead.set(2);
        idx.insert(7, 1, &dead);
        let mut more = dead.clone();
        more.set(3);
        assert!(idx.dominates(7, 1, &dead));
        assert!(
            idx.dominates(7, 1, &more),
            "one more indeterminate op placed"
        );
        assert!(!idx.dominates(7, 2, &more), "other state");
        let mut fewer = Bitset::new(4);
        fewer.set(0);
        assert!(
            !idx.dominates(7, 1, &fewer),
            "fewer placed is not dominated"
        );
        let mut other_det = more.clone();
        other_det.set(1);
        assert!(!idx.dominates(7, 1, &other_det), "other determinate set");
    }
}
