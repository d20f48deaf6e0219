//! A fixed-size bitset: the set of linearized operations in the search's cache.
//!
//! Invariant: bits at or beyond the size are never set, so equal sets compare equal.

/// A set of operation indices below a fixed size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bitset {
    words: Box<[u64]>,
}

impl Bitset {
    /// An empty set for indices `0..size`.
    pub fn new(size: usize) -> Self {
        Self {
            words: vec![0; size.div_ceil(64).max(1)].into_boxed_slice(),
        }
    }

    /// Adds `i`.
    pub fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Removes `i`.
    pub fn clear(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    /// The words, 64 indices each, lowest first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_contains() {
        let mut b = Bitset::new(130);
        b.set(0);
        b.set(129);
        assert!(b.contains(0) && b.contains(129) && !b.contains(64));
        b.clear(129);
        assert!(!b.contains(129));
        assert_eq!(b, {
            let mut c = Bitset::new(130);
            c.set(0);
            c
        });
    }
}
