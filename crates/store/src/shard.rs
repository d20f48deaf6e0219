//! A table shard: documents keyed by their encoded primary key in one storage space.

use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use datum::{Datum, Version};
use parking_lot::Mutex;
use storage::{Engine, WriteBatch};

use crate::cache::{CacheBudget, DocCache, Lookup};
use crate::commit::GroupCommit;
use crate::range::KeyRange;
use crate::sample::KeySample;
use crate::spaces::SpaceName;
use crate::write::Local;
use crate::StoreError;

const LOCK_STRIPES: usize = 256;

/// The old document, the new document, and the write's ticket (when one was made).
pub type ModifyOutcome = (Option<Datum>, Option<Datum>, Option<u64>);

/// The outcome of `Shard::apply`.
#[derive(Debug)]
pub enum Applied {
    /// Applied (or nothing to do): old document, new document, ticket.
    Done(ModifyOutcome),
    /// The key no longer holds the expected version; nothing was written. Carries
    /// the document the key holds now, so the caller can evaluate again without a read.
    Conflict(Option<Datum>),
}

/// What a write does to one document.
#[derive(Debug, Clone)]
pub enum StoreChange {
    /// Leave it.
    Keep,
    /// Store this document.
    Put(Datum),
    /// Delete it.
    Delete,
}

/// One shard of a table.
pub struct Shard {
    pub(crate) engine: Arc<dyn Engine>,
    /// The documents' space (`attach` moves it).
    pub(crate) space: SpaceName,
    pub(crate) locks: Vec<Mutex<()>>,
    pub(crate) count: AtomicI64,
    pub(crate) commit: Arc<GroupCommit>,
    /// Secondary indexes maintained by `apply` (`index.rs`); read-locked across each
    /// write so that registering an index waits for writes that missed it.
    pub(crate) indexes: parking_lot::RwLock<Vec<Arc<crate::index::SecondaryIndex>>>,
    /// Changefeed subscriptions, fed by `apply` under the key's stripe lock (`feeds.rs`).
    pub(crate) feeds: Arc<changefeed::Hub>,
    /// Decoded documents for point reads and writes (`cache.rs`).
    pub(crate) cache: DocCache,
    /// A sample of the primary keys, for split points (`sample.rs`).
    pub(crate) sample: KeySample,
    /// The primary keys this shard owns (`range.rs`).
    pub(crate) range: KeyRange,
    /// Held by a replicated shard's index build (`replica_index.rs`): one at a time.
    pub(crate) replica_builds: Mutex<()>,
    /// The generation of the resharding that retired this replicated shard (0: none;
    /// set by its machine, `crate::replica`).
    retired: std::sync::atomic::AtomicU64,
}

/// The number of documents of `range` in `space`, and their key sample.
pub(crate) fn count_and_sample(
    engine: &dyn Engine,
    space: &str,
    range: &KeyRange,
) -> Result<(i64, KeySample), StoreError> {
    let snap = engine.snapshot();
    let mut n = 0i64;
    let sample = KeySample::default();
    if let Some((lo, hi)) = range.clamp(Bound::Unbounded, Bound::Unbounded) {
        for kv in snap.range(space, lo, hi, false)? {
            sample.insert(&kv?.0);
            n += 1;
        }
    }
    Ok((n, sample))
}

impl Shard {
    /// Opens (creating if needed) the shard stored in `space`, counting its documents;
    /// its document cache has a budget of its own (`CacheBudget::default()`).
    pub fn open(
        engine: Arc<dyn Engine>,
        space: &str,
        commit: Arc<GroupCommit>,
    ) -> Result<Shard, StoreError> {
        Shard::open_with_cache(engine, space, commit, CacheBudget::default())
    }

    /// Opens the shard like `open`, its document cache sharing `cache` (the budget of
    /// all the shards of one server).
    pub fn open_with_cache(
        engine: Arc<dyn Engine>,
        space: &str,
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
    ) -> Result<Shard, StoreError> {
        let hub = changefeed::Hub::new();
        Shard::open_range(engine, space, commit, cache, hub, KeyRange::all())
    }

    /// Opens the shard owning `range` of the documents in `space` (other shards of the
    /// table own the rest of it), publishing its changes to `feeds` (the table's hub).
    pub fn open_range(
        engine: Arc<dyn Engine>,
        space: &str,
        commit: Arc<GroupCommit>,
        cache: CacheBudget,
        feeds: Arc<changefeed::Hub>,
        range: KeyRange,
    ) -> Result<Shard, StoreError> {
        engine.create_space(space)?;
        let (n, sample) = count_and_sample(&*engine, space, &range)?;
        Ok(Shard {
            engine,
            space: SpaceName::new(space),
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            count: AtomicI64::new(n),
            commit,
            indexes: parking_lot::RwLock::new(Vec::new()),
            feeds,
            cache: DocCache::new(cache),
            sample,
            range,
            replica_builds: Mutex::new(()),
            retired: Default::default(),
        })
    }

    /// The generation of the resharding that retired this replicated shard, once its
    /// machine applied the retirement (0: serving its table).
    pub fn retired(&self) -> u64 {
        self.retired.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn retire(&self, generation: u64) {
        self.retired
            .store(generation, std::sync::atomic::Ordering::SeqCst);
    }

    /// The documents' storage space now (a replicated shard's `attach` moves it).
    pub fn space(&self) -> Arc<str> {
        self.space.get()
    }

    fn encode(key: &Datum) -> Result<Vec<u8>, StoreError> {
        datum::keys::encode_primary(key).map_err(|e| StoreError::Key(e.message().to_string()))
    }

    /// Decodes a stored document, which keeps its bytes for replies (they are our own
    /// canonical JSON: see `datum::from_json_owned`).
    fn decode(bytes: storage::Bytes) -> Result<Datum, StoreError> {
        crate::index::decode_doc(bytes)
    }

    /// The document under `key`.
    pub fn get(&self, key: &Datum) -> Result<Option<Datum>, StoreError> {
        let k = Self::encode(key)?;
        let stripe = Self::stripe_index(&k);
        let generation = match self.cache.get(stripe, &k) {
            Lookup::Hit(d) => return Ok(Some(d)),
            Lookup::Miss(g) => g,
        };
        match self.engine.get(&self.space.get(), &k)? {
            Some(v) => {
                let d = Self::decode(v.into())?;
                self.cache.fill(stripe, generation, &k, &d);
                Ok(Some(d))
            }
            None => Ok(None),
        }
    }

    /// Documents between two key bounds, in key order, from one snapshot, lazily.
    pub fn scan(
        &self,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> Result<impl Iterator<Item = Result<Datum, StoreError>> + Send + 'static, StoreError> {
        let enc = |b: Bound<Datum>| -> Result<Bound<Vec<u8>>, StoreError> {
            Ok(match b {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(d) => Bound::Included(
                    datum::keys::encode_bound(&d)
                        .map_err(|e| StoreError::Key(e.message().to_string()))?,
                ),
                Bound::Excluded(d) => Bound::Excluded(
                    datum::keys::encode_bound(&d)
                        .map_err(|e| StoreError::Key(e.message().to_string()))?,
                ),
            })
        };
        let space = self.space.get();
        let snap = self.engine.snapshot();
        let it = match self.range.clamp(enc(lower)?, enc(upper)?) {
            Some((lo, hi)) => Some(snap.values(&space, lo, hi, reverse)?),
            None => None,
        };
        Ok(it.into_iter().flatten().map(|v| Self::decode(v?)))
    }

    /// The primary keys this shard owns.
    pub fn range(&self) -> &KeyRange {
        &self.range
    }

    /// The sampled keys of this shard, ascending (encoded; see `sample.rs`).
    pub fn sampled_keys(&self) -> Vec<Vec<u8>> {
        self.sample.keys()
    }

    /// Up to `parts - 1` primary keys, ascending, that cut the documents into `parts`
    /// ranges of about equal size (from the key sample: none for a small shard).
    pub fn split_points(&self, parts: usize) -> Vec<Datum> {
        self.sample
            .split_points(parts)
            .iter()
            .filter_map(|k| datum::keys::decode(k))
            .collect()
    }

    /// The number of documents.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst).max(0) as u64
    }

    pub(crate) fn stripe(&self, k: &[u8]) -> &Mutex<()> {
        // `locks` has LOCK_STRIPES entries, so the index is in range.
        &self.locks[Self::stripe_index(k)]
    }

    /// The stripe lock number of an encoded key: FNV-1a, its high bits folded down.
    /// Any fixed spread will do (it picks a lock and a cache stripe, not a hash table
    /// slot, and SipHash with fixed keys was no harder to aim at), and a point read
    /// pays for it on every call.
    pub(crate) fn stripe_index(k: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in k {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        ((h ^ (h >> 32) ^ (h >> 16)) as usize) % LOCK_STRIPES
    }

    /// Applies one write operation: `change` to the document under `key`, provided
    /// the key still holds version `expect` (`None`: whatever it holds). Runs no user
    /// code: the stripe lock is held only to check the version, stage index entries and
    /// apply one batch (`write.rs`, shared with the replicated path). Returns
    /// `Applied::Conflict` when the version moved, so the caller re-evaluates its write
    /// against the current document. Never interrupted half way
    /// (`datum::work::unwatched`): the write, the cache and the feeds stay in step.
    pub fn apply(
        &self,
        key: &Datum,
        expect: Option<Version>,
        change: StoreChange,
    ) -> Result<Applied, StoreError> {
        datum::work::unwatched(|| self.apply_now(key, expect, change))
    }

    fn apply_now(
        &self,
        key: &Datum,
        expect: Option<Version>,
        change: StoreChange,
    ) -> Result<Applied, StoreError> {
        let k = Self::encode(key)?;
        let mut local = Local {
            shard: self,
            batch: WriteBatch::new(),
        };
        self.apply_encoded(&k, expect, change, &mut local)
    }

    /// Applies `change` whatever the key holds (tests and internal writers).
    pub fn write(&self, key: &Datum, change: StoreChange) -> Result<ModifyOutcome, StoreError> {
        match self.apply(key, None, change)? {
            Applied::Done(r) => Ok(r),
            Applied::Conflict(_) => {
                Err(StoreError::Corrupt("unconditional write conflicted".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::Memory;

    fn shard() -> Shard {
        let e: Arc<dyn Engine> = Arc::new(Memory::new());
        let gc = GroupCommit::start(e.clone());
        Shard::open(e, "t", gc).unwrap()
    }

    fn doc(id: f64) -> Datum {
        datum::from_json_slice(format!("{{\"id\":{id},\"v\":1}}").as_bytes()).unwrap()
    }

    #[test]
    fn keys_spread_over_every_stripe() {
        let mut counts = vec![0usize; LOCK_STRIPES];
        for i in 0..25_600 {
            for key in [Datum::from(format!("user{i}")), Datum::Number(i as f64)] {
                counts[Shard::stripe_index(&Shard::encode(&key).unwrap())] += 1;
            }
        }
        // 200 keys per stripe on average.
        let (min, max) = (counts.iter().min(), counts.iter().max());
        assert!(min >= Some(&100) && max <= Some(&300), "{min:?}..{max:?}");
    }

    #[test]
    fn write_get_scan_count() {
        let s = shard();
        for i in [3.0, 1.0, 2.0] {
            let (old, new, t) = s
                .write(&Datum::Number(i), StoreChange::Put(doc(i)))
                .unwrap();
            assert!(old.is_none() && new.is_some() && t.is_some());
        }
        assert_eq!(s.count(), 3);
        let ids: Vec<f64> = s
            .scan(Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .map(|d| d.unwrap().get("id").unwrap().as_f64().unwrap())
            .collect();
        assert_eq!(ids, vec![1.0, 2.0, 3.0]);
        let (_, _, t) = s.write(&Datum::Number(9.0), StoreChange::Delete).unwrap();
        assert!(t.is_none());
        s.write(&Datum::Number(1.0), StoreChange::Delete).unwrap();
        assert_eq!(s.count(), 2);
        assert!(s.get(&Datum::Number(1.0)).unwrap().is_none());
    }

    /// Reads through the document cache see every write, and documents read back keep
    /// their stored JSON for replies.
    #[test]
    fn cached_reads_follow_writes() {
        let s = shard();
        let key = Datum::Number(7.0);
        for v in 0..3 {
            let d = Datum::from_pairs([
                ("id", Datum::Number(7.0)),
                ("v", Datum::Number(f64::from(v))),
            ]);
            // Held elsewhere too (as a write's caller keeps it for its result): the
            // document itself cannot take the text, and the cache still keeps text.
            let shared = (v % 2 == 1).then(|| d.clone());
            s.write(&key, StoreChange::Put(d)).unwrap();
            drop(shared);
            for _ in 0..2 {
                let d = s.get(&key).unwrap().unwrap();
                assert_eq!(d.get("v").and_then(Datum::as_f64), Some(f64::from(v)));
                let raw = d.as_object().and_then(datum::Object::raw_json).unwrap();
                assert_eq!(raw, format!("{{\"id\":7,\"v\":{v}}}").as_bytes());
            }
        }
        s.write(&key, StoreChange::Delete).unwrap();
        assert!(s.get(&key).unwrap().is_none());
    }

    #[test]
    fn a_moved_version_is_a_conflict_and_writes_nothing() {
        let s = shard();
        let key = Datum::Number(1.0);
        s.write(&key, StoreChange::Put(doc(1.0))).unwrap();
        let seen = s.get(&key).unwrap();
        let v1 = Version::of(seen.as_ref());
        let moved = Datum::from_pairs([("id", Datum::Number(1.0)), ("v", Datum::Number(2.0))]);
        s.write(&key, StoreChange::Put(moved.clone())).unwrap();
        let late = s.apply(&key, Some(v1), StoreChange::Delete).unwrap();
        assert!(matches!(&late, Applied::Conflict(Some(d)) if *d == moved));
        assert_eq!(s.get(&key).unwrap(), Some(moved.clone()));
        assert_eq!(s.count(), 1);
        let v2 = Version::of(Some(&moved));
        let done = s.apply(&key, Some(v2), StoreChange::Delete).unwrap();
        assert!(matches!(done, Applied::Done((Some(_), None, Some(_)))));
        // An insert expects the key to be absent.
        let again = s.apply(&key, Some(Version::ABSENT), StoreChange::Put(doc(1.0)));
        assert!(matches!(again, Ok(Applied::Done((None, Some(_), Some(_))))));
        let twice = s.apply(&key, Some(Version::ABSENT), StoreChange::Put(doc(1.0)));
        assert!(matches!(twice, Ok(Applied::Conflict(Some(_)))));
    }

    #[test]
    fn split_points_are_stored_keys_in_order() {
        let s = shard();
        for i in 0..20_000 {
            let id = Datum::from(format!("user{i:06}"));
            let d = Datum::from_pairs([("id", id.clone())]);
            s.write(&id, StoreChange::Put(d)).unwrap();
        }
        let cuts = s.split_points(4);
        assert_eq!(cuts.len(), 3);
        assert!(cuts.windows(2).all(|w| datum::cmp(&w[0], &w[1]).is_lt()));
        for c in &cuts {
            assert!(s.get(c).unwrap().is_some(), "{c:?} is not a stored key");
        }
        // About a quarter of the documents below the first cut.
        let below = s.count_range(&Bound::Unbounded, &Bound::Excluded(cuts[0].clone()));
        let below = below.unwrap();
        assert!((3_000..7_000).contains(&below), "{below}");
    }
}
