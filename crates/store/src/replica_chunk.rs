//! A chunk of write operations as one log entry of a replicated shard: the documents of
//! one insert chunk (`reql::terms::insert_many`) that fall in one shard are proposed
//! together, so the group appends, fsyncs and replicates one entry for them rather than
//! one per document (openraft 0.9 fsyncs each append before it takes the next client
//! write, so concurrent proposals do not share a flush). A resharding's copies into a
//! new shard are chunked the same way ([`encode_load_op`]): each changes nothing, as a
//! single load entry does, once the shard has been opened.
//!
//! Format: the byte [`CHUNK_FORMAT`] (never a record's version byte, so a single
//! command's entry and a chunk's are told apart by their first byte), then (postcard)
//! the list of operations, each the message encoding of a `replica_codec` command
//! ([`encode_op`]). The reply is a [`ChunkReply`]: one `replica_codec` reply per
//! operation, in order, or the refusal of the whole chunk.
//!
//! Applying (`ShardMachine::apply_chunk`): every replica decides each operation as
//! `Shard::apply_many` does (stripe locks in ascending order, the old documents, the
//! pure `plan`), stages the writes of all of them in the entry's batch and commits it
//! once with the entry's position. An operation that does not decode, whose key is not
//! one of this shard's, or whose writes the engine could not hold is refused alone; a
//! chunk that does not decode, or that repeats a key, is refused whole. Both are
//! deterministic, as a single command's refusals are. On a shard frozen (or retired) by
//! a resharding every operation is answered `Frozen`, as a single write is.

use std::collections::HashSet;

use datum::{Datum, Version};
use replication::codec::{decode_message, encode_message};
use replication::ApplyCtx;
use serde::{Deserialize, Serialize};
use storage::{StorageError, WriteBatch};

use crate::replica::{EntryCommit, ShardMachine};
use crate::replica_codec::{
    applied_of, command_of, decode_op, load_command, reply_of, Command, Reply,
};
use crate::shard::{Applied, StoreChange};
use crate::write::Commit;
use crate::{ReplyError, StoreError};

/// The first byte of a chunk's entry (a record's is its format version, 1).
pub const CHUNK_FORMAT: u8 = 0x81;

/// The answer to a chunk.
#[derive(Debug, Serialize, Deserialize)]
enum ChunkReply {
    /// One reply per operation, in the chunk's order.
    Each(Vec<Reply>),
    /// The chunk does not decode, or repeats a key: nothing was written.
    Refused(String),
}

/// Encodes one write operation of a chunk (as `encode_command` takes it).
pub fn encode_op(
    key: &Datum,
    expect: Option<Version>,
    change: &StoreChange,
) -> Result<Vec<u8>, StoreError> {
    let command = command_of(key, expect, change)?;
    encode_message(&command).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Encodes a resharding's copy of `doc` under `key` as an operation of a chunk.
pub fn encode_load_op(key: &Datum, doc: &Datum) -> Result<Vec<u8>, StoreError> {
    encode_message(&load_command(key, doc)?).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The log entry of a chunk of operations encoded by [`encode_op`] or
/// [`encode_load_op`], with distinct keys.
pub fn encode_chunk(ops: &[Vec<u8>]) -> Result<Vec<u8>, StoreError> {
    let body = encode_message(&ops).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(CHUNK_FORMAT);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Whether an entry's command is a chunk's.
pub(crate) fn is_chunk(command: &[u8]) -> bool {
    command.first() == Some(&CHUNK_FORMAT)
}

/// Decodes the reply to a chunk of `count` operations: each one's outcome; `Err` when
/// the whole chunk was refused or the reply is unreadable.
pub fn decode_chunk_reply(
    bytes: &[u8],
    count: usize,
) -> Result<Vec<Result<Applied, ReplyError>>, ReplyError> {
    match decode_message::<ChunkReply>(bytes).map_err(|e| ReplyError::Malformed(e.to_string()))? {
        ChunkReply::Refused(why) => Err(ReplyError::Refused(why)),
        ChunkReply::Each(replies) if replies.len() == count => {
            Ok(replies.into_iter().map(applied_of).collect())
        }
        ChunkReply::Each(replies) => Err(ReplyError::Malformed(format!(
            "{} replies to a chunk of {count} writes",
            replies.len()
        ))),
    }
}

/// The entry's commit for a chunk: each operation stages into `scratch`, which is
/// checked against the engine's limits alone (`admit`) before it joins the entry's
/// batch, so one operation the engine cannot hold is refused without its neighbours.
struct EntryChunk<'c, 'a> {
    entry: EntryCommit<'c, 'a>,
    scratch: WriteBatch,
}

impl Commit for EntryChunk<'_, '_> {
    fn batch(&mut self) -> &mut WriteBatch {
        &mut self.scratch
    }

    fn admit(&mut self) -> Result<(), String> {
        let staged = std::mem::take(&mut self.scratch);
        staged.validate().map_err(|e| e.to_string())?;
        self.entry.batch.extend(staged);
        Ok(())
    }

    fn commit(&mut self) -> Result<Option<u64>, StoreError> {
        self.entry.commit()
    }
}

impl ShardMachine {
    /// Applies a chunk's entry (module note): its reply, or `Err` for a storage failure
    /// (which stops the node, as for a single command).
    pub(crate) fn apply_chunk(
        &self,
        ctx: &mut ApplyCtx<'_>,
        command: &[u8],
    ) -> Result<Vec<u8>, StorageError> {
        let body = command.get(1..).unwrap_or_default();
        let reply = match decode_message::<Vec<Vec<u8>>>(body) {
            Err(e) => ChunkReply::Refused(format!("malformed chunk: {e}")),
            // A shard frozen by a resharding refuses every write ordered after the
            // freeze, as for a single write (`crate::replica`).
            Ok(ops) if self.refusing().is_some() => {
                let generation = self.refusing().unwrap_or_default();
                ChunkReply::Each(ops.iter().map(|_| Reply::Frozen(generation)).collect())
            }
            Ok(ops) => self.apply_ops(ctx, &ops)?,
        };
        encode_message(&reply).map_err(|e| StorageError::Engine(e.to_string()))
    }

    fn apply_ops(
        &self,
        ctx: &mut ApplyCtx<'_>,
        ops: &[Vec<u8>],
    ) -> Result<ChunkReply, StorageError> {
        let mut out: Vec<Option<Result<Applied, StoreError>>> = Vec::with_capacity(ops.len());
        let mut keyed = Vec::with_capacity(ops.len());
        for (at, op) in ops.iter().enumerate() {
            let checked = decode_message::<Command>(op)
                .map_err(|e| format!("malformed command: {e}"))
                .and_then(decode_op)
                .and_then(|((k, expect, change), load)| match self.refuse_key(&k) {
                    Some(why) => Err(why),
                    None => Ok(((at, k, expect, change), load)),
                });
            match checked {
                // The copy is over: a late copier's load changes nothing (`crate::replica`).
                Ok((_, true)) if self.opened() != 0 => {
                    out.push(Some(Ok(Applied::Done((None, None, None)))))
                }
                Ok((op, _)) => {
                    keyed.push(op);
                    out.push(None);
                }
                Err(why) => out.push(Some(Err(StoreError::Refused(why)))),
            }
        }
        let mut seen = HashSet::with_capacity(keyed.len());
        if !keyed.iter().all(|(_, k, _, _)| seen.insert(k.clone())) {
            return Ok(ChunkReply::Refused(
                "a chunk of writes repeats a key".into(),
            ));
        }
        let mut commit = EntryChunk {
            entry: EntryCommit::new(ctx),
            scratch: WriteBatch::new(),
        };
        datum::work::unwatched(|| self.shard().apply_distinct(keyed, &mut out, &mut commit));
        let mut replies = Vec::with_capacity(out.len());
        for answer in out {
            replies.push(match answer {
                Some(Ok(applied)) => reply_of(Ok(&applied)),
                Some(Err(StoreError::Refused(why))) => reply_of(Err(&why)),
                Some(Err(StoreError::Storage(e))) => return Err(e),
                // A stored document that does not decode, or the commit's failure
                // repeated: this replica's storage is damaged.
                Some(Err(e)) => return Err(StorageError::Engine(e.to_string())),
                None => {
                    return Err(StorageError::Engine(
                        "a write of a chunk was not answered".into(),
                    ))
                }
            });
        }
        Ok(ChunkReply::Each(replies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(json: &str) -> Datum {
        datum::from_json_slice(json.as_bytes()).unwrap()
    }

    #[test]
    fn a_chunk_is_told_apart_from_a_single_command() {
        let op = encode_op(&Datum::Number(1.0), None, &StoreChange::Delete).unwrap();
        let chunk = encode_chunk(&[op]).unwrap();
        assert!(is_chunk(&chunk));
        let single =
            crate::encode_command(&Datum::Number(1.0), None, &StoreChange::Delete).unwrap();
        assert!(!is_chunk(&single));
        assert!(!is_chunk(&[]));
    }

    #[test]
    fn chunk_replies_round_trip_and_bad_ones_are_errors() {
        let d = doc(r#"{"id":1}"#);
        let done = Applied::Done((None, Some(d.clone()), None));
        let replies = ChunkReply::Each(vec![reply_of(Ok(&done)), reply_of(Err("too big"))]);
        let bytes = encode_message(&replies).unwrap();
        let got = decode_chunk_reply(&bytes, 2).unwrap();
        assert!(matches!(&got[0], Ok(Applied::Done((None, Some(n), None))) if *n == d));
        assert!(matches!(&got[1], Err(ReplyError::Refused(m)) if m == "too big"));
        assert!(matches!(
            decode_chunk_reply(&bytes, 3),
            Err(ReplyError::Malformed(_))
        ));
        let refused = encode_message(&ChunkReply::Refused("no".into())).unwrap();
        assert_eq!(
            decode_chunk_reply(&refused, 2).unwrap_err(),
            ReplyError::Refused("no".into())
        );
        assert!(matches!(
            decode_chunk_reply(b"\x07", 1),
            Err(ReplyError::Malformed(_))
        ));
    }
}
