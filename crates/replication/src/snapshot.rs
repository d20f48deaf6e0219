//! Snapshots as openraft's `SnapshotData`, streamed in bounded chunks.
//!
//! A snapshot is never held whole in memory. The sending side is a [`SnapshotView`]: a
//! consistent engine snapshot of the state machine's spaces, read chunk by chunk while it
//! is sent. The receiving side is a [`StagedSnapshot`]: each chunk is written straight
//! into a fresh *generation* of the machine's spaces, and installing it is one small
//! atomic batch that switches the generation (so a crash mid-transfer or mid-install
//! leaves the old state whole; unused generations are dropped at the next open).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use storage::{Engine, KvIter, WriteBatch};

use crate::error::ReplicationError;

/// Default bound on a chunk's bytes (keys and values).
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

/// One record of a snapshot: a key and value of the machine's space number `space`
/// (its position in `StateMachine::space_kinds`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The space's position among the machine's kinds.
    pub space: u16,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// A bounded piece of a snapshot, in key order within each space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The records.
    pub records: Vec<Record>,
}

/// openraft's snapshot data for [`crate::TypeConfig`].
pub enum SnapshotData {
    /// A state machine's state as of a log position, to be sent.
    View(SnapshotView),
    /// A snapshot being received, staged in a new generation of spaces.
    Staged(StagedSnapshot),
}

impl fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotData::View(v) => write!(f, "SnapshotView({:?})", v.spaces),
            SnapshotData::Staged(s) => write!(f, "StagedSnapshot({:?})", s.spaces),
        }
    }
}

/// A consistent, read-only view of a state machine's spaces.
#[derive(Clone)]
pub struct SnapshotView {
    snap: Arc<dyn storage::Snapshot>,
    spaces: Vec<String>,
}

impl SnapshotView {
    pub(crate) fn new(snap: Arc<dyn storage::Snapshot>, spaces: Vec<String>) -> Self {
        Self { snap, spaces }
    }

    /// Reads the view as chunks of at most about `max_bytes` (a chunk holds at least one
    /// record, however large).
    pub fn chunks(&self, max_bytes: usize) -> ChunkReader {
        ChunkReader {
            view: self.clone(),
            space: 0,
            iter: None,
            max_bytes,
        }
    }
}

/// Reads a [`SnapshotView`] chunk by chunk.
pub struct ChunkReader {
    view: SnapshotView,
    space: usize,
    iter: Option<KvIter>,
    max_bytes: usize,
}

impl ChunkReader {
    /// The next chunk, or `None` after the last.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReplicationError> {
        let mut chunk = Chunk::default();
        let mut bytes = 0;
        while let Some(name) = self.view.spaces.get(self.space) {
            let iter = match &mut self.iter {
                Some(it) => it,
                None => self.iter.insert(self.view.snap.range(
                    name,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    false,
                )?),
            };
            match iter.next() {
                Some(kv) => {
                    let (key, value) = kv?;
                    bytes += key.len() + value.len();
                    let space = u16::try_from(self.space)
                        .map_err(|_| ReplicationError::UnknownSnapshotSpace(u16::MAX))?;
                    chunk.records.push(Record {
                        space,
                        key,
                        value: value.to_vec(),
                    });
                    if bytes >= self.max_bytes {
                        return Ok(Some(chunk));
                    }
                }
                None => {
                    self.iter = None;
                    self.space += 1;
                }
            }
        }
        Ok((!chunk.records.is_empty()).then_some(chunk))
    }
}

/// A snapshot being received into a fresh generation of the machine's spaces. Dropped
/// without being installed, it drops those spaces.
pub struct StagedSnapshot {
    engine: Arc<dyn Engine>,
    pub(crate) generation: u64,
    pub(crate) spaces: Vec<String>,
    pub(crate) installed: bool,
}

impl StagedSnapshot {
    /// Creates the (empty) spaces of generation `generation`.
    pub(crate) fn create(
        engine: Arc<dyn Engine>,
        generation: u64,
        spaces: Vec<String>,
    ) -> Result<Self, ReplicationError> {
        for s in &spaces {
            // A crash may have left an earlier attempt's data in a space of this name.
            engine.drop_space(s)?;
            engine.create_space(s)?;
        }
        Ok(Self {
            engine,
            generation,
            spaces,
            installed: false,
        })
    }

    /// Writes one received chunk (visible only once the snapshot is installed).
    pub fn write_chunk(&mut self, chunk: &Chunk) -> Result<(), ReplicationError> {
        let mut batch = WriteBatch::new();
        for r in &chunk.records {
            let space = self
                .spaces
                .get(usize::from(r.space))
                .ok_or(ReplicationError::UnknownSnapshotSpace(r.space))?;
            batch.put(space, r.key.as_slice(), r.value.as_slice());
        }
        if !batch.is_empty() {
            self.engine.apply(batch)?;
        }
        Ok(())
    }
}

impl Drop for StagedSnapshot {
    fn drop(&mut self) {
        if !self.installed {
            for s in &self.spaces {
                if let Err(e) = self.engine.drop_space(s) {
                    tracing::warn!("dropping an abandoned snapshot's space {s}: {e}");
                }
            }
        }
    }
}
