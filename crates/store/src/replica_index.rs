//! Secondary indexes of a replicated shard (`crate::replica`), added and dropped while
//! the shard's Raft group runs, each replica building its own copy.
//!
//! The definitions live in the replicated catalog (group 0), not in the shard's log:
//! every server follows the catalog and registers an index with its replicas of the
//! table's shards (`Shard::open_replica_index`), then builds it in the background
//! (`Shard::build_replica_index`), exactly as a single server builds one. An index's
//! entries are a function of the documents alone (its function is deterministic: ReQL
//! refuses the others at `index_create`), so replicas that hold the same documents hold
//! the same entries, whatever the moment each one built its copy. This is RethinkDB's
//! own design (secondary indexes are part of the table's configuration, and each
//! replica's store backfills them), and it keeps index builds off the group's apply
//! path: a shard keeps taking writes while its replicas build.
//!
//! The entries live in a space of their own per replica and index (the cluster names it
//! under the group's prefix, so dropping the group drops it), outside the state
//! machine's spaces: snapshots carry documents only. After a snapshot install moved the
//! documents (`ShardMachine::attach`), every such index is emptied and rebuilt from the
//! installed documents before the next entry applies (the group's writes wait for it:
//! installs are rare, and an index that missed the install's changes would be wrong).
//!
//! Invariants:
//! - An index is registered before any write can miss it: at start-up before the
//!   group starts applying (its space kept only when [`BUILT`] says it was complete for
//!   the documents' current space), at run time by `Shard::add_index`, which waits for
//!   writes in flight. Every later write maintains it in the entry's batch.
//! - [`BUILT`] (key `0x00 ‖ 0xFE` of the index's space, beside the markers of
//!   `crate::unkeyed`) holds the name of the documents' space the index was completed
//!   for: written after a build, so an index whose build was interrupted (a crash, an
//!   install) is emptied and built again when the server restarts.
//! - One build per shard at a time (`Shard::replica_builds`): an install's rebuild
//!   waits for a background build to stop, so no build writes entries of documents the
//!   install replaced after the index was emptied.
//! - A ready replica index has its statistics (entry count and unkeyed counts, as
//!   `index::track_entries` keeps them on one server): they are counted with every
//!   write to the shard blocked before it is marked ready (at open when complete, after
//!   each build), and every applied entry keeps them from then on. The cluster's query
//!   optimizer reads them from each shard's leader.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use storage::{Snapshot, StorageError};

use crate::index::{decode_doc, EntryIter, IndexEntry, IndexFn, IndexRange, SecondaryIndex};
use crate::{Shard, StoreError};

/// The key of an index's space recording the documents' space it was completed for.
pub(crate) const BUILT: [u8; 2] = [0x00, 0xFE];

impl Shard {
    /// Registers the index stored in `space` with this replicated shard: ready when
    /// [`BUILT`] says it was completed for the documents as they are now, else emptied
    /// and not ready (build it with [`Shard::build_replica_index`]).
    pub fn open_replica_index(
        &self,
        space: &str,
        func: Arc<dyn IndexFn>,
        multi: bool,
    ) -> Result<Arc<SecondaryIndex>, StoreError> {
        let built = match self.engine.get(space, &BUILT) {
            Ok(v) => v.is_some_and(|v| *v == *self.space.get().as_bytes()),
            Err(StorageError::NoSuchSpace(_)) => false,
            Err(e) => return Err(e.into()),
        };
        if !built {
            // Whatever an interrupted build left may follow documents that are gone.
            self.engine.drop_space(space)?;
        }
        let idx = SecondaryIndex::new(space, func, multi, false);
        self.add_index(idx.clone())?;
        if built {
            self.count_then_ready(&idx)?;
        }
        Ok(idx)
    }

    /// Builds a registered replica index from the documents and marks it ready (false
    /// when it was dropped meanwhile). Blocks while another build of this shard runs.
    pub fn build_replica_index(&self, idx: &SecondaryIndex) -> Result<bool, StoreError> {
        let _one = self.replica_builds.lock();
        self.build_replica_locked(idx)
    }

    fn build_replica_locked(&self, idx: &SecondaryIndex) -> Result<bool, StoreError> {
        let docs = self.space.get();
        idx.set_total(self.count());
        self.build_index(idx)?;
        if idx.is_cancelled() {
            return Ok(false);
        }
        self.set_unkeyed_complete(idx)?;
        let mut b = storage::WriteBatch::new();
        b.put(&idx.space(), BUILT.to_vec(), docs.as_bytes().to_vec());
        self.engine.apply(b)?;
        self.count_then_ready(idx)?;
        Ok(true)
    }

    /// Counts a complete index's entries and markers while no write can apply, then
    /// marks it ready: a ready replica index never shows counts of other documents (an
    /// install's rebuild leaves the old ones until this recount).
    fn count_then_ready(&self, idx: &SecondaryIndex) -> Result<(), StoreError> {
        let _all: Vec<_> = self.locks.iter().map(|l| l.lock()).collect();
        self.recount(idx)?;
        idx.set_ready();
        Ok(())
    }

    /// After a snapshot install moved the documents: empties and rebuilds every
    /// registered index not in `fixed` (the machine's own), before the next entry.
    pub(crate) fn rebuild_replica_indexes(
        &self,
        fixed: &[&SecondaryIndex],
    ) -> Result<(), StoreError> {
        let _one = self.replica_builds.lock();
        let all: Vec<Arc<SecondaryIndex>> = self.indexes.read().clone();
        for idx in all {
            if fixed.iter().any(|f| std::ptr::eq(*f, &*idx)) || idx.is_cancelled() {
                continue;
            }
            idx.set_not_ready();
            let space = idx.space();
            self.engine.drop_space(&space)?;
            self.engine.create_space(&space)?;
            self.build_replica_locked(&idx)?;
        }
        Ok(())
    }

    /// At most `limit` entries of `idx` in `[lower, upper]` with their documents, in
    /// index order (or reversed), strictly after `after` (the last entry of the previous
    /// batch), from one snapshot: a range read in bounded batches.
    pub fn index_batch(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        reverse: bool,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<(IndexEntry, Datum)>, StoreError> {
        let range = IndexRange::new(lower, upper)?;
        let (mut lo, mut hi) = range.key_bounds();
        if let Some(a) = after {
            // A truncated key's entries come in a run ordered by whole value: resume at
            // the run's start and skip what was already read.
            let resume = a.resume_prefix();
            match (reverse, resume) {
                (false, None) => lo = Bound::Excluded(a.raw_key().to_vec()),
                (false, Some(p)) => lo = Bound::Included(p.to_vec()),
                (true, None) => hi = Bound::Excluded(a.raw_key().to_vec()),
                (true, Some(p)) => hi = prefix_end(p),
            }
        }
        let (space, docs) = (idx.space(), self.space.get());
        let snap: Arc<dyn Snapshot> = Arc::from(self.engine.snapshot());
        let entries = EntryIter::with_bounds(snap.as_ref(), &space, range, (lo, hi), reverse)?;
        let mut out = Vec::with_capacity(limit.min(1024));
        for e in entries {
            if out.len() >= limit {
                break;
            }
            let mut e = e?;
            if let Some(a) = after {
                let seen = e.order().cmp(&a.order());
                if (!reverse && seen.is_le()) || (reverse && seen.is_ge()) {
                    continue;
                }
            }
            let doc = match e.doc.take() {
                Some(d) => decode_doc(d)?,
                None => match snap.get(&docs, e.pk())? {
                    Some(v) => decode_doc(v.into())?,
                    // An entry always has its document in the same snapshot.
                    None => continue,
                },
            };
            out.push((e, doc));
        }
        Ok(out)
    }
}

impl IndexEntry {
    /// The entry's key as stored (its value possibly truncated).
    pub fn raw_key(&self) -> &[u8] {
        &self.key
    }

    /// The whole encoded value, when the key holds a truncated one.
    pub fn whole(&self) -> Option<&[u8]> {
        self.whole.as_deref()
    }

    /// The entry whose stored key is `key` and whole value `whole` (as `raw_key` and
    /// `whole` gave them), without its document: a resume point, or an entry sent
    /// between servers.
    pub fn from_raw(key: Vec<u8>, whole: Option<Vec<u8>>) -> Result<IndexEntry, StoreError> {
        let (s, pk, tag) = datum::keys::split_secondary_entry(&key)
            .ok_or_else(|| StoreError::Corrupt("malformed index entry".into()))?;
        let pk = (s.len(), s.len() + pk.len());
        Ok(IndexEntry {
            key,
            pk,
            tag,
            whole,
            doc: None,
        })
    }

    /// Where entries are in index order: value, primary key, tag.
    pub fn order(&self) -> (&[u8], &[u8], Option<u32>) {
        (self.value(), self.pk(), self.tag())
    }

    /// The prefix shared by a run of truncated keys, when this key is one of them.
    fn resume_prefix(&self) -> Option<&[u8]> {
        self.whole.as_ref()?;
        self.key.get(..datum::keys::SECONDARY_TRUNC_BYTES)
    }
}

/// The bound just past every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Bound::Excluded(p);
        }
    }
    Bound::Unbounded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupCommit, NoKeys, StoreChange};
    use storage::{Engine, Memory};

    /// Indexes field `v`.
    struct ByV;

    impl IndexFn for ByV {
        fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
            let v = doc.get("v").ok_or(NoKeys::Failed("no v".into()))?;
            Ok(vec![
                datum::keys::encode_secondary(v).map_err(|e| NoKeys::Failed(e.message().into()))?
            ])
        }
    }

    fn doc(id: u32, v: &str) -> Datum {
        Datum::from_pairs([("id", Datum::Number(f64::from(id))), ("v", Datum::str(v))])
    }

    fn ids(batch: &[(IndexEntry, Datum)]) -> Vec<f64> {
        batch
            .iter()
            .map(|(_, d)| d.get("id").and_then(Datum::as_f64).unwrap())
            .collect()
    }

    #[test]
    fn a_replica_index_is_built_kept_and_read_in_batches() {
        let e: Arc<dyn Engine> = Arc::new(Memory::new());
        let shard = Shard::open(e.clone(), "docs", GroupCommit::start(e.clone())).unwrap();
        for i in 0..10 {
            let v = if i % 2 == 0 { "a" } else { "b" };
            shard
                .write(&Datum::Number(f64::from(i)), StoreChange::Put(doc(i, v)))
                .unwrap();
        }
        // A long value: its entries' keys are truncated.
        let long = "x".repeat(300);
        for i in 10..15 {
            let v = format!("{long}{}", 20 - i);
            shard
                .write(&Datum::Number(f64::from(i)), StoreChange::Put(doc(i, &v)))
                .unwrap();
        }
        let idx = shard
            .open_replica_index("ix", Arc::new(ByV), false)
            .unwrap();
        assert!(!idx.is_ready());
        assert!(shard.build_replica_index(&idx).unwrap());
        assert!(idx.is_ready());
        shard
            .write(&Datum::Number(0.0), StoreChange::Put(doc(0, "b")))
            .unwrap();
        let all = (Bound::Unbounded, Bound::Unbounded);
        for reverse in [false, true] {
            let mut got = Vec::new();
            let mut after: Option<IndexEntry> = None;
            loop {
                let b = shard
                    .index_batch(&idx, &all.0, &all.1, reverse, after.as_ref(), 2)
                    .unwrap();
                if b.is_empty() {
                    break;
                }
                got.extend(ids(&b));
                after = b.last().map(|(e, _)| e.clone());
            }
            let mut want = vec![
                2.0, 4.0, 6.0, 8.0, 0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 10.0, 14.0, 13.0, 12.0, 11.0,
            ];
            if reverse {
                want.reverse();
            }
            assert_eq!(got, want, "reverse: {reverse}");
        }
        // Reopened on the same documents: kept, ready; on others: emptied.
        let again = Shard::open(e.clone(), "docs", GroupCommit::start(e.clone())).unwrap();
        assert!(again
            .open_replica_index("ix", Arc::new(ByV), false)
            .unwrap()
            .is_ready());
        let other = Shard::open(e.clone(), "docs2", GroupCommit::start(e.clone())).unwrap();
        let idx2 = other
            .open_replica_index("ix", Arc::new(ByV), false)
            .unwrap();
        assert!(!idx2.is_ready());
        assert_eq!(other.index_count(&idx2, &all.0, &all.1).unwrap(), 0);
    }

    #[test]
    fn prefix_end_is_past_every_extension() {
        assert_eq!(prefix_end(&[1, 2]), Bound::Excluded(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xFF]), Bound::Excluded(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), Bound::Unbounded);
    }
}
