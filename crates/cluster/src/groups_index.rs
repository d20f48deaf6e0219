//! Secondary indexes of a replicated table ([`ReplicatedTable`]'s index reads and build
//! states), over its shards' groups.
//!
//! Each replica of a shard keeps its own copy of every index the catalog defines
//! (`crate::replica::ShardIndexes`, followed as the catalog's entries apply). Reads go
//! where documents reads go (`read_mode`: `single` and `majority` to each shard's
//! leader, `outdated` to this server's replica, or the leader for a shard held
//! elsewhere), in batches, and the shards' ordered entries are merged by index order
//! (value, primary key, tag), so `order_by(index=)` over several shards is one order.
//!
//! `index_status` is ready when each shard's leader and this server's own replicas have
//! completed the index (a leader is asked until it said so once: the status is read by
//! every index read and optimized filter, and must not cost round trips each time): `index_wait` through a server then guarantees that every
//! `read_mode` of that server can use it (a follower elsewhere may still be building;
//! its `outdated` reads say so with RethinkDB's "accessed before its construction was
//! finished" until it is done).
//!
//! The optimizer's statistics (`index_statistics`: entry and unkeyed counts) are asked
//! of every shard's leader at once, one round per plan, and summed; none when any shard
//! did not give them (fail closed: the optimizer then plans without them). `unkeyed`
//! decides correctness (`reql::optimize::bands`: an index range read misses documents
//! whose value the index cannot hold), so the counts must describe a state of the
//! replica the reads go to no newer than the one the reads see: then a document the
//! read misses had no unindexable value when the counts were taken, and got it from a
//! write after planning began, concurrent with the query, which one server misses in
//! the same way (it reads its counts at planning and its index later). A leader applies
//! in log order, so its later reads see a state at least as new; `majority` asks with a
//! linearizable read, so any leader's later read does. Not closed: a `single` plan
//! whose shard changes leader before the read may read a new leader that has not
//! applied as far yet (as `single` reads may go back in time across a failover), and
//! could then miss a document that became indexable in between; carrying the counted
//! log position and checking each read's against it would close it. An
//! `outdated` read goes to this server's replica, which may be behind the leader whose
//! counts would be taken: no statistics then. Nothing is cached.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use reql::error::op_failed;
use reql::{IndexSpec, IndexStatus, ReqlError};
use store::IndexEntry;

use super::{read_mode, ReplicatedTable};
use crate::catalog::TableEntry;
use crate::replica::{
    after_of, bounds, entry_of, wait_for, IndexAnswer, IndexCounts, IndexMissing, IndexQuery, Op,
    RouteError,
};

/// How many entries an index read fetches per shard round trip.
const INDEX_BATCH: u32 = 256;

/// The index a read names, for RethinkDB's errors.
#[derive(Clone)]
pub(crate) struct IndexName {
    /// Its id (what replicas know it by).
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// The table's `db.table`.
    pub(crate) table: String,
}

impl IndexName {
    fn missing(&self, why: IndexMissing) -> ReqlError {
        match why {
            IndexMissing::NotFound => crate::index::not_found(&self.name, &self.table),
            IndexMissing::Building => op_failed(format!(
                "Index `{}` on table `{}` was accessed before its construction was finished.",
                self.name, self.table
            )),
        }
    }
}

fn wrong_kind() -> ReqlError {
    RouteError::ReadFailed("answer of the wrong kind".into()).to_reql()
}

/// The index definitions of a table's entry: id and definition.
pub(super) fn defs_of(e: &TableEntry) -> Vec<(String, IndexSpec)> {
    (e.indexes.values())
        .map(|d| (d.id.clone(), IndexSpec::from(&d.spec)))
        .collect()
}

impl ReplicatedTable {
    /// Brings this server's replicas' indexes in step with `e`'s definitions (a
    /// catalog entry applied here).
    pub(crate) fn follow_indexes(&self, e: &TableEntry) -> Result<(), String> {
        let defs = defs_of(e);
        for ix in self.indexes.iter().flatten() {
            ix.follow(&defs)?;
        }
        Ok(())
    }

    /// Unregisters this server's replicas' indexes (the table is dropped).
    pub(crate) fn drop_indexes(&self) {
        for ix in self.indexes.iter().flatten() {
            let _ = ix.follow(&[]);
        }
    }

    /// Runs `query` on shard `shard` as `mode` says.
    fn index_query(
        &self,
        shard: usize,
        mode: reql::ReadMode,
        query: IndexQuery,
    ) -> reql::Result<IndexAnswer> {
        let slot = self.slot(shard)?;
        let (wait, mode) = (self.wait, read_mode(mode));
        let answer = wait_for(&self.runtime, async move {
            let rs = ReplicatedTable::route(&slot, wait, Op::Read).await?;
            rs.index(mode, query).await
        });
        answer
            .unwrap_or(Err(RouteError::LostContact(Op::Read)))
            .map_err(|e| e.to_reql())
    }

    /// `index_status` of the indexes `defs` (name, id, definition).
    pub(crate) fn index_status(
        &self,
        defs: Vec<(String, String, IndexSpec)>,
    ) -> reql::Result<Vec<IndexStatus>> {
        let ids: Vec<String> = defs.iter().map(|(_, id, _)| id.clone()).collect();
        // Per index: complete everywhere asked, and the least progress.
        let mut states: Vec<(bool, f64)> = vec![(true, 1.0); ids.len()];
        let mut fold = |answers: Vec<Option<(bool, f64)>>| {
            for (s, a) in states.iter_mut().zip(answers) {
                let (ready, progress) = a.unwrap_or((false, 0.0));
                *s = (s.0 && ready, s.1.min(if ready { 1.0 } else { progress }));
            }
        };
        for shard in 0..self.slots.len() {
            // Asked until the leader said built once (`index_status` runs for every
            // index read and optimized filter): a later leader that has not built it
            // yet answers reads with RethinkDB's "accessed before ..." error.
            let ask: Vec<String> = {
                let built = self.leader_built.lock();
                (ids.iter())
                    .filter(|id| !built.contains(&(shard, (*id).clone())))
                    .cloned()
                    .collect()
            };
            if ask.is_empty() {
                continue;
            }
            let query = IndexQuery::Status { ids: ask.clone() };
            let answers = match self.index_query(shard, reql::ReadMode::Single, query)? {
                IndexAnswer::Status(a) => a,
                _ => return Err(wrong_kind()),
            };
            let mut built = self.leader_built.lock();
            let by_id: Vec<Option<(bool, f64)>> = ids
                .iter()
                .map(|id| match ask.iter().position(|a| a == id) {
                    Some(i) => answers.get(i).copied().flatten(),
                    None => Some((true, 1.0)),
                })
                .collect();
            for (id, a) in ids.iter().zip(&by_id) {
                if matches!(a, Some((true, _))) {
                    built.insert((shard, id.clone()));
                }
            }
            drop(built);
            fold(by_id);
        }
        for ix in self.indexes.iter().flatten() {
            fold(
                ids.iter()
                    .map(|id| ix.get(id).map(|i| (i.is_ready(), i.progress())))
                    .collect(),
            );
        }
        Ok(defs
            .into_iter()
            .zip(states)
            .map(|((name, _, spec), (ready, progress))| IndexStatus {
                name,
                spec,
                ready,
                progress,
                // The optimizer's statistics are a single server's: none here.
                entries: None,
                unkeyed: None,
            })
            .collect())
    }

    /// `index_status` of the indexes `defs` with the optimizer's statistics, summed
    /// over the shards' leaders (see the module note), read as `mode` would read.
    pub(crate) fn index_statistics(
        &self,
        defs: Vec<(String, String, IndexSpec)>,
        mode: reql::ReadMode,
    ) -> reql::Result<Vec<IndexStatus>> {
        let ids: Vec<String> = defs.iter().map(|(_, id, _)| id.clone()).collect();
        let mut all = self.index_status(defs)?;
        let mode = match mode {
            reql::ReadMode::Outdated => return Ok(all),
            m => read_mode(m),
        };
        let wait = self.wait;
        let asks = (0..self.slots.len()).map(|i| (i, ids.clone())).collect();
        let answers = self.ask_shards(asks, move |slot, ids| async move {
            let rs = ReplicatedTable::route(&slot, wait, Op::Read).await.ok()?;
            match rs.index(mode, IndexQuery::Stats { ids }).await.ok()? {
                IndexAnswer::Stats(s) => Some(s),
                _ => None,
            }
        });
        for (status, sum) in all.iter_mut().zip(sum_counts(ids.len(), answers)) {
            if let Some(c) = sum {
                let [null, array, object] = c.unkeyed;
                status.entries = Some(c.entries);
                status.unkeyed = Some(reql::Unkeyed {
                    null,
                    array,
                    object,
                });
            }
        }
        Ok(all)
    }

    /// How many entries of the index lie between two values, over every shard
    /// (stopping at `limit`).
    pub(crate) fn index_count(
        &self,
        index: &IndexName,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
        limit: u64,
        mode: reql::ReadMode,
    ) -> reql::Result<u64> {
        let mut n = 0u64;
        for shard in 0..self.slots.len() {
            if n >= limit {
                break;
            }
            let (lower, upper) = bounds(lower, upper);
            let query = IndexQuery::Count {
                id: index.id.clone(),
                lower,
                upper,
                limit: limit - n,
            };
            match self.index_query(shard, mode, query)? {
                IndexAnswer::Count(c) => n += c,
                IndexAnswer::Missing(m) => return Err(index.missing(m)),
                _ => return Err(wrong_kind()),
            }
        }
        Ok(n)
    }

    /// The entries of the index between two values with their documents, over every
    /// shard merged in index order (reversed with `reverse`), fetched lazily.
    pub(crate) fn index_scan(
        self: &Arc<Self>,
        index: IndexName,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
        mode: reql::ReadMode,
    ) -> IndexScan {
        let parts = (0..self.slots.len())
            .map(|shard| Part {
                shard,
                buffer: VecDeque::new(),
                after: None,
                done: false,
            })
            .collect();
        IndexScan {
            table: self.clone(),
            index,
            lower,
            upper,
            reverse,
            mode,
            parts,
            failed: false,
        }
    }
}

/// The statistics of each of `n` indexes summed over the shards' answers (`None` for
/// a shard that did not answer): `None` for an index some shard has no counts of.
fn sum_counts(n: usize, shards: Vec<Option<Vec<Option<IndexCounts>>>>) -> Vec<Option<IndexCounts>> {
    let mut sums = vec![
        Some(IndexCounts {
            entries: 0,
            unkeyed: [0; 3]
        });
        n
    ];
    for answer in shards {
        for (i, sum) in sums.iter_mut().enumerate() {
            let part = answer.as_ref().and_then(|a| a.get(i).copied().flatten());
            *sum = match (*sum, part) {
                (Some(s), Some(p)) => Some(IndexCounts {
                    entries: s.entries.saturating_add(p.entries),
                    unkeyed: std::array::from_fn(|c| s.unkeyed[c].saturating_add(p.unkeyed[c])),
                }),
                _ => None,
            };
        }
    }
    sums
}

/// One shard's part of an [`IndexScan`].
struct Part {
    shard: usize,
    buffer: VecDeque<(IndexEntry, Datum)>,
    /// The last entry received (where the next batch resumes).
    after: Option<(Vec<u8>, Option<Vec<u8>>)>,
    done: bool,
}

/// An index read of a replicated table: each shard's entries in batches, merged.
pub(crate) struct IndexScan {
    table: Arc<ReplicatedTable>,
    index: IndexName,
    lower: Bound<Datum>,
    upper: Bound<Datum>,
    reverse: bool,
    mode: reql::ReadMode,
    parts: Vec<Part>,
    failed: bool,
}

impl IndexScan {
    /// Fetches the next batch of every part whose buffer ran out.
    fn refill(&mut self) -> reql::Result<()> {
        for i in 0..self.parts.len() {
            let part = &self.parts[i];
            if part.done || !part.buffer.is_empty() {
                continue;
            }
            let (lower, upper) = bounds(&self.lower, &self.upper);
            let query = IndexQuery::Entries {
                id: self.index.id.clone(),
                lower,
                upper,
                reverse: self.reverse,
                limit: INDEX_BATCH,
                after: part.after.clone(),
            };
            let answer = self.table.index_query(part.shard, self.mode, query)?;
            let wire = match answer {
                IndexAnswer::Entries(e) => e,
                IndexAnswer::Missing(m) => return Err(self.index.missing(m)),
                _ => return Err(wrong_kind()),
            };
            let part = &mut self.parts[i];
            part.done = wire.len() < INDEX_BATCH as usize;
            for w in wire {
                let e = entry_of(w).map_err(|e| RouteError::ReadFailed(e).to_reql())?;
                part.buffer.push_back(e);
            }
            if let Some((e, _)) = part.buffer.back() {
                part.after = Some(after_of(e));
            }
        }
        Ok(())
    }

    /// The part whose next entry comes first in the read's order.
    fn first(&self) -> Option<usize> {
        let mut best: Option<(usize, &IndexEntry)> = None;
        for (i, p) in self.parts.iter().enumerate() {
            let Some((e, _)) = p.buffer.front() else {
                continue;
            };
            let better = match best {
                None => true,
                Some((_, b)) if self.reverse => e.order() > b.order(),
                Some((_, b)) => e.order() < b.order(),
            };
            if better {
                best = Some((i, e));
            }
        }
        best.map(|(i, _)| i)
    }
}

impl Iterator for IndexScan {
    type Item = reql::Result<(IndexEntry, Datum)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if let Err(e) = self.refill() {
            self.failed = true;
            return Some(Err(e));
        }
        let i = self.first()?;
        self.parts.get_mut(i)?.buffer.pop_front().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(entries: u64, unkeyed: [u64; 3]) -> Option<IndexCounts> {
        Some(IndexCounts { entries, unkeyed })
    }

    #[test]
    fn shards_counts_are_summed_per_index() {
        let shards = vec![
            Some(vec![c(3, [1, 0, 0]), c(5, [0, 0, 0])]),
            Some(vec![c(4, [0, 2, 1]), c(0, [0, 0, 0])]),
        ];
        assert_eq!(
            sum_counts(2, shards),
            vec![c(7, [1, 2, 1]), c(5, [0, 0, 0])]
        );
    }

    #[test]
    fn a_shard_without_counts_leaves_the_index_without_statistics() {
        // The second shard's leader has the first index not counted, the third did
        // not answer the second's question at all (a shorter answer).
        let shards = vec![
            Some(vec![c(3, [0, 0, 0]), c(5, [0, 0, 0]), c(1, [0, 0, 0])]),
            Some(vec![None, c(1, [0, 0, 0]), c(1, [0, 0, 0])]),
            Some(vec![c(1, [0, 0, 0]), c(1, [0, 0, 0])]),
        ];
        assert_eq!(sum_counts(3, shards), vec![None, c(7, [0, 0, 0]), None]);
        // A shard that did not answer: nothing has statistics.
        let shards = vec![Some(vec![c(3, [0, 0, 0])]), None];
        assert_eq!(sum_counts(1, shards), vec![None]);
        // No shards asked: zero (an empty table has no documents, no entries).
        assert_eq!(sum_counts(1, vec![]), vec![c(0, [0, 0, 0])]);
    }
}
