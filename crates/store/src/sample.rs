//! A deterministic sample of a shard's primary keys, for splitting it into ranges of
//! about equal size (parallel scans, `rebalance`) without reading the data.
//!
//! A key is in the sample exactly when its hash falls in one bucket of `EVERY`
//! (`sampled`), so the sample needs no randomness and follows inserts and deletes
//! exactly: `Shard::open` fills it while counting, `Shard::apply` adds a new key and
//! removes a deleted one. About one key in `EVERY` is held (1,000,000 documents ≈ 7,800
//! keys).

use std::collections::BTreeSet;

use parking_lot::Mutex;

/// One key in this many is sampled.
const EVERY: u64 = 128;

/// The sampled keys of one shard (encoded primary keys).
#[derive(Default)]
pub(crate) struct KeySample {
    keys: Mutex<BTreeSet<Vec<u8>>>,
}

/// Whether `key` belongs in the sample.
pub(crate) fn sampled(key: &[u8]) -> bool {
    xxhash_rust::xxh3::xxh3_64(key).is_multiple_of(EVERY)
}

impl KeySample {
    /// Records a key that now holds a document.
    pub(crate) fn insert(&self, key: &[u8]) {
        if sampled(key) {
            self.keys.lock().insert(key.to_vec());
        }
    }

    /// Replaces the sample with `other`'s (the documents were replaced wholesale).
    pub(crate) fn reset(&self, other: KeySample) {
        *self.keys.lock() = other.keys.into_inner();
    }

    /// Records a key whose document was deleted.
    pub(crate) fn remove(&self, key: &[u8]) {
        if sampled(key) {
            self.keys.lock().remove(key);
        }
    }

    /// Up to `parts - 1` keys cutting the sampled keys into `parts` runs of about equal
    /// length, ascending; fewer (none) when the sample is too small to say.
    pub(crate) fn split_points(&self, parts: usize) -> Vec<Vec<u8>> {
        split_sorted(&self.keys(), parts)
    }

    /// The sampled keys, ascending.
    pub(crate) fn keys(&self) -> Vec<Vec<u8>> {
        self.keys.lock().iter().cloned().collect()
    }
}

/// Up to `parts - 1` of the ascending `keys`, cutting them into `parts` runs of about
/// equal length (the first key of each run but the first); none when there are fewer
/// keys than parts.
pub fn split_sorted(keys: &[Vec<u8>], parts: usize) -> Vec<Vec<u8>> {
    let n = keys.len();
    if parts < 2 || n < parts {
        return Vec::new();
    }
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(parts - 1);
    for (i, k) in keys.iter().enumerate() {
        if i > 0 && (i * parts) / n != ((i - 1) * parts) / n {
            out.push(k.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_points_cut_the_sample_evenly_and_follow_deletes() {
        let s = KeySample::default();
        let keys: Vec<Vec<u8>> = (0u32..200_000)
            .map(|i| i.to_be_bytes().to_vec())
            .filter(|k| sampled(k))
            .collect();
        assert!(keys.len() > 1000, "{}", keys.len());
        for k in &keys {
            s.insert(k);
        }
        let cuts = s.split_points(4);
        assert_eq!(cuts.len(), 3);
        let at = |c: &Vec<u8>| keys.iter().position(|k| k == c).unwrap_or(0);
        for (i, c) in cuts.iter().enumerate() {
            let expect = keys.len() * (i + 1) / 4;
            assert!(at(c).abs_diff(expect) <= 1, "{} vs {expect}", at(c));
        }
        for k in &keys[..keys.len() / 2] {
            s.remove(k);
        }
        let cuts = s.split_points(2);
        assert_eq!(at(&cuts[0]).abs_diff(keys.len() * 3 / 4), 0);
        assert!(KeySample::default().split_points(2).is_empty());
    }
}
