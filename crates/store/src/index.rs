//! Secondary indexes of a shard: their entries, maintenance hooks, reads and backfill.
//!
//! Each index lives in its own storage space. An entry's key is
//! `datum::keys::secondary_entry(value, primary key, tag)`; its value (see [`EntryValue`])
//! carries the whole encoded index value when the key holds a truncated one, and a copy of
//! the document, so that index reads are one range scan with no primary-key lookups (as
//! RethinkDB's secondary indexes store documents too). Entries written before documents
//! were copied (an empty value, or only the whole index value) are still read: their
//! documents are fetched by primary key. The store does not know ReQL: an index computes
//! its values through an [`IndexFn`] that `cluster` implements by evaluating the ReQL
//! index function.
//!
//! Invariants:
//! - Every registered index is maintained by `Shard::apply` in the same `WriteBatch` as
//!   the document, under the document's stripe lock; the shard's index list is read-locked
//!   for the whole write, so registering an index waits for the writes that
//!   did not see it, and a backfill snapshot taken after registration sees all of them.
//! - The backfill writes the entries of the *current* document (re-read under its stripe
//!   lock), never of the snapshot's copy, so it cannot resurrect deleted or changed
//!   documents; it only adds entries, which later writes delete as usual.
//! - A document whose index function fails has no entries in that index; one whose
//!   value no index can hold has a marker instead (`crate::unkeyed`), maintained the
//!   same way.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use datum::keys::{self, SECONDARY_TRUNC_BYTES};
use datum::Datum;
use storage::{Bytes, KvIter, Snapshot};

use crate::spaces::SpaceName;
use crate::unkeyed::{self, NoKeys, Unkeyed};
use crate::StoreError;

/// Computes the index values of a document.
pub trait IndexFn: Send + Sync {
    /// The encoded values (`datum::keys::encode_secondary`) the document is indexed
    /// under, one per element for a multi index. An error leaves the document out, and
    /// says whether it had a value the index cannot hold (`crate::unkeyed`).
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys>;
}

/// One secondary index of a shard, and the state of its construction.
pub struct SecondaryIndex {
    space: SpaceName,
    func: Arc<dyn IndexFn>,
    multi: bool,
    ready: AtomicBool,
    done: AtomicU64,
    total: AtomicU64,
    cancelled: AtomicBool,
    /// The number of entries, once `track_entries` counted them (-1 before): kept up to
    /// date by every write under its stripe lock, for the query optimizer's estimates.
    entry_count: std::sync::atomic::AtomicI64,
    /// The documents of each `Unkeyed` class (-1 before `track_entries` counted them),
    /// kept like `entry_count` (`crate::unkeyed` states the invariant).
    unkeyed: [std::sync::atomic::AtomicI64; 3],
}

/// Entry keys, each with the whole index value when the key holds a truncated one.
type EntryKeys = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Entries: key and value.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A write's change in an index's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    pub(crate) entries: i64,
    pub(crate) unkeyed: [i64; 3],
}

impl SecondaryIndex {
    /// An index stored in `space`; `ready` when its entries are already complete.
    pub fn new(space: &str, func: Arc<dyn IndexFn>, multi: bool, ready: bool) -> Arc<Self> {
        Arc::new(SecondaryIndex {
            space: SpaceName::new(space),
            func,
            multi,
            ready: AtomicBool::new(ready),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
            entry_count: std::sync::atomic::AtomicI64::new(-1),
            unkeyed: std::array::from_fn(|_| std::sync::atomic::AtomicI64::new(-1)),
        })
    }

    /// The storage space of its entries now (a replicated shard's `attach` moves it).
    pub fn space(&self) -> Arc<str> {
        self.space.get()
    }

    /// Moves the index to `space` (`Shard::attach`); true when it moved.
    pub(crate) fn set_space(&self, space: &str) -> bool {
        self.space.set(space)
    }

    /// True once the backfill finished (reads are allowed).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Marks the index complete.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Marks the index incomplete again (a replica rebuilding it after an install).
    pub(crate) fn set_not_ready(&self) {
        self.ready.store(false, Ordering::SeqCst);
    }

    /// Backfill progress in `[0, 1]` (1 when ready).
    pub fn progress(&self) -> f64 {
        if self.is_ready() {
            return 1.0;
        }
        let total = self.total.load(Ordering::Relaxed).max(1) as f64;
        (self.done.load(Ordering::Relaxed) as f64 / total).min(1.0)
    }

    /// Stops a running backfill at its next chunk (the index is being dropped).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// True once `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The entry keys of a document with encoded primary key `pk`, each with the whole
    /// index value when the key holds a truncated one; without entries, the class of a
    /// value the index cannot hold.
    fn entry_keys(&self, pk: &[u8], doc: &Datum) -> (EntryKeys, Option<Unkeyed>) {
        let values = match self.func.keys(doc) {
            Ok(v) => v,
            Err(NoKeys::Failed(_)) => return (Vec::new(), None),
            Err(NoKeys::Unkeyable(c)) => return (Vec::new(), Some(c)),
        };
        let keys = values
            .into_iter()
            .enumerate()
            .map(|(i, sec)| {
                let tag = self.multi.then_some(i as u32);
                let (key, truncated) = keys::secondary_entry(&sec, pk, tag);
                (key, truncated.then_some(sec))
            })
            .collect();
        (keys, None)
    }

    /// The entries (key, value) of a document whose stored JSON is `json`, and its
    /// marker's class when it has none (`crate::unkeyed`).
    pub(crate) fn entries(
        &self,
        pk: &[u8],
        doc: &Datum,
        json: &[u8],
    ) -> (Entries, Option<Unkeyed>) {
        let (keys, class) = self.entry_keys(pk, doc);
        let entries = keys
            .into_iter()
            .map(|(key, whole)| (key, EntryValue::encode(whole.as_deref(), json)))
            .collect();
        (entries, class)
    }

    /// The number of entries, when tracked (`track_entries`); exact between writes.
    pub fn entry_count(&self) -> Option<u64> {
        u64::try_from(self.entry_count.load(Ordering::SeqCst)).ok()
    }

    /// The documents of each `Unkeyed` class (in `Unkeyed::ALL` order), when counted
    /// (`track_entries`); exact between writes, never an under-count (`crate::unkeyed`).
    pub fn unkeyed_counts(&self) -> Option<[u64; 3]> {
        let mut out = [0u64; 3];
        for (o, c) in out.iter_mut().zip(&self.unkeyed) {
            *o = u64::try_from(c.load(Ordering::SeqCst)).ok()?;
        }
        Some(out)
    }

    /// Adds a write's change in statistics (under its stripe lock, once applied).
    pub(crate) fn note(&self, delta: Delta) {
        let add = |count: &std::sync::atomic::AtomicI64, d: i64| {
            if d != 0 && count.load(Ordering::SeqCst) >= 0 {
                count.fetch_add(d, Ordering::SeqCst);
            }
        };
        add(&self.entry_count, delta.entries);
        for (c, d) in self.unkeyed.iter().zip(delta.unkeyed) {
            add(c, d);
        }
    }

    /// Starts the progress count of a backfill over `n` documents (of every shard).
    pub fn set_total(&self, n: u64) {
        self.total.store(n, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }

    pub(crate) fn add_done(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
}

/// Adds to `batch` the entry changes of every index for one document write; `new`
/// comes with its stored JSON. Every entry of the new document is written, as each
/// carries the document.
pub(crate) fn stage_changes(
    indexes: &[Arc<SecondaryIndex>],
    pk: &[u8],
    old: Option<&Datum>,
    new: Option<(&Datum, &[u8])>,
    batch: &mut storage::WriteBatch,
) -> Vec<Delta> {
    let mut deltas = Vec::with_capacity(indexes.len());
    for idx in indexes {
        let space = idx.space.get();
        let (old_keys, old_class) = old.map(|d| idx.entry_keys(pk, d)).unwrap_or_default();
        let (new_e, new_class) = new
            .map(|(d, json)| idx.entries(pk, d, json))
            .unwrap_or_default();
        let mut delta = Delta {
            entries: new_e.len() as i64 - old_keys.len() as i64,
            unkeyed: [0; 3],
        };
        if old_class != new_class {
            if let Some(c) = old_class {
                batch.delete(&space, unkeyed::marker(c, pk));
                delta.unkeyed[c as usize] -= 1;
            }
            if let Some(c) = new_class {
                batch.put(&space, unkeyed::marker(c, pk), Vec::new());
                delta.unkeyed[c as usize] += 1;
            }
        }
        deltas.push(delta);
        for (k, _) in old_keys {
            if !new_e.iter().any(|(n, _)| *n == k) {
                batch.delete(&space, k);
            }
        }
        for (k, v) in new_e {
            batch.put(&space, k, v);
        }
    }
    deltas
}

/// Counts the entries of a ready index once and from then on keeps the count up to date
/// (`SecondaryIndex::entry_count`): the count is taken while no write to any of `shards`
/// (every shard the index is registered with) can apply, and every later write adds its
/// change under its stripe lock, so the count stays exact. Blocks writes to the table
/// for one count of the index (at start-up and when a build finishes). The markers of
/// each `Unkeyed` class are counted the same way, once they are complete
/// (`crate::unkeyed`); until then their counts stay unknown.
pub fn track_entries(shards: &[Arc<crate::Shard>], idx: &SecondaryIndex) -> Result<(), StoreError> {
    let Some(first) = shards.first() else {
        return Ok(());
    };
    crate::quiesce_all(shards, || first.recount(idx))
}

impl crate::Shard {
    /// Counts `idx`'s entries (and its markers, once complete) in the index's space
    /// and stores the counts: the caller holds every stripe of every shard the index
    /// is registered with, so no write can change them meanwhile.
    pub(crate) fn recount(&self, idx: &SecondaryIndex) -> Result<(), StoreError> {
        let n = self.index_count(idx, &Bound::Unbounded, &Bound::Unbounded)?;
        idx.entry_count
            .store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
        let space = idx.space.get();
        let snap = self.engine.snapshot();
        if snap.get(&space, &unkeyed::COMPLETE)?.is_some() {
            for (count, class) in idx.unkeyed.iter().zip(Unkeyed::ALL) {
                let (lo, hi) = unkeyed::class_bounds(class);
                let n = snap.count_range(&space, lo, hi, &|_| true)?;
                count.store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// True when `idx`'s entry count is kept (`track_entries` ran).
    pub(crate) fn counts_tracked(idx: &SecondaryIndex) -> bool {
        idx.entry_count.load(Ordering::SeqCst) >= 0
    }
}

/// The value of an index entry. Current entries are `0x02 ‖ len(W) as u32 BE ‖ W ‖ D`:
/// `W` the whole encoded index value when the key holds a truncated one (else empty), `D`
/// the document's stored JSON. Older entries are empty or just `W` (which starts with a
/// type tag, never `0x02`) and carry no document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryValue<'a> {
    /// The whole index value, when the key holds a truncated one.
    pub whole: Option<&'a [u8]>,
    /// The document, when the entry carries it.
    pub doc: Option<&'a [u8]>,
}

const ENTRY_WITH_DOC: u8 = 0x02;

impl<'a> EntryValue<'a> {
    pub(crate) fn encode(whole: Option<&[u8]>, doc: &[u8]) -> Vec<u8> {
        let w = whole.unwrap_or_default();
        let mut out = Vec::with_capacity(5 + w.len() + doc.len());
        out.push(ENTRY_WITH_DOC);
        out.extend_from_slice(&(w.len() as u32).to_be_bytes());
        out.extend_from_slice(w);
        out.extend_from_slice(doc);
        out
    }

    pub(crate) fn parse(v: &'a [u8]) -> Result<EntryValue<'a>, StoreError> {
        match v.first() {
            None => Ok(EntryValue {
                whole: None,
                doc: None,
            }),
            Some(&ENTRY_WITH_DOC) => {
                let corrupt = || StoreError::Corrupt("malformed index entry value".into());
                let len = v.get(1..5).ok_or_else(corrupt)?;
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                let w = v.get(5..5 + len).ok_or_else(corrupt)?;
                let doc = v.get(5 + len..).ok_or_else(corrupt)?;
                Ok(EntryValue {
                    whole: (len > 0).then_some(w),
                    doc: Some(doc),
                })
            }
            Some(_) => Ok(EntryValue {
                whole: Some(v),
                doc: None,
            }),
        }
    }
}

/// One entry read from an index: its key, split lazily (most readers only want the
/// document), the whole value when the key holds a truncated one, and the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub(crate) key: Vec<u8>,
    /// Where the primary key starts and ends in `key`.
    pub(crate) pk: (usize, usize),
    pub(crate) tag: Option<u32>,
    pub(crate) whole: Option<Vec<u8>>,
    /// The document's stored JSON, when the entry carries it.
    pub doc: Option<Bytes>,
}

impl IndexEntry {
    /// The encoded index value (never truncated).
    pub fn value(&self) -> &[u8] {
        match &self.whole {
            Some(w) => w,
            None => &self.key[..self.pk.0],
        }
    }

    /// The encoded primary key.
    pub fn pk(&self) -> &[u8] {
        &self.key[self.pk.0..self.pk.1]
    }

    /// The multi-index tag.
    pub fn tag(&self) -> Option<u32> {
        self.tag
    }
}

/// A range of index values: encoded bounds, each inclusive or not.
#[derive(Debug, Clone)]
pub struct IndexRange {
    lower: Option<(Vec<u8>, bool)>,
    upper: Option<(Vec<u8>, bool)>,
}

impl IndexRange {
    /// Encodes Datum bounds (`MinVal`/`MaxVal` may appear, also inside arrays).
    pub fn new(lower: &Bound<Datum>, upper: &Bound<Datum>) -> Result<IndexRange, StoreError> {
        let enc = |b: &Bound<Datum>| -> Result<Option<(Vec<u8>, bool)>, StoreError> {
            Ok(match b {
                Bound::Unbounded => None,
                Bound::Included(d) => Some((encode(d)?, true)),
                Bound::Excluded(d) => Some((encode(d)?, false)),
            })
        };
        Ok(IndexRange {
            lower: enc(lower)?,
            upper: enc(upper)?,
        })
    }

    pub(crate) fn key_bounds(&self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let lo = match &self.lower {
            // Past the markers (`crate::unkeyed`), which sort before every entry.
            None => Bound::Included(vec![unkeyed::FIRST_ENTRY]),
            Some((s, inc)) => Bound::Included(keys::secondary_lower(s, *inc)),
        };
        let hi = match &self.upper {
            None => Bound::Unbounded,
            Some((s, inc)) => Bound::Excluded(keys::secondary_upper(s, *inc)),
        };
        (lo, hi)
    }

    fn contains(&self, value: &[u8]) -> bool {
        let lo_ok = match &self.lower {
            None => true,
            Some((s, true)) => value >= s.as_slice(),
            Some((s, false)) => value > s.as_slice(),
        };
        let hi_ok = match &self.upper {
            None => true,
            Some((s, true)) => value <= s.as_slice(),
            Some((s, false)) => value < s.as_slice(),
        };
        lo_ok && hi_ok
    }
}

fn encode(d: &Datum) -> Result<Vec<u8>, StoreError> {
    keys::encode_bound(d).map_err(|e| StoreError::Key(e.message().to_string()))
}

/// A raw entry: key and value bytes.
type RawEntry = (Vec<u8>, Bytes);

/// Index entries in a range, in index order, from one snapshot.
pub struct EntryIter {
    raw: KvIter,
    range: IndexRange,
    reverse: bool,
    pending: VecDeque<IndexEntry>,
    /// A raw entry read past a run of truncated entries.
    peeked: Option<RawEntry>,
    failed: bool,
}

impl EntryIter {
    pub(crate) fn new(
        snap: &dyn Snapshot,
        space: &str,
        range: IndexRange,
        reverse: bool,
    ) -> Result<EntryIter, StoreError> {
        let bounds = range.key_bounds();
        EntryIter::with_bounds(snap, space, range, bounds, reverse)
    }

    /// Like `new`, reading only the keys within `bounds` (narrower than the range's).
    pub(crate) fn with_bounds(
        snap: &dyn Snapshot,
        space: &str,
        range: IndexRange,
        (lo, hi): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
    ) -> Result<EntryIter, StoreError> {
        let raw = snap.range(space, lo, hi, reverse)?;
        Ok(EntryIter {
            raw,
            range,
            reverse,
            pending: VecDeque::new(),
            peeked: None,
            failed: false,
        })
    }

    fn next_raw(&mut self) -> Option<Result<RawEntry, StoreError>> {
        if let Some(kv) = self.peeked.take() {
            return Some(Ok(kv));
        }
        self.raw.next().map(|r| r.map_err(StoreError::from))
    }

    pub(crate) fn parse(key: Vec<u8>, value: Bytes) -> Result<IndexEntry, StoreError> {
        let (s, pk, tag) = keys::split_secondary_entry(&key)
            .ok_or_else(|| StoreError::Corrupt("malformed index entry".into()))?;
        let pk = (s.len(), s.len() + pk.len());
        let v = EntryValue::parse(&value)?;
        let whole = v.whole.map(<[u8]>::to_vec);
        // The document is the value's tail: a view of it, no copy.
        let doc = v.doc.map(|d| value.slice(value.len() - d.len()..));
        Ok(IndexEntry {
            key,
            pk,
            tag,
            whole,
            doc,
        })
    }
}

/// Whether a raw entry value holds a whole (truncated-key) index value; unreadable values
/// count as such, so that `parse` reports them.
fn holds_whole(value: &[u8]) -> bool {
    EntryValue::parse(value).map_or(true, |v| v.whole.is_some())
}

impl Iterator for EntryIter {
    type Item = Result<IndexEntry, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(Ok(e));
            }
            if self.failed {
                return None;
            }
            let (key, value) = match self.next_raw()? {
                Ok(kv) => kv,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            if !holds_whole(&value) {
                match Self::parse(key, value) {
                    Ok(e) if self.range.contains(e.value()) => return Some(Ok(e)),
                    Ok(_) => continue,
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
            // A run of truncated entries sharing one prefix: order them by whole value.
            let prefix: Vec<u8> = key.get(..SECONDARY_TRUNC_BYTES).unwrap_or(&key).to_vec();
            let mut run = vec![(key, value)];
            loop {
                match self.next_raw() {
                    None => break,
                    Some(Err(e)) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                    Some(Ok((k, v))) => {
                        if holds_whole(&v) && k.starts_with(&prefix) {
                            run.push((k, v));
                        } else {
                            self.peeked = Some((k, v));
                            break;
                        }
                    }
                }
            }
            let mut parsed = Vec::with_capacity(run.len());
            for (k, v) in run {
                match Self::parse(k, v) {
                    Ok(e) if self.range.contains(e.value()) => parsed.push(e),
                    Ok(_) => {}
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
            parsed.sort_by(|a, b| (a.value(), a.pk(), a.tag).cmp(&(b.value(), b.pk(), b.tag)));
            if self.reverse {
                parsed.reverse();
            }
            self.pending.extend(parsed);
        }
    }
}

/// Decodes a stored document lazily, keeping its bytes so that an unchanged document
/// is replied to by copying them (`datum::from_stored`: stored text is trusted).
pub(crate) fn decode_doc(bytes: Bytes) -> Result<Datum, StoreError> {
    datum::from_stored(bytes).map_err(|e| StoreError::Corrupt(e.0))
}

/// Index entries with their documents: the entry's copy, or (older entries) the document
/// fetched from the entries' snapshot.
pub(crate) fn docs_of(
    entries: EntryIter,
    snap: Arc<dyn Snapshot>,
    space: Arc<str>,
) -> impl Iterator<Item = Result<(IndexEntry, Datum), StoreError>> + Send + 'static {
    entries.filter_map(move |e| {
        let mut e = match e {
            Ok(e) => e,
            Err(err) => return Some(Err(err)),
        };
        if let Some(doc) = e.doc.take() {
            return Some(decode_doc(doc).map(|d| (e, d)));
        }
        match snap.get(&space, e.pk()) {
            Ok(Some(v)) => Some(decode_doc(v.into()).map(|d| (e, d))),
            // An entry always has its document in the same snapshot; skip if not.
            Ok(None) => None,
            Err(err) => Some(Err(err.into())),
        }
    })
}

/// How many documents the backfill indexes per batch (and stripe-lock round).
const BACKFILL_CHUNK: usize = 256;

impl crate::Shard {
    /// Registers an index: from now on every write maintains it. Waits for writes in
    /// flight (they did not see it), so a snapshot taken afterwards sees all of those.
    pub fn add_index(&self, idx: Arc<SecondaryIndex>) -> Result<(), StoreError> {
        let space = idx.space.get();
        self.engine.create_space(&space)?;
        let mut list = self.indexes.write();
        list.retain(|i| i.space.get() != space);
        list.push(idx);
        Ok(())
    }

    /// Stops maintaining an index, stops its backfill and drops its entries.
    pub fn remove_index(&self, idx: &SecondaryIndex) -> Result<(), StoreError> {
        idx.cancel();
        let space = idx.space.get();
        self.indexes.write().retain(|i| i.space.get() != space);
        self.engine.drop_space(&space)?;
        Ok(())
    }

    /// The entries of `idx` whose values lie in `[lower, upper]`, in index order (or
    /// reversed), from one snapshot, lazily.
    pub fn index_entries(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        reverse: bool,
    ) -> Result<EntryIter, StoreError> {
        let range = IndexRange::new(lower, upper)?;
        let space = idx.space.get();
        let snap = self.engine.snapshot();
        EntryIter::new(snap.as_ref(), &space, range, reverse)
    }

    /// The documents of those entries (a document appears once per matching entry, as
    /// in RethinkDB), read from the same snapshot as the entries.
    pub fn index_docs(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        reverse: bool,
    ) -> Result<impl Iterator<Item = Result<Datum, StoreError>> + Send + 'static, StoreError> {
        Ok(self
            .index_pairs(idx, lower, upper, reverse)?
            .map(|r| r.map(|(_, d)| d)))
    }

    /// Like `index_docs`, with each document's entry.
    pub fn index_pairs(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        reverse: bool,
    ) -> Result<
        impl Iterator<Item = Result<(IndexEntry, Datum), StoreError>> + Send + 'static,
        StoreError,
    > {
        let range = IndexRange::new(lower, upper)?;
        let (space, docs) = (idx.space.get(), self.space.get());
        let snap: Arc<dyn Snapshot> = Arc::from(self.engine.snapshot());
        let entries = EntryIter::new(snap.as_ref(), &space, range, reverse)?;
        Ok(docs_of(entries, snap, docs))
    }

    /// The number of entries in a range, without reading a document. Entries holding a
    /// whole value are the only ones the key range may admit wrongly (module note), so
    /// only those are decoded.
    pub fn index_count(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
    ) -> Result<u64, StoreError> {
        let range = IndexRange::new(lower, upper)?;
        let (lo, hi) = range.key_bounds();
        let space = idx.space.get();
        let snap = self.engine.snapshot();
        let keep = |v: &[u8]| match EntryValue::parse(v) {
            Ok(EntryValue { whole: None, .. }) => true,
            Ok(EntryValue { whole: Some(w), .. }) => range.contains(w),
            // Counted; a read of the range reports the damage.
            Err(_) => true,
        };
        Ok(snap.count_range(&space, lo, hi, &keep)?)
    }

    /// `index_count`, stopping at `limit` (an answer of `limit` means "at least").
    pub fn index_count_upto(
        &self,
        idx: &SecondaryIndex,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        limit: u64,
    ) -> Result<u64, StoreError> {
        if limit == u64::MAX {
            return self.index_count(idx, lower, upper);
        }
        let range = IndexRange::new(lower, upper)?;
        let (lo, hi) = range.key_bounds();
        let space = idx.space.get();
        let snap = self.engine.snapshot();
        let mut n = 0u64;
        for kv in snap.range(&space, lo, hi, false)? {
            if n >= limit {
                break;
            }
            let (_, v) = kv?;
            let keep = match EntryValue::parse(&v) {
                Ok(EntryValue { whole: Some(w), .. }) => range.contains(w),
                // Counted; a read of the range reports the damage.
                _ => true,
            };
            n += u64::from(keep);
        }
        Ok(n)
    }

    /// The number of documents whose primary keys lie between two bounds, without
    /// decoding them.
    pub fn count_range(
        &self,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
    ) -> Result<u64, StoreError> {
        let enc = |b: &Bound<Datum>| -> Result<Bound<Vec<u8>>, StoreError> {
            Ok(match b {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(d) => Bound::Included(encode(d)?),
                Bound::Excluded(d) => Bound::Excluded(encode(d)?),
            })
        };
        let space = self.space.get();
        let snap = self.engine.snapshot();
        match self.range.clamp(enc(lower)?, enc(upper)?) {
            Some((lo, hi)) => Ok(snap.count_range(&space, lo, hi, &|_| true)?),
            None => Ok(0),
        }
    }

    /// Backfills `idx` (registered with `add_index` first) from a snapshot of the
    /// documents, in chunks: each chunk locks its documents' stripes, re-reads the
    /// current documents and writes their entries in one batch. Returns early (Ok) when
    /// the index is cancelled. The caller marks the index ready afterwards.
    pub fn build_index(&self, idx: &SecondaryIndex) -> Result<(), StoreError> {
        let (docs, space) = (self.space.get(), idx.space.get());
        let snap = self.engine.snapshot();
        let Some((lo, hi)) = self.range.clamp(Bound::Unbounded, Bound::Unbounded) else {
            return Ok(());
        };
        let mut it = snap.range(&docs, lo, hi, false)?;
        loop {
            if idx.is_cancelled() {
                return Ok(());
            }
            let mut pks = Vec::with_capacity(BACKFILL_CHUNK);
            for kv in it.by_ref().take(BACKFILL_CHUNK) {
                pks.push(kv?.0);
            }
            if pks.is_empty() {
                return Ok(());
            }
            let mut stripes: Vec<usize> = pks.iter().map(|k| Self::stripe_index(k)).collect();
            stripes.sort_unstable();
            stripes.dedup();
            // Ascending order, as the other multi-lock holders (chunks of writes,
            // `Shard::apply_many`; feed registration) take them: no deadlock; single
            // writes hold one stripe at a time.
            let guards: Vec<_> = stripes
                .iter()
                .filter_map(|&i| self.locks.get(i).map(|m| m.lock()))
                .collect();
            let mut batch = storage::WriteBatch::new();
            for pk in &pks {
                if let Some(v) = self.engine.get(&docs, pk)? {
                    let v = Bytes::from(v);
                    let doc = decode_doc(v.clone())?;
                    let (entries, class) = idx.entries(pk, &doc, &v);
                    for (k, v) in entries {
                        batch.put(&space, k, v);
                    }
                    if let Some(c) = class {
                        batch.put(&space, unkeyed::marker(c, pk), Vec::new());
                    }
                }
            }
            if !batch.is_empty() {
                if let Err(e) = self.engine.apply(batch) {
                    return if idx.is_cancelled() {
                        Ok(())
                    } else {
                        Err(e.into())
                    };
                }
            }
            drop(guards);
            idx.add_done(pks.len() as u64);
        }
    }

    /// True when every document has its marker in `idx` (`crate::unkeyed`).
    pub fn unkeyed_complete(&self, idx: &SecondaryIndex) -> Result<bool, StoreError> {
        Ok(self
            .engine
            .get(&idx.space.get(), &unkeyed::COMPLETE)?
            .is_some())
    }

    /// Records that every document has its marker in `idx`: call only after a backfill
    /// (`build_index`) over every shard finished, the index registered throughout.
    pub fn set_unkeyed_complete(&self, idx: &SecondaryIndex) -> Result<(), StoreError> {
        let mut b = storage::WriteBatch::new();
        b.put(&idx.space.get(), unkeyed::COMPLETE.to_vec(), Vec::new());
        Ok(self.engine.apply(b)?)
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
