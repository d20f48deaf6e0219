//! One shard of one table, and the group committer that makes writes durable.
//!
//! - `Shard`: documents by primary key (keys from `datum::keys`, values compact JSON),
//!   single-document writes applied conditionally on the version that was read
//!   (`Shard::apply`, under a striped key lock, running no user code), ordered range
//!   reads from a snapshot, and an exact document count kept in memory.
//! - A bounded cache of decoded documents per shard for point reads and
//!   writes (`cache.rs`), kept exact under the stripe locks; the shards of one server
//!   share a `CacheBudget` (no process-global state).
//! - `GroupCommit`: every write gets a ticket after it is applied; one background thread
//!   fsyncs the engine for all waiting writers at once, so hard-durability throughput
//!   grows with concurrency. Soft writes are flushed within `SOFT_FLUSH_INTERVAL`.
//! - `Shard::apply_many` (`write_many.rs`): a chunk of operations with distinct keys
//!   (a bulk insert's) decided one by one as `apply` decides them, committed as one
//!   batch with one ticket.
//!
//! - `ShardMachine` (`replica.rs`, `replica_codec.rs`): a shard replicated on Raft, its
//!   write operations log entries applied through the same write path as a local write
//!   (`write.rs`: the pure `plan`, then the commit, then the in-memory effects), a
//!   chunk of them as one entry (`replica_chunk.rs`, through `write_many.rs`); its
//!   secondary indexes added and built by each replica (`replica_index.rs`).
//!
//! Invariant: a ticket is marked durable only after an `Engine::persist` that started
//! after the write was applied returned successfully.

mod cache;
mod commit;
mod feeds;
mod index;
mod range;
mod replica;
mod replica_chunk;
mod replica_codec;
mod replica_index;
mod sample;
mod shard;
mod spaces;
mod unkeyed;
mod write;
mod write_many;

pub use cache::CacheBudget;
pub use commit::{Callback, GroupCommit, SOFT_FLUSH_INTERVAL};
pub use feeds::quiesce_all;
pub use index::{track_entries, EntryIter, IndexEntry, IndexFn, IndexRange, SecondaryIndex};
pub use range::KeyRange;
pub use replica::{space_kinds, ReplicaIndex, ReplicaOptions, ShardMachine, DOCS};
pub use replica_chunk::{
    decode_chunk_reply, encode_chunk, encode_load_op, encode_op, CHUNK_FORMAT,
};
pub use replica_codec::{
    decode_reply, encode_command, encode_freeze, encode_load, encode_open, encode_retire,
    encode_unfreeze, ReplyError,
};
pub use sample::split_sorted;
pub use shard::{Applied, ModifyOutcome, Shard, StoreChange};
pub use unkeyed::{NoKeys, Unkeyed};
pub use write_many::ChunkOp;

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage engine failed.
    #[error("storage error: {0}")]
    Storage(#[from] storage::StorageError),
    /// The storage engine failed, as its error's text: the same failure answered to
    /// each write of a chunk after the first (`Shard::apply_many`).
    #[error("storage error: {0}")]
    StorageText(String),
    /// A stored document could not be decoded.
    #[error("corrupt document: {0}")]
    Corrupt(String),
    /// A key could not be encoded.
    #[error("{0}")]
    Key(String),
    /// Durability could not be established (the engine failed to persist).
    #[error("write could not be made durable: {0}")]
    NotDurable(String),
    /// A replicated chunk refused one operation: the engine could not hold its writes
    /// (`Commit::admit`); nothing of it was written.
    #[error("{0}")]
    Refused(String),
}
