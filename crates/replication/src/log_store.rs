//! The Raft log of one group on a storage engine (openraft's `RaftLogStorage`, v2).
//!
//! Layout (docs/storage-format.md): space `{prefix}.log` maps an entry's index (8 bytes,
//! big-endian, so key order is log order) to the entry; space `{prefix}.meta` holds
//! `vote`, `committed` and `purged` (the last purged log id). Every value is a versioned
//! record (`codec`).
//!
//! Invariants:
//! * The stored entries form one contiguous run `purged+1 ..= last`; `truncate` deletes
//!   from the end backwards and `purge` from the front forwards, in bounded batches, so a
//!   crash in the middle of either still leaves one contiguous run (and `purge` writes the
//!   new `purged` id in the batch that deletes up to it).
//! * `save_vote` returns only once the vote is durable, and `append` reports an entry
//!   flushed (`LogFlushed`) only after an fsync that covers it: openraft's safety rests
//!   on both.
//! * What a leader replicates is read as a run without holes from its first index
//!   (`read_run`), so a follower is never sent entries past a hole.
//! * `truncate` and `purge` are not fsynced on their own: a crash that loses a truncate
//!   brings back entries the leader will truncate again, and a lost purge keeps entries
//!   longer; any later fsync (the next append) covers them because one engine journal
//!   orders all writes.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogId, RaftLogReader};
use storage::{Engine, WriteBatch};

use crate::codec::{decode_record, encode_record};
use crate::durability::Durability;
use crate::error::ReplicationError;
use crate::types::{Entry, LogId, RaftStorageError, TypeConfig, Vote};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const PURGED: &[u8] = b"purged";

/// Deletes per batch in `truncate` and `purge` (bounds a batch's memory).
const DELETE_BATCH: usize = 1024;

/// One group's Raft log; cheap to clone (clones share the engine), and its own log reader.
#[derive(Clone)]
pub struct LogStore {
    engine: Arc<dyn Engine>,
    log_space: String,
    meta_space: String,
    durability: Durability,
}

impl LogStore {
    /// Opens (creating if missing) the log stored in spaces `{prefix}.log` and
    /// `{prefix}.meta` of `engine`.
    pub fn open(
        engine: Arc<dyn Engine>,
        prefix: &str,
        durability: Durability,
    ) -> Result<Self, ReplicationError> {
        let log_space = format!("{prefix}.log");
        let meta_space = format!("{prefix}.meta");
        engine.create_space(&log_space)?;
        engine.create_space(&meta_space)?;
        Ok(Self {
            engine,
            log_space,
            meta_space,
            durability,
        })
    }

    /// The names of the spaces this log uses (for dropping a group).
    pub fn spaces(&self) -> [&str; 2] {
        [&self.log_space, &self.meta_space]
    }

    fn meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, ReplicationError> {
        match self.engine.get(&self.meta_space, key)? {
            Some(bytes) => Ok(Some(decode_record(&bytes)?)),
            None => Ok(None),
        }
    }

    fn last_entry_id(&self) -> Result<Option<LogId>, ReplicationError> {
        let snap = self.engine.snapshot();
        let mut it = snap.range(&self.log_space, Bound::Unbounded, Bound::Unbounded, true)?;
        match it.next() {
            Some(kv) => {
                let entry: Entry = decode_record(&kv?.1)?;
                Ok(Some(*entry.get_log_id()))
            }
            None => Ok(None),
        }
    }

    fn read_range(
        &self,
        lower: Bound<u64>,
        upper: Bound<u64>,
    ) -> Result<Vec<Entry>, ReplicationError> {
        let key = |b: Bound<&u64>| b.map(|i| i.to_be_bytes().to_vec());
        let snap = self.engine.snapshot();
        let mut out = Vec::new();
        for kv in snap.range(
            &self.log_space,
            key(lower.as_ref()),
            key(upper.as_ref()),
            false,
        )? {
            out.push(decode_record(&kv?.1)?);
        }
        Ok(out)
    }

    /// The stored entries from `start` (exactly) on, below `end`, that follow one
    /// another: none if `start` is not stored, and none past a missing index. What a
    /// leader's replication sends after `start - 1` ([`RaftLogReader::limited_get_log_entries`]):
    /// a purge running while it reads (openraft reads without a lock) removes the front
    /// of the range, and the rest, sent after the leader's `prev_log_id`, would be stored
    /// by the follower past a hole it could not read again after a restart (found by the
    /// cluster simulation, seed 1642646492288465228). openraft sends a prefix of the range
    /// it asked for, and none as a heartbeat.
    fn read_run(&self, start: u64, end: u64) -> Result<Vec<Entry>, ReplicationError> {
        let mut out: Vec<Entry> = Vec::new();
        for entry in self.read_range(Bound::Included(start), Bound::Excluded(end))? {
            if entry.get_log_id().index != start + out.len() as u64 {
                break;
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// A batch deleting up to [`DELETE_BATCH`] entries within `(lower, upper)`, taken
    /// from the front (`reverse` false) or the back; with the number of deletes and, from
    /// the front, the id of the last entry deleted.
    fn collect_deletes(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<(WriteBatch, usize, Option<LogId>), ReplicationError> {
        let snap = self.engine.snapshot();
        let mut batch = WriteBatch::new();
        let mut last = None;
        let mut n = 0;
        for kv in snap
            .range(&self.log_space, lower, upper, reverse)?
            .take(DELETE_BATCH)
        {
            let (key, value) = kv?;
            if !reverse {
                let entry: Entry = decode_record(&value)?;
                last = Some(*entry.get_log_id());
            }
            batch.delete(&self.log_space, key);
            n += 1;
        }
        Ok((batch, n, last))
    }

    fn truncate_from(&self, index: u64) -> Result<(), ReplicationError> {
        let lower = Bound::Included(index.to_be_bytes().to_vec());
        loop {
            let (batch, n, _) = self.collect_deletes(lower.clone(), Bound::Unbounded, true)?;
            if n > 0 {
                self.engine.apply(batch)?;
            }
            if n < DELETE_BATCH {
                return Ok(());
            }
        }
    }

    fn purge_upto(&self, log_id: LogId) -> Result<(), ReplicationError> {
        let upper = Bound::Included(log_id.index.to_be_bytes().to_vec());
        loop {
            let (mut batch, n, last) =
                self.collect_deletes(Bound::Unbounded, upper.clone(), false)?;
            // Each batch records how far the log is purged; the last one says `log_id`,
            // which may lie past every stored entry (after a snapshot was installed).
            let done = n < DELETE_BATCH;
            let mark = if done { log_id } else { last.unwrap_or(log_id) };
            batch.put(&self.meta_space, PURGED, encode_record(&mark)?);
            self.engine.apply(batch)?;
            if done {
                return Ok(());
            }
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, RaftStorageError> {
        self.read_range(range.start_bound().cloned(), range.end_bound().cloned())
            .map_err(ReplicationError::read_logs)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, RaftStorageError> {
        self.read_run(start, end)
            .map_err(ReplicationError::read_logs)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, RaftStorageError> {
        let purged: Option<LogId> = self.meta(PURGED).map_err(ReplicationError::read_logs)?;
        let last = self.last_entry_id().map_err(ReplicationError::read_logs)?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), RaftStorageError> {
        let write = async {
            let mut batch = WriteBatch::new();
            batch.put(&self.meta_space, VOTE, encode_record(vote)?);
            self.engine.apply(batch)?;
            self.durability.flush(&self.engine).await
        };
        write
            .await
            .map_err(|e| openraft::StorageIOError::write_vote(openraft::AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, RaftStorageError> {
        self.meta(VOTE)
            .map_err(|e| openraft::StorageIOError::read_vote(openraft::AnyError::new(&e)).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), RaftStorageError> {
        // Not fsynced: a lost `committed` only means re-applying from the state
        // machine's own durable position after a crash.
        let mut batch = WriteBatch::new();
        match committed {
            Some(c) => batch.put(
                &self.meta_space,
                COMMITTED,
                encode_record(&c).map_err(|e| ReplicationError::from(e).write())?,
            ),
            None => batch.delete(&self.meta_space, COMMITTED),
        }
        self.engine
            .apply(batch)
            .map_err(|e| ReplicationError::from(e).write())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, RaftStorageError> {
        self.meta(COMMITTED).map_err(ReplicationError::read)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), RaftStorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for entry in entries {
            let key = entry.get_log_id().index.to_be_bytes();
            let value =
                encode_record(&entry).map_err(|e| ReplicationError::from(e).write_logs())?;
            batch.put(&self.log_space, key.to_vec(), value);
        }
        self.engine
            .apply(batch)
            .map_err(|e| ReplicationError::from(e).write_logs())?;
        // openraft may go on while the fsync runs; it counts the entries as stored only
        // when the callback fires.
        let flushed = self.durability.flush(&self.engine).await;
        callback.log_io_completed(flushed.map_err(std::io::Error::other));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), RaftStorageError> {
        self.truncate_from(log_id.index)
            .map_err(ReplicationError::write_logs)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), RaftStorageError> {
        self.purge_upto(log_id)
            .map_err(ReplicationError::write_logs)
    }
}
