//! A chunk of writes to a replicated table ([`ReplicatedTable::apply_all`], a bulk
//! insert's chunk): each shard's operations go to its group as few log entries as their
//! size allows (`store::encode_chunk`: at most [`ENTRY_BYTES`] of operations, or one
//! larger operation alone), and every shard's entries are proposed at once. A chunk
//! then costs a group one append, fsync and replication round instead of one per
//! document: openraft 0.9 fsyncs each append before it takes the next client write, so
//! writes proposed separately do not share a flush.
//!
//! A resharding's copies (`load_all`) are chunked and answered the same way.
//!
//! Invariants: the operations of one call have distinct keys (the caller's contract,
//! `reql::Table::apply_all`; a shard's machine refuses a chunk that repeats a key, with
//! nothing written); a failed proposal answers each of its operations with that failure
//! (an unknown outcome stays `ReqlOpIndeterminateError`, never retried).

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use datum::{Datum, Version};
use replication::SharedTransport;
use store::{Applied, StoreChange};

use super::ReplicatedTable;
use crate::replica::{wait_for, Op, ReplicatedShard, RouteError};

/// The most bytes of operations one chunk's entry carries.
const ENTRY_BYTES: usize = 1 << 20;

/// Splits operations of these encoded sizes into consecutive runs of at most `limit`
/// bytes each; an operation larger than `limit` is a run alone (pure).
fn runs(sizes: &[usize], limit: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0usize);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && bytes.saturating_add(size) > limit {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// One entry to propose: the shard's slot, the operations' positions in the call and
/// their encodings.
type Job = (
    Arc<OnceLock<ReplicatedShard<SharedTransport>>>,
    Vec<usize>,
    Vec<Vec<u8>>,
);

impl ReplicatedTable {
    /// Applies writes to distinct keys, `(shard, key, expect, change)` each (module
    /// note); each answer as `apply` gives it, in the order of `ops`. The caller bounds
    /// how many there are.
    pub(crate) fn apply_all(
        &self,
        ops: Vec<(usize, Datum, Option<Version>, StoreChange)>,
    ) -> Vec<reql::Result<Applied>> {
        let encoded = ops
            .into_iter()
            .map(|(shard, key, expect, change)| (shard, store::encode_op(&key, expect, &change)))
            .collect();
        self.propose_chunks(encoded)
    }

    /// Copies documents into the new shards of a resharding, `(shard, key, document)`
    /// each, chunked as `apply_all` chunks writes; each refused by a shard already open.
    pub(crate) fn load_all(&self, docs: Vec<(usize, Datum, Datum)>) -> Vec<reql::Result<Applied>> {
        let encoded = docs
            .into_iter()
            .map(|(shard, key, doc)| (shard, store::encode_load_op(&key, &doc)))
            .collect();
        self.propose_chunks(encoded)
    }

    /// Proposes operations encoded for a chunk, `(shard, encoding)` each, as each
    /// shard's few entries, all at once; each answer in the order of `ops`.
    fn propose_chunks(
        &self,
        ops: Vec<(usize, Result<Vec<u8>, store::StoreError>)>,
    ) -> Vec<reql::Result<Applied>> {
        let mut out: Vec<Option<reql::Result<Applied>>> = (0..ops.len()).map(|_| None).collect();
        let mut by_shard: BTreeMap<usize, (Vec<usize>, Vec<Vec<u8>>)> = BTreeMap::new();
        for (i, (shard, op)) in ops.into_iter().enumerate() {
            match op {
                Ok(op) => {
                    let (at, encoded) = by_shard.entry(shard).or_default();
                    at.push(i);
                    encoded.push(op);
                }
                Err(e) => out[i] = Some(Err(RouteError::from(e).to_reql())),
            }
        }
        let mut jobs: Vec<Job> = Vec::new();
        for (shard, (at, encoded)) in by_shard {
            let slot = match self.slot(shard) {
                Ok(slot) => slot,
                Err(e) => {
                    for i in at {
                        out[i] = Some(Err(e.clone()));
                    }
                    continue;
                }
            };
            let sizes: Vec<usize> = encoded.iter().map(Vec::len).collect();
            let (mut at, mut encoded) = (at.into_iter(), encoded.into_iter());
            for run in runs(&sizes, ENTRY_BYTES) {
                let n = run.len();
                let positions = at.by_ref().take(n).collect();
                jobs.push((slot.clone(), positions, encoded.by_ref().take(n).collect()));
            }
        }
        let wait = self.wait;
        let jobs = jobs.into_iter().map(|(slot, at, ops)| {
            let job = async move {
                let rs = Self::route(&slot, wait, Op::Write).await?;
                rs.apply_chunk(&ops).await
            };
            (at, job)
        });
        self.answer_jobs(out, jobs.collect())
    }

    /// Runs `jobs` concurrently on the runtime and waits for them here (a synchronous
    /// caller): each answers for the operations at its positions, one outcome each, or
    /// fails them all. `out` holds the answers known already; an operation left
    /// without one (its task panicked, the server is stopping) has an unknown outcome.
    fn answer_jobs<F>(
        &self,
        mut out: Vec<Option<reql::Result<Applied>>>,
        jobs: Vec<(Vec<usize>, F)>,
    ) -> Vec<reql::Result<Applied>>
    where
        F: Future<Output = Result<Vec<Result<Applied, RouteError>>, RouteError>> + Send + 'static,
    {
        let answers = wait_for(&self.runtime, async move {
            let mut set = tokio::task::JoinSet::new();
            for (at, job) in jobs {
                set.spawn(async move { (at, job.await) });
            }
            let mut answers = Vec::with_capacity(set.len());
            while let Some(joined) = set.join_next().await {
                if let Ok(answer) = joined {
                    answers.push(answer);
                }
            }
            answers
        });
        for (at, answer) in answers.unwrap_or_default() {
            match answer {
                Ok(each) => {
                    for (i, a) in at.into_iter().zip(each) {
                        if let Some(slot) = out.get_mut(i) {
                            *slot = Some(a.map_err(|e| e.to_reql()));
                        }
                    }
                }
                Err(e) => {
                    let e = e.to_reql();
                    for i in at {
                        if let Some(slot) = out.get_mut(i) {
                            *slot = Some(Err(e.clone()));
                        }
                    }
                }
            }
        }
        out.into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    Err(RouteError::CommitUnknown("the server is stopping".into()).to_reql())
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fill_up_to_the_limit_and_a_large_operation_goes_alone() {
        assert_eq!(runs(&[], 10), Vec::<Range<usize>>::new());
        assert_eq!(runs(&[3, 3, 3], 10), vec![0..3]);
        assert_eq!(runs(&[4, 4, 4], 10), vec![0..2, 2..3]);
        assert_eq!(runs(&[20, 1, 1], 10), vec![0..1, 1..3]);
        assert_eq!(runs(&[1, 20, 1], 10), vec![0..1, 1..2, 2..3]);
        assert_eq!(runs(&[5, 5, 5, 5], 10), vec![0..2, 2..4]);
    }
}
