//! One write operation on a shard, in two halves shared by the local path
//! (`Shard::apply`) and the replicated one (`crate::replica`):
//!
//! - `plan`, the pure part: from the document the key holds, the expected version and
//!   the change, decide (conflict, nothing to do, or a write), stage the document and
//!   its index entries in a `WriteBatch`, and compute the index statistics' deltas. It
//!   reads nothing and runs only the indexes' functions, which are deterministic (ReQL
//!   refuses a non-deterministic index function when the index is created), so every
//!   replica stages the same writes for the same entry.
//! - `Shard::apply_encoded`, the shell: the stripe lock, the read of the old document
//!   (cache, then engine), `plan`, the commit (`Commit`: one engine batch locally; the
//!   Raft entry's batch, with its log position, when replicated), and the in-memory side
//!   effects once committed (`Shard::after_commit`: index notes, feeds, count, sample;
//!   the cache around the commit).
//!
//! Invariant: the side effects follow a committed write only, under the key's stripe
//! lock, in commit order; a failed commit leaves the key uncached.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use datum::{Datum, Version};
use storage::WriteBatch;

use crate::cache::Lookup;
use crate::index::{stage_changes, Delta, SecondaryIndex};
use crate::shard::{Applied, Shard, StoreChange};
use crate::StoreError;

/// What `plan` decided.
#[derive(Debug)]
pub(crate) enum Plan {
    /// The key does not hold the expected version: nothing staged.
    Conflict,
    /// Nothing to write (`Keep`, or a delete of an absent key): nothing staged.
    Nothing,
    /// The writes are staged.
    Write(Staged),
}

/// A staged write: the new document, what the cache may keep of it, and each index's
/// change in statistics (in the order of the index list).
#[derive(Debug)]
pub(crate) struct Staged {
    pub(crate) new: Option<Datum>,
    pub(crate) cached: Option<Datum>,
    pub(crate) deltas: Vec<Delta>,
}

/// The pure part of a write (module note): `old` is what key `k` holds now, `docs` the
/// documents' space.
pub(crate) fn plan(
    indexes: &[Arc<SecondaryIndex>],
    docs: &str,
    k: &[u8],
    old: Option<&Datum>,
    expect: Option<Version>,
    change: StoreChange,
    batch: &mut WriteBatch,
) -> Plan {
    if expect.is_some_and(|v| v != Version::of(old)) {
        return Plan::Conflict;
    }
    match change {
        StoreChange::Keep => Plan::Nothing,
        StoreChange::Put(mut d) => {
            let json = d.to_json_bytes_kept();
            let deltas = stage_changes(indexes, k, old, Some((&d, json.as_slice())), batch);
            // What the cache keeps of the new document: only one that carries its stored
            // text, so that reads answer it by copying that text rather than printing the
            // map again. A document shared with the writer (an insert keeps it for its
            // result) cannot take the text: the key is left uncached, and the first read
            // caches what it reads from the engine, text included (copying the text here
            // would cost every write of a bulk load an allocation and a copy).
            let cached = d
                .as_object()
                .and_then(datum::Object::raw_json)
                .map(|_| d.clone());
            batch.put(docs, k.to_vec(), json);
            Plan::Write(Staged {
                new: Some(d),
                cached,
                deltas,
            })
        }
        StoreChange::Delete if old.is_none() => Plan::Nothing,
        StoreChange::Delete => {
            let deltas = stage_changes(indexes, k, old, None, batch);
            batch.delete(docs, k.to_vec());
            Plan::Write(Staged {
                new: None,
                cached: None,
                deltas,
            })
        }
    }
}

/// Where a shard's staged writes go and how they are committed.
pub(crate) trait Commit {
    /// The batch `plan` stages into.
    fn batch(&mut self) -> &mut WriteBatch;
    /// Commits the staged writes atomically; returns the group-commit ticket, if the
    /// write takes one.
    fn commit(&mut self) -> Result<Option<u64>, StoreError>;
    /// One operation of a chunk (`Shard::apply_many`, `write_many.rs`) has just staged
    /// its writes in `batch()`: keeps them for the chunk's commit, or refuses that
    /// operation alone (`Err`, its writes dropped). The local path keeps everything: the
    /// engine's own check fails the chunk's commit instead.
    fn admit(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// The local path: one engine batch, then a group-commit ticket.
pub(crate) struct Local<'a> {
    pub(crate) shard: &'a Shard,
    pub(crate) batch: WriteBatch,
}

impl Commit for Local<'_> {
    fn batch(&mut self) -> &mut WriteBatch {
        &mut self.batch
    }

    fn commit(&mut self) -> Result<Option<u64>, StoreError> {
        self.shard.engine.apply(std::mem::take(&mut self.batch))?;
        Ok(Some(self.shard.commit.ticket()))
    }
}

impl Shard {
    /// The shell of a write (module note) on the encoded key `k`.
    pub(crate) fn apply_encoded(
        &self,
        k: &[u8],
        expect: Option<Version>,
        change: StoreChange,
        commit: &mut impl Commit,
    ) -> Result<Applied, StoreError> {
        let stripe = Self::stripe_index(k);
        let _guard = self.stripe(k).lock();
        let docs = self.space.get();
        // Under the stripe lock the cache cannot hold an outdated version (cache.rs).
        let old = match self.cache.get(stripe, k) {
            Lookup::Hit(d) => Some(d),
            Lookup::Miss(_) => match self.engine.get(&docs, k)? {
                Some(v) => Some(crate::index::decode_doc(v.into())?),
                None => None,
            },
        };
        // Held until applied: registering an index waits for this write (index.rs).
        let indexes = self.indexes.read();
        let staged = match plan(
            &indexes,
            &docs,
            k,
            old.as_ref(),
            expect,
            change,
            commit.batch(),
        ) {
            Plan::Conflict => return Ok(Applied::Conflict(old)),
            Plan::Nothing => return Ok(Applied::Done((old.clone(), old, None))),
            Plan::Write(s) => s,
        };
        self.cache.begin_write(stripe, k);
        let committed = commit.commit();
        // On failure the engine's state is unknown: cache nothing for the key.
        let cached = staged.cached.as_ref().filter(|_| committed.is_ok());
        self.cache.end_write(stripe, k, cached);
        let ticket = committed?;
        self.after_commit(
            k,
            &indexes,
            staged.deltas,
            old.as_ref(),
            staged.new.as_ref(),
        );
        Ok(Applied::Done((old, staged.new, ticket)))
    }

    /// The in-memory side effects of a committed write, under its stripe lock (and the
    /// index list's read lock, `indexes`).
    pub(crate) fn after_commit(
        &self,
        k: &[u8],
        indexes: &[Arc<SecondaryIndex>],
        deltas: Vec<Delta>,
        old: Option<&Datum>,
        new: Option<&Datum>,
    ) {
        // Under the stripe lock, like the document count (`index::track_entries`).
        for (idx, d) in indexes.iter().zip(deltas) {
            idx.note(d);
        }
        // Still under the stripe lock: one document's changes reach feeds in commit order.
        self.feeds.publish(k, old, new);
        match (old, new) {
            (None, Some(_)) => {
                self.count.fetch_add(1, Ordering::SeqCst);
                self.sample.insert(k);
            }
            (Some(_), None) => {
                self.count.fetch_sub(1, Ordering::SeqCst);
                self.sample.remove(k);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "write_tests.rs"]
pub(crate) mod tests;
