//! Keys and documents of the YCSB-style `usertable`.
//!
//! Loaded documents have the keys `user0000000000` … (`user` + the index,
//! zero-padded to 10 digits, so key order is index order); documents inserted
//! by the insert workloads get keys that cannot collide with loaded ones nor
//! with those of another run (`ins` + a per-run tag + worker + sequence).
//! A document is `{"id": key, "field0": s0, …, "field9": s9}` with random
//! alphanumeric strings of `doc_bytes / 10` characters each, like YCSB's
//! 10 × 100-byte records.

use rand::distributions::Alphanumeric;
use rand::Rng;
use serde_json::{Map, Value};

/// Number of payload fields per document (YCSB's `fieldcount`).
pub const FIELDS: usize = 10;

/// Key of the `i`-th loaded document.
pub fn key(i: u64) -> String {
    format!("user{i:010}")
}

/// A uniformly random key among the `docs` loaded documents.
pub fn random_existing_key<R: Rng + ?Sized>(rng: &mut R, docs: u64) -> (u64, String) {
    let i = rng.gen_range(0..docs.max(1));
    (i, key(i))
}

/// Keys for newly inserted documents: unique per (run tag, run, worker, sequence).
#[derive(Debug, Clone)]
pub struct InsertKeys {
    prefix: String,
    next: u64,
}

impl InsertKeys {
    /// Keys for worker `worker` of measured run `run` (one per connection
    /// count) of the invocation tagged `run_tag`.
    pub fn new(run_tag: &str, run: usize, worker: usize) -> Self {
        Self {
            prefix: format!("ins{run_tag}r{run:03}w{worker:05}s"),
            next: 0,
        }
    }

    /// The next fresh key.
    pub fn next_key(&mut self) -> String {
        let k = format!("{}{:010}", self.prefix, self.next);
        self.next += 1;
        k
    }
}

/// A random tag distinguishing one benchmark run's inserted keys.
pub fn run_tag<R: Rng + ?Sized>(rng: &mut R) -> String {
    format!("{:08x}", rng.gen::<u32>())
}

/// Generates documents of roughly `doc_bytes` bytes of payload.
#[derive(Debug, Clone, Copy)]
pub struct DocGen {
    field_len: usize,
}

impl DocGen {
    /// Documents whose 10 fields hold `doc_bytes` characters in total
    /// (at least one per field).
    pub fn new(doc_bytes: usize) -> Self {
        Self {
            field_len: (doc_bytes / FIELDS).max(1),
        }
    }

    /// Length of each field's string.
    pub fn field_len(&self) -> usize {
        self.field_len
    }

    /// One document with the given `id`.
    pub fn doc<R: Rng + ?Sized>(&self, rng: &mut R, id: String) -> Value {
        let mut m = Map::with_capacity(FIELDS + 1);
        m.insert("id".into(), Value::String(id));
        for f in 0..FIELDS {
            let s: String = (&mut *rng)
                .sample_iter(&Alphanumeric)
                .take(self.field_len)
                .map(char::from)
                .collect();
            m.insert(format!("field{f}"), Value::String(s));
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::collections::HashSet;

    #[test]
    fn keys_are_padded_and_ordered() {
        assert_eq!(key(0), "user0000000000");
        assert_eq!(key(42), "user0000000042");
        assert_eq!(key(99_999).len(), key(0).len());
        let mut ks: Vec<String> = (0..1000).map(key).collect();
        let sorted = ks.clone();
        ks.sort();
        assert_eq!(ks, sorted, "lexicographic order is index order");
    }

    #[test]
    fn random_keys_stay_in_range_and_cover_it() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let (i, k) = random_existing_key(&mut rng, 100);
            assert!(i < 100);
            assert_eq!(k, key(i));
            seen.insert(i);
        }
        assert_eq!(seen.len(), 100, "uniform over all keys");
        assert_eq!(random_existing_key(&mut rng, 0).0, 0);
    }

    #[test]
    fn insert_keys_are_unique_and_disjoint_from_loaded() {
        let mut rng = StdRng::seed_from_u64(1);
        let tag = run_tag(&mut rng);
        assert_eq!(tag.len(), 8);
        let mut seen = HashSet::new();
        for run in 0..3 {
            for w in 0..4 {
                let mut g = InsertKeys::new(&tag, run, w);
                for _ in 0..1000 {
                    let k = g.next_key();
                    assert!(!k.starts_with("user"));
                    assert!(seen.insert(k), "duplicate key");
                }
            }
        }
        let mut other = InsertKeys::new("00000000", 0, 0);
        let mut again = InsertKeys::new("00000001", 0, 0);
        assert_ne!(other.next_key(), again.next_key());
    }

    #[test]
    fn document_size_matches_request() {
        let mut rng = StdRng::seed_from_u64(3);
        for doc_bytes in [100usize, 1000, 4000] {
            let g = DocGen::new(doc_bytes);
            let d = g.doc(&mut rng, key(123));
            let obj = d.as_object().unwrap();
            assert_eq!(obj.len(), FIELDS + 1);
            assert_eq!(obj["id"], key(123));
            let payload: usize = (0..FIELDS)
                .map(|f| obj[&format!("field{f}")].as_str().unwrap().len())
                .sum();
            assert_eq!(payload, doc_bytes);
            let json = serde_json::to_vec(&d).unwrap().len();
            // Payload plus the id and field names: ~150 bytes of overhead.
            assert!(
                json >= doc_bytes && json <= doc_bytes + 200,
                "{doc_bytes}: {json}"
            );
        }
        assert_eq!(DocGen::new(1000).field_len(), 100);
        assert_eq!(DocGen::new(0).field_len(), 1);
    }

    #[test]
    fn documents_are_random() {
        let mut rng = StdRng::seed_from_u64(4);
        let g = DocGen::new(1000);
        let a = g.doc(&mut rng, key(1));
        let b = g.doc(&mut rng, key(1));
        assert_ne!(a["field0"], b["field0"]);
        assert!(a["field0"]
            .as_str()
            .unwrap()
            .chars()
            .all(|c| c.is_ascii_alphanumeric()));
    }
}
