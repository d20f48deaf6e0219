//! Secondary indexes of this server's replica of one shard ([`ShardIndexes`]), and the
//! index reads a replicated shard answers ([`IndexQuery`]): entries in bounded batches,
//! counts, build states and the optimizer's statistics ([`IndexCounts`]).
//!
//! The definitions come from the replicated catalog (`crate::index::TableIndexes`
//! follows them on every server); this keeps the store-side indexes of one replica in
//! step with them by index id, each in a space of its own under the group's prefix
//! (`<prefix>.idx.<id>`, dropped with the group), registered before the group applies
//! anything at start-up and built in the background (`store::replica_index` says why
//! replicas build their own copies rather than replaying the build from the log).
//!
//! Invariants: an index read is answered only by a replica whose copy is complete
//! (else [`IndexMissing::Building`]), from one snapshot per batch; a batch resumes
//! strictly after the previous batch's last entry, so a read in batches sees every
//! entry once even when batches come from different snapshots (like a scan).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use parking_lot::Mutex;
use reql::IndexSpec;
use serde::{Deserialize, Serialize};
use store::{IndexEntry, SecondaryIndex, Shard};

use super::read::KeyBound;

/// This server's replica of one shard and its secondary indexes by id.
pub struct ShardIndexes {
    shard: Arc<Shard>,
    prefix: String,
    by_id: Mutex<BTreeMap<String, Arc<SecondaryIndex>>>,
}

/// Why a replica cannot answer an index read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexMissing {
    /// The replica does not have the index (its catalog has not got it, or dropped it).
    NotFound,
    /// The replica's copy is still being built.
    Building,
}

/// An index read of one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum IndexQuery {
    /// At most `limit` entries with their documents between two index values, in index
    /// order, strictly after the entry `after` (its stored key and whole value).
    Entries {
        id: String,
        lower: KeyBound,
        upper: KeyBound,
        reverse: bool,
        limit: u32,
        after: Option<(Vec<u8>, Option<Vec<u8>>)>,
    },
    /// How many entries lie between two index values (stopping at `limit`).
    Count {
        id: String,
        lower: KeyBound,
        upper: KeyBound,
        limit: u64,
    },
    /// Whether each index is complete on the answering replica, and its progress.
    Status { ids: Vec<String> },
    /// Each index's statistics on the answering replica (a shard's leader: the
    /// optimizer's, `crate::groups_index`).
    Stats { ids: Vec<String> },
}

/// One replica's statistics of a ready index (`store::SecondaryIndex::entry_count` and
/// `unkeyed_counts`, kept by every entry it applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexCounts {
    /// Its entries.
    pub(crate) entries: u64,
    /// Documents without entries by class (null, array, object; never an under-count).
    pub(crate) unkeyed: [u64; 3],
}

/// One entry sent between servers: stored key, whole value, document as JSON text.
pub(crate) type WireEntry = (Vec<u8>, Option<Vec<u8>>, String);

/// The answer to an [`IndexQuery`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum IndexAnswer {
    Entries(Vec<WireEntry>),
    Count(u64),
    /// Per index asked: `None` when the replica does not have it, else ready and
    /// progress.
    Status(Vec<Option<(bool, f64)>>),
    Missing(IndexMissing),
    /// Per index asked: `None` when the replica does not have it ready and counted.
    Stats(Vec<Option<IndexCounts>>),
}

impl ShardIndexes {
    /// No indexes yet on `shard`, the replica of the group stored under `prefix`.
    pub fn new(shard: Arc<Shard>, prefix: &str) -> Arc<ShardIndexes> {
        Arc::new(ShardIndexes {
            shard,
            prefix: prefix.to_owned(),
            by_id: Mutex::new(BTreeMap::new()),
        })
    }

    /// The replica.
    pub fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// The index with `id`, if this replica has it.
    pub fn get(&self, id: &str) -> Option<Arc<SecondaryIndex>> {
        self.by_id.lock().get(id).cloned()
    }

    /// Registers every index of `defs` (id, definition) this replica lacks, starting
    /// the build of each one not complete, and drops the ones no longer defined.
    pub(crate) fn follow(&self, defs: &[(String, IndexSpec)]) -> Result<(), String> {
        let mut by_id = self.by_id.lock();
        let gone: Vec<String> = by_id
            .keys()
            .filter(|id| !defs.iter().any(|(d, _)| d == *id))
            .cloned()
            .collect();
        for id in gone {
            if let Some(idx) = by_id.remove(&id) {
                self.shard.remove_index(&idx).map_err(|e| e.to_string())?;
            }
        }
        for (id, spec) in defs {
            if by_id.contains_key(id) {
                continue;
            }
            let func = crate::index::index_fn(spec).map_err(|e| e.message)?;
            let space = format!("{}.idx.{id}", self.prefix);
            let idx = self
                .shard
                .open_replica_index(&space, func, spec.multi)
                .map_err(|e| e.to_string())?;
            if !idx.is_ready() {
                self.spawn_build(idx.clone());
            }
            by_id.insert(id.clone(), idx);
        }
        Ok(())
    }

    fn spawn_build(&self, idx: Arc<SecondaryIndex>) {
        let shard = self.shard.clone();
        let _ = std::thread::Builder::new()
            .name("replica-index-build".into())
            .spawn(move || {
                if let Err(e) = shard.build_replica_index(&idx) {
                    tracing::warn!("building a secondary index of a replicated shard: {e}");
                }
            });
    }

    /// Answers an index read from this replica.
    pub(crate) fn answer(&self, query: IndexQuery) -> Result<IndexAnswer, String> {
        let ready = |id: &str| -> Result<Arc<SecondaryIndex>, IndexMissing> {
            let idx = self.get(id).ok_or(IndexMissing::NotFound)?;
            if idx.is_ready() {
                Ok(idx)
            } else {
                Err(IndexMissing::Building)
            }
        };
        let err = |e: store::StoreError| e.to_string();
        match query {
            IndexQuery::Entries {
                id,
                lower,
                upper,
                reverse,
                limit,
                after,
            } => {
                let idx = match ready(&id) {
                    Ok(idx) => idx,
                    Err(m) => return Ok(IndexAnswer::Missing(m)),
                };
                let after = match after {
                    Some((key, whole)) => Some(IndexEntry::from_raw(key, whole).map_err(err)?),
                    None => None,
                };
                let (lower, upper) = (lower.datum()?, upper.datum()?);
                let batch = self
                    .shard
                    .index_batch(
                        &idx,
                        &lower,
                        &upper,
                        reverse,
                        after.as_ref(),
                        limit as usize,
                    )
                    .map_err(err)?;
                Ok(IndexAnswer::Entries(
                    batch
                        .into_iter()
                        .map(|(e, d)| {
                            let whole = e.whole().map(<[u8]>::to_vec);
                            (e.raw_key().to_vec(), whole, d.to_json_string())
                        })
                        .collect(),
                ))
            }
            IndexQuery::Count {
                id,
                lower,
                upper,
                limit,
            } => {
                let idx = match ready(&id) {
                    Ok(idx) => idx,
                    Err(m) => return Ok(IndexAnswer::Missing(m)),
                };
                let (lower, upper) = (lower.datum()?, upper.datum()?);
                self.shard
                    .index_count_upto(&idx, &lower, &upper, limit)
                    .map(IndexAnswer::Count)
                    .map_err(err)
            }
            IndexQuery::Status { ids } => Ok(IndexAnswer::Status(
                ids.iter()
                    .map(|id| self.get(id).map(|i| (i.is_ready(), i.progress())))
                    .collect(),
            )),
            IndexQuery::Stats { ids } => Ok(IndexAnswer::Stats(
                ids.iter().map(|id| self.counts(id)).collect(),
            )),
        }
    }

    /// The statistics of index `id` when this replica has it ready and counted (a
    /// replica index is counted before it is marked ready, `store::replica_index`).
    fn counts(&self, id: &str) -> Option<IndexCounts> {
        let idx = self.get(id).filter(|i| i.is_ready())?;
        Some(IndexCounts {
            entries: idx.entry_count()?,
            unkeyed: idx.unkeyed_counts()?,
        })
    }
}

/// An entry received from a replica, with its document.
pub(crate) fn entry_of(wire: WireEntry) -> Result<(IndexEntry, Datum), String> {
    let (key, whole, doc) = wire;
    let entry = IndexEntry::from_raw(key, whole).map_err(|e| e.to_string())?;
    let doc = datum::from_json_owned(doc.into_bytes()).map_err(|e| e.0)?;
    Ok((entry, doc))
}

/// The resume point after `e` (for [`IndexQuery::Entries`]).
pub(crate) fn after_of(e: &IndexEntry) -> (Vec<u8>, Option<Vec<u8>>) {
    (e.raw_key().to_vec(), e.whole().map(<[u8]>::to_vec))
}

/// Bounds as sent in a query.
pub(crate) fn bounds(lower: &Bound<Datum>, upper: &Bound<Datum>) -> (KeyBound, KeyBound) {
    (KeyBound::of(lower), KeyBound::of(upper))
}
