//! A bounded cache of decoded documents in front of the engine, one per shard.
//!
//! Point reads (`Shard::get`) and writes (`Shard::apply`) look here first:
//! a hit costs a hash lookup and an `Arc` clone instead of an engine get plus a JSON
//! decode, and the cached document keeps its stored JSON (`datum::Object::raw_json`),
//! so replying with it is a copy. Scans read their snapshot and do not use it.
//!
//! Only the stored JSON is kept (`datum::Object::text_only`): a decoded map takes about
//! twice the text again, and most hits only reply with the text. Each hit hands out its
//! own unbuilt object sharing that text, so a caller that decodes it (an update reading
//! the old document) never grows the cached entry past what it was charged.
//!
//! Consistency (the invariant: after a write to a key returns, no reader can find an
//! older version of that key here):
//! - writers hold the key's stripe lock in `Shard::apply`; around the engine write
//!   they call `begin_write` (bumps the stripe's generation, marks it busy, drops the
//!   key) and `end_write` (bumps the generation again, clears busy, caches the new
//!   document);
//! - a reader that misses notes the generation *before* its engine read and inserts
//!   what it read only if the stripe is not busy and the generation has not moved, so
//!   it can never put back a version that a write has replaced.
//!
//! Memory: the shards of one server share one byte budget (`CacheBudget`, created by
//! the server from `--cache-size` and handed to every shard it opens; there is no
//! process-wide budget, so several servers in one process stay independent); each
//! stripe evicts its own entries (second chance: recently hit entries survive one
//! pass) while the total is over the budget.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datum::Datum;
use parking_lot::Mutex;

/// Stripes per shard cache (independent locks).
const STRIPES: usize = 64;

/// The budget of a `CacheBudget::default()`.
const DEFAULT_BUDGET: usize = 64 << 20;

/// A byte budget shared by the document caches of the shards opened with it, and what
/// they hold together. Cloning shares it; 0 bytes disables the caches.
#[derive(Clone, Debug)]
pub struct CacheBudget(Arc<Counters>);

#[derive(Debug)]
struct Counters {
    /// The budget in bytes.
    limit: AtomicUsize,
    /// Bytes held by all caches sharing the budget.
    used: AtomicUsize,
}

impl CacheBudget {
    /// A budget of `bytes` for the caches that will share it.
    pub fn new(bytes: usize) -> CacheBudget {
        CacheBudget(Arc::new(Counters {
            limit: AtomicUsize::new(bytes),
            used: AtomicUsize::new(0),
        }))
    }

    /// Changes the budget (0 disables the caches); caches shrink as they insert.
    pub fn set_limit(&self, bytes: usize) {
        self.0.limit.store(bytes, Ordering::Relaxed);
    }

    /// The budget in bytes.
    pub fn limit(&self) -> usize {
        self.0.limit.load(Ordering::Relaxed)
    }

    /// The bytes the caches sharing this budget hold now.
    pub fn used(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }
}

impl Default for CacheBudget {
    /// 64 MiB.
    fn default() -> CacheBudget {
        CacheBudget::new(DEFAULT_BUDGET)
    }
}

/// The bytes an entry is charged: its stored JSON (held once: entries are unbuilt
/// objects, see [`lean`]), its key twice (map and queue) and the bookkeeping (the
/// object, its `Arc`, the map's and the queue's slots).
fn charge(key: &[u8], doc: &Datum) -> usize {
    let json = doc
        .as_object()
        .and_then(datum::Object::raw_json)
        .map_or(1024, <[u8]>::len);
    json + 2 * key.len() + 224
}

/// What the cache keeps of `doc`, and hands out on a hit: an object with its text and
/// no built map, sharing the text with `doc`. `None` for an object without text (not
/// cached: replying would print the map again).
fn lean(doc: &Datum) -> Option<Datum> {
    match doc {
        Datum::Object(o) => o.text_only().map(|t| Datum::Object(Arc::new(t))),
        other => Some(other.clone()),
    }
}

struct Entry {
    doc: Datum,
    size: usize,
    hit: bool,
    /// Which of the key's positions in `order` is current (older ones are stale).
    seq: u64,
}

#[derive(Default)]
struct Stripe {
    /// foldhash rather than SipHash: a lookup is on every point read, and keys are
    /// spread over the stripes by xxh3 first (foldhash's per-process seed still keeps
    /// a client from choosing colliding keys ahead of time).
    map: HashMap<Vec<u8>, Entry, foldhash::fast::RandomState>,
    /// Insertion order for eviction, as (key, seq): a position whose seq is not its
    /// entry's current seq is stale (the key was removed or re-inserted since) and is
    /// skipped when popped and dropped by compaction, so re-inserting a key never
    /// leaves live duplicates behind.
    order: VecDeque<(Vec<u8>, u64)>,
    next_seq: u64,
    bytes: usize,
    generation: u64,
    /// Writes in progress on keys of this stripe.
    busy: u32,
}

impl Stripe {
    fn remove(&mut self, key: &[u8], budget: &Counters) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.size;
            budget.used.fetch_sub(e.size, Ordering::Relaxed);
        }
    }

    fn insert(&mut self, key: Vec<u8>, doc: &Datum, budget: &Counters) {
        let Some(doc) = lean(doc) else {
            return;
        };
        let limit = budget.limit.load(Ordering::Relaxed);
        let size = charge(&key, &doc);
        if size > limit / 4 {
            return;
        }
        self.remove(&key, budget);
        budget.used.fetch_add(size, Ordering::Relaxed);
        self.bytes += size;
        self.next_seq += 1;
        let seq = self.next_seq;
        self.order.push_back((key.clone(), seq));
        self.map.insert(
            key,
            Entry {
                doc,
                size,
                hit: false,
                seq,
            },
        );
        self.evict(limit, budget);
    }

    /// Evicts while all caches together are over the budget (`limit` bytes) and this
    /// stripe has entries, looking at no more than `EVICT_STEPS` keys: the budget is
    /// shared by every stripe of every shard, so this stripe alone may be unable to bring it under, and
    /// an insert must not then walk its whole queue (that made writes O(cache size)).
    /// Each insert evicts up to several entries, so the total converges on the budget.
    /// Compacts `order` when it is mostly stale keys.
    fn evict(&mut self, limit: usize, budget: &Counters) {
        const EVICT_STEPS: usize = 16;
        let mut passes = self.order.len().min(EVICT_STEPS);
        while budget.used.load(Ordering::Relaxed) > limit && passes > 0 {
            passes -= 1;
            let Some((k, seq)) = self.order.pop_front() else {
                break;
            };
            match self.map.get_mut(&k) {
                Some(e) if e.seq != seq => {}
                Some(e) if e.hit => {
                    e.hit = false;
                    self.order.push_back((k, seq));
                }
                Some(_) => self.remove(&k, budget),
                None => {}
            }
        }
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(k, seq)| map.get(k).is_some_and(|e| e.seq == *seq));
        }
    }
}

/// One shard's cache of decoded documents by encoded primary key.
pub(crate) struct DocCache {
    stripes: Vec<Mutex<Stripe>>,
    /// The budget shared with the other shards of the server.
    budget: CacheBudget,
}

/// What a lookup found: the document, or the generation to quote when inserting.
pub(crate) enum Lookup {
    Hit(Datum),
    Miss(u64),
}

impl DocCache {
    pub(crate) fn new(budget: CacheBudget) -> DocCache {
        DocCache {
            stripes: (0..STRIPES)
                .map(|_| Mutex::new(Stripe::default()))
                .collect(),
            budget,
        }
    }

    fn stripe(&self, stripe: usize) -> &Mutex<Stripe> {
        // `stripes` has STRIPES entries and the index is reduced modulo STRIPES.
        &self.stripes[stripe % STRIPES]
    }

    /// Looks `key` (whose shard stripe number is `stripe`) up.
    pub(crate) fn get(&self, stripe: usize, key: &[u8]) -> Lookup {
        let mut s = self.stripe(stripe).lock();
        match s.map.get_mut(key) {
            Some(e) => {
                e.hit = true;
                // Entries are lean; a fresh object per hit keeps them so (module notes).
                Lookup::Hit(lean(&e.doc).unwrap_or_else(|| e.doc.clone()))
            }
            None => Lookup::Miss(s.generation),
        }
    }

    /// Caches what a reader read from the engine after a `Miss(generation)`, unless a
    /// write to the stripe started since.
    pub(crate) fn fill(&self, stripe: usize, generation: u64, key: &[u8], doc: &Datum) {
        if self.budget.limit() == 0 {
            return;
        }
        let mut s = self.stripe(stripe).lock();
        if s.busy == 0 && s.generation == generation {
            s.insert(key.to_vec(), doc, &self.budget.0);
        }
    }

    /// Before a write of `key` reaches the engine (caller holds the key's stripe lock).
    pub(crate) fn begin_write(&self, stripe: usize, key: &[u8]) {
        let mut s = self.stripe(stripe).lock();
        s.generation += 1;
        s.busy += 1;
        s.remove(key, &self.budget.0);
    }

    /// After the write (applied or failed): caches the key's new document, if any.
    pub(crate) fn end_write(&self, stripe: usize, key: &[u8], new: Option<&Datum>) {
        let mut s = self.stripe(stripe).lock();
        s.generation += 1;
        s.busy = s.busy.saturating_sub(1);
        // No `remove`: `begin_write` dropped the key, and nothing can have put it back
        // since (a reader's `fill` is refused while the stripe is busy, and another write
        // of the key waits for the caller's stripe lock); `insert` replaces in any case.
        if let Some(d) = new {
            if self.budget.limit() > 0 {
                s.insert(key.to_vec(), d, &self.budget.0);
            }
        }
    }
}

impl DocCache {
    /// Empties the cache (the documents' space was replaced: `Shard::attach`). A
    /// reader's `fill` after a `Miss` from before is refused, as after a write.
    pub(crate) fn clear(&self) {
        for stripe in &self.stripes {
            let mut s = stripe.lock();
            s.generation += 1;
            self.budget.0.used.fetch_sub(s.bytes, Ordering::Relaxed);
            s.map.clear();
            s.order.clear();
            s.bytes = 0;
        }
    }
}

impl Drop for DocCache {
    fn drop(&mut self) {
        let held: usize = self.stripes.iter().map(|s| s.lock().bytes).sum();
        self.budget.0.used.fetch_sub(held, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A document as read from the engine: an unbuilt object over its text.
    fn stored(json: &str) -> Datum {
        datum::from_json_owned(json.as_bytes().to_vec()).expect("json")
    }

    #[test]
    fn entries_keep_only_the_text_and_a_hit_that_decodes_does_not_grow_them() {
        let budget = CacheBudget::default();
        let c = DocCache::new(budget.clone());
        let doc = stored(r#"{"a":"xyz","id":1}"#);
        // A written document comes with its map built; the cache keeps the text only.
        let built = doc.as_object().map(|o| o.len());
        assert_eq!(built, Some(2));
        c.end_write(0, b"k", Some(&doc));
        let used = budget.used();
        assert!(used > 0);
        let Lookup::Hit(hit) = c.get(0, b"k") else {
            panic!("miss after a write")
        };
        let o = hit.as_object().expect("object");
        assert!(!o.is_built(), "handed out unbuilt");
        assert_eq!(
            o.raw_json(),
            doc.as_object().and_then(datum::Object::raw_json)
        );
        // The caller decodes its copy; the cached entry stays unbuilt.
        assert_eq!(o.len(), 2);
        let Lookup::Hit(again) = c.get(0, b"k") else {
            panic!("miss")
        };
        assert!(!again.as_object().expect("object").is_built());
        assert_eq!(again, doc);
        assert_eq!(budget.used(), used);
        // A document without its text is not cached.
        c.end_write(
            0,
            b"j",
            Some(&Datum::from_pairs([("id", Datum::Number(2.0))])),
        );
        assert!(matches!(c.get(0, b"j"), Lookup::Miss(_)));
    }

    #[test]
    fn reinserting_a_key_keeps_the_eviction_queue_bounded() {
        let budget = CacheBudget::default();
        let mut s = Stripe::default();
        let doc = stored(r#"{"id":1}"#);
        for _ in 0..10_000 {
            s.insert(b"k".to_vec(), &doc, &budget.0);
        }
        assert_eq!(s.map.len(), 1);
        assert!(
            s.order.len() <= 2 * s.map.len() + 65,
            "stale positions piled up: {}",
            s.order.len()
        );
        s.remove(b"k", &budget.0);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn budgets_are_independent() {
        let (a, b) = (CacheBudget::new(1 << 20), CacheBudget::new(1 << 20));
        let (ca, cb) = (DocCache::new(a.clone()), DocCache::new(b.clone()));
        let doc = stored(r#"{"id":1}"#);
        let Lookup::Miss(g) = ca.get(0, b"k") else {
            panic!("hit in an empty cache")
        };
        ca.fill(0, g, b"k", &doc);
        assert!(matches!(ca.get(0, b"k"), Lookup::Hit(_)));
        assert!(a.used() > 0);
        assert_eq!(b.used(), 0);
        assert!(matches!(cb.get(0, b"k"), Lookup::Miss(_)));
        // A zero budget caches nothing, whatever the other budget allows.
        b.set_limit(0);
        cb.end_write(0, b"k", Some(&doc));
        assert!(matches!(cb.get(0, b"k"), Lookup::Miss(_)));
        assert_eq!(b.used(), 0);
        drop(ca);
        assert_eq!(a.used(), 0);
    }
}
