//! A chunk of write operations on one shard applied as one engine batch
//! (`Shard::apply_many`): a bulk insert's documents otherwise pay one engine commit
//! each (journal append, memtable insert, batch bookkeeping), which was most of the
//! engine's share of a load.
//!
//! Each operation is decided exactly as `Shard::apply_encoded` decides it (`plan`, on
//! the document read under its stripe lock: cache, then engine), so a conflict or a
//! failed read answers that operation alone and the others go on. Those that write are
//! staged into one `WriteBatch`, committed once, with one group-commit ticket for all
//! of them (under hard durability the caller waits for one fsync), and their in-memory
//! effects (`Shard::after_commit`: index statistics, feeds, count, sample; the cache
//! around the commit) follow in the operations' order.
//!
//! The cache keeps a written key only if it held it before the write: a bulk load's new
//! documents are not cached (filling the cache cost 2.3k instructions a document and
//! pushed a read working set out for documents nobody had read); the write still drops
//! whatever the cache held for the key (`begin_write`/`end_write`), so a later read
//! finds the new document in the engine and caches it then.
//!
//! Invariants: the keys of one call are distinct (a repeated key would read a state its
//! earlier operation has not committed yet), so a call with a repeated key is applied
//! one operation at a time instead; every stripe the chunk touches is locked, in
//! ascending order, before the first read and held until the last side effect (index
//! backfills and feed registration also lock in ascending order, single writes hold one
//! stripe, so nothing can deadlock), which keeps each key's reads, commit and feed
//! events in commit order as single writes keep them; a failed commit leaves every key
//! of the chunk uncached and answers each of its writing operations with the error.

use std::collections::HashSet;

use datum::{Datum, Version};
use storage::WriteBatch;

use crate::cache::Lookup;
use crate::shard::{Applied, Shard, StoreChange};
use crate::write::{plan, Commit, Local, Plan, Staged};
use crate::StoreError;

/// One operation of a chunk: key, expected version, change (as `Shard::apply` takes them).
pub type ChunkOp = (Datum, Option<Version>, StoreChange);

/// An operation that staged writes, waiting for the chunk's commit.
struct Pending {
    /// Its position among the chunk's operations.
    at: usize,
    key: Vec<u8>,
    stripe: usize,
    old: Option<Datum>,
    /// Whether `old` came from the cache: only then is the new document cached.
    was_cached: bool,
    staged: Staged,
}

impl Shard {
    /// Applies `ops` (module note): each answer is what `Shard::apply` would answer for
    /// that operation, in the operations' order.
    pub fn apply_many(&self, ops: Vec<ChunkOp>) -> Vec<Result<Applied, StoreError>> {
        datum::work::unwatched(|| self.apply_many_now(ops))
    }

    fn apply_many_now(&self, ops: Vec<ChunkOp>) -> Vec<Result<Applied, StoreError>> {
        let mut out: Vec<Option<Result<Applied, StoreError>>> = Vec::with_capacity(ops.len());
        let mut keyed = Vec::with_capacity(ops.len());
        for (at, (key, expect, change)) in ops.into_iter().enumerate() {
            match datum::keys::encode_primary(&key) {
                Ok(k) => keyed.push((at, k, expect, change)),
                Err(e) => {
                    out.push(Some(Err(StoreError::Key(e.message().to_string()))));
                    continue;
                }
            }
            out.push(None);
        }
        let distinct = {
            let mut seen = HashSet::with_capacity(keyed.len());
            keyed.iter().all(|(_, k, _, _)| seen.insert(k.as_slice()))
        };
        let mut local = Local {
            shard: self,
            batch: WriteBatch::new(),
        };
        if !distinct {
            for (at, k, expect, change) in keyed {
                out[at] = Some(self.apply_encoded(&k, expect, change, &mut local));
            }
        } else {
            self.apply_distinct(keyed, &mut out, &mut local);
        }
        out.into_iter()
            .map(|a| {
                a.unwrap_or_else(|| Err(StoreError::Corrupt("a write was not answered".into())))
            })
            .collect()
    }

    /// The chunk proper: `keyed` holds distinct encoded keys; answers go to `out`; the
    /// writes are staged and committed through `commit` (one engine batch locally, the
    /// Raft entry's batch on a replica: `crate::replica_chunk`).
    pub(crate) fn apply_distinct(
        &self,
        keyed: Vec<(usize, Vec<u8>, Option<Version>, StoreChange)>,
        out: &mut [Option<Result<Applied, StoreError>>],
        commit: &mut impl Commit,
    ) {
        let mut stripes: Vec<usize> = keyed
            .iter()
            .map(|(_, k, _, _)| Self::stripe_index(k))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _guards: Vec<_> = stripes
            .iter()
            .filter_map(|&i| self.locks.get(i).map(|m| m.lock()))
            .collect();
        let docs = self.space.get();
        // Held until applied: registering an index waits for these writes (index.rs).
        let indexes = self.indexes.read();
        let mut pending = Vec::with_capacity(keyed.len());
        for (at, key, expect, change) in keyed {
            let stripe = Self::stripe_index(&key);
            // Under the stripe lock the cache cannot hold an outdated version (cache.rs).
            let (old, was_cached) = match self.cache.get(stripe, &key) {
                Lookup::Hit(d) => (Ok(Some(d)), true),
                Lookup::Miss(_) => (self.read_stored(&docs, &key), false),
            };
            let old = match old {
                Ok(old) => old,
                Err(e) => {
                    out[at] = Some(Err(e));
                    continue;
                }
            };
            let decided = plan(
                &indexes,
                &docs,
                &key,
                old.as_ref(),
                expect,
                change,
                commit.batch(),
            );
            match decided {
                Plan::Conflict => out[at] = Some(Ok(Applied::Conflict(old))),
                Plan::Nothing => out[at] = Some(Ok(Applied::Done((old.clone(), old, None)))),
                Plan::Write(staged) => match commit.admit() {
                    Ok(()) => pending.push(Pending {
                        at,
                        key,
                        stripe,
                        old,
                        was_cached,
                        staged,
                    }),
                    Err(why) => out[at] = Some(Err(StoreError::Refused(why))),
                },
            }
        }
        if pending.is_empty() {
            return;
        }
        for p in &pending {
            self.cache.begin_write(p.stripe, &p.key);
        }
        let committed = commit.commit();
        for p in &pending {
            // On failure the engine's state is unknown: cache nothing for the key. A key
            // the cache did not hold stays out of it (module note).
            let cached = p
                .staged
                .cached
                .as_ref()
                .filter(|_| committed.is_ok() && p.was_cached);
            self.cache.end_write(p.stripe, &p.key, cached);
        }
        let ticket = match committed {
            Ok(ticket) => ticket,
            Err(e) => {
                // Every operation of the batch failed with the same error; the first
                // keeps it as it is, the others its text (the engine's errors are not
                // `Clone`).
                let text = match &e {
                    StoreError::Storage(inner) => inner.to_string(),
                    other => other.to_string(),
                };
                let mut first = Some(e);
                for p in pending {
                    let e = first
                        .take()
                        .unwrap_or_else(|| StoreError::StorageText(text.clone()));
                    out[p.at] = Some(Err(e));
                }
                return;
            }
        };
        for p in pending {
            let Staged { new, deltas, .. } = p.staged;
            self.after_commit(&p.key, &indexes, deltas, p.old.as_ref(), new.as_ref());
            out[p.at] = Some(Ok(Applied::Done((p.old, new, ticket))));
        }
    }

    /// The stored document under the encoded key `k` in the documents' space `docs`.
    fn read_stored(&self, docs: &str, k: &[u8]) -> Result<Option<Datum>, StoreError> {
        match self.engine.get(docs, k)? {
            Some(v) => Ok(Some(crate::index::decode_doc(v.into())?)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
#[path = "write_many_tests.rs"]
mod tests;
