//! The log entries and replies of a replicated shard (`crate::replica`): one write
//! operation per entry, as `Shard::apply` takes it.
//!
//! A command is a stored record (`replication::codec::encode_record`: a format-version
//! byte, then postcard), since it lives in the Raft log across restarts: the encoded
//! primary key (`datum::keys::encode_primary`), the expected `Version` and the change,
//! a document as its JSON text. A reply is a message (postcard): the outcome, documents
//! as JSON text, or the machine's refusal of the command. Decoding never panics: a
//! command that does not decode is refused (an error reply, the same on every replica),
//! and a reply that does not decode is an error for the proposer.
//!
//! Besides writes, a log entry can freeze the shard (`encode_freeze`): a resharding
//! (docs/clustering.md, "Resharding") makes the shard's data final by appending it to
//! the shard's own log, so every write ordered after it is refused (`Reply::Frozen`)
//! on every replica, whoever leads. The new shards of a resharding receive the copied
//! documents as loads (`encode_load`: a replace) until an open entry (`encode_open`)
//! ends the copy: a load after it changes nothing, so a late copier can never overwrite
//! what the table's clients wrote since. A retire entry (`encode_retire`) ends an old
//! shard's service once its documents are in the new shards. An abandoned resharding's
//! unfreeze entry (`encode_unfreeze`) makes an old shard writable again.

use datum::{Datum, Version};
use replication::codec::{decode_message, decode_record, encode_message, encode_record};
use serde::{Deserialize, Serialize};

use crate::shard::{Applied, StoreChange};
use crate::StoreError;

/// One write operation as a log entry.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Command {
    key: Vec<u8>,
    expect: Option<u64>,
    change: Change,
}

#[derive(Debug, Serialize, Deserialize)]
enum Change {
    Keep,
    Put(String),
    Delete,
    /// Freezes the shard for the resharding towards generation `.0` (the key is empty).
    /// Last: older entries keep their encoding.
    Freeze(u64),
    /// A resharding's copy of a document (a replace), refused once the shard is open.
    Load(String),
    /// Ends the copy into the shard for the resharding towards generation `.0`.
    Open(u64),
    /// Retires the (frozen, copied) shard for the resharding towards generation `.0`:
    /// from it on its leader refuses the table's reads (`crate::replica`).
    Retire(u64),
    /// Lifts the freeze of every resharding up to generation `.0`, abandoned
    /// (`AbortReshard`); a later freeze for those generations changes nothing.
    Unfreeze(u64),
}

/// The answer to a command.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Done {
        old: Option<String>,
        new: Option<String>,
    },
    Conflict(Option<String>),
    Refused(String),
    /// The shard is frozen (for the resharding towards this generation): nothing was
    /// written. Last: older replies keep their encoding.
    Frozen(u64),
}

/// Why a proposer got no outcome from a replicated write.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReplyError {
    /// The machine refused the command (malformed, a key outside the shard, a document
    /// the engine cannot hold); nothing was written.
    #[error("the replicated shard refused the write: {0}")]
    Refused(String),
    /// The reply could not be decoded.
    #[error("malformed reply of a replicated shard: {0}")]
    Malformed(String),
    /// The shard is frozen by a resharding (towards this generation); nothing was
    /// written (the table is unavailable for writes until the new shards serve it).
    #[error("the shard is frozen for resharding (generation {0})")]
    Frozen(u64),
}

/// Encodes the write operation `change` to the document under `key`, conditional on
/// version `expect` (as `Shard::apply` takes it), as a log entry's bytes.
pub fn encode_command(
    key: &Datum,
    expect: Option<Version>,
    change: &StoreChange,
) -> Result<Vec<u8>, StoreError> {
    let command = command_of(key, expect, change)?;
    encode_record(&command).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The command of a write operation, for an entry of its own or a chunk's.
pub(crate) fn command_of(
    key: &Datum,
    expect: Option<Version>,
    change: &StoreChange,
) -> Result<Command, StoreError> {
    let key =
        datum::keys::encode_primary(key).map_err(|e| StoreError::Key(e.message().to_string()))?;
    let change = match change {
        StoreChange::Keep => Change::Keep,
        StoreChange::Put(d) => Change::Put(d.to_json_string()),
        StoreChange::Delete => Change::Delete,
    };
    Ok(Command {
        key,
        expect: expect.map(|v| v.0),
        change,
    })
}

/// The log entry of a resharding's mark (a freeze, an open, a retirement): no key.
fn encode_mark(change: Change) -> Result<Vec<u8>, StoreError> {
    let command = Command {
        key: Vec::new(),
        expect: None,
        change,
    };
    encode_record(&command).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The log entry lifting the freeze (and the retirement) of an old shard whose
/// resharding towards `generation` was abandoned (committed in the catalog first:
/// docs/clustering.md, "Abandoning a resharding").
pub fn encode_unfreeze(generation: u64) -> Result<Vec<u8>, StoreError> {
    encode_mark(Change::Unfreeze(generation))
}

/// The log entry freezing a shard for the resharding towards `generation`.
pub fn encode_freeze(generation: u64) -> Result<Vec<u8>, StoreError> {
    encode_mark(Change::Freeze(generation))
}

/// The log entry copying document `doc` under `key` into a new shard of a resharding.
pub fn encode_load(key: &Datum, doc: &Datum) -> Result<Vec<u8>, StoreError> {
    encode_record(&load_command(key, doc)?).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The command copying `doc` under `key` (alone: [`encode_load`]; one of a chunk's:
/// `crate::replica_chunk::encode_load_op`).
pub(crate) fn load_command(key: &Datum, doc: &Datum) -> Result<Command, StoreError> {
    let key =
        datum::keys::encode_primary(key).map_err(|e| StoreError::Key(e.message().to_string()))?;
    Ok(Command {
        key,
        expect: None,
        change: Change::Load(doc.to_json_string()),
    })
}

/// The log entry ending the copy into a new shard of the resharding towards
/// `generation`.
pub fn encode_open(generation: u64) -> Result<Vec<u8>, StoreError> {
    encode_mark(Change::Open(generation))
}

/// The log entry retiring an old shard of the resharding towards `generation`, once
/// its documents are in the new shards (`crate::replica`).
pub fn encode_retire(generation: u64) -> Result<Vec<u8>, StoreError> {
    encode_mark(Change::Retire(generation))
}

/// A decoded command: encoded key, expected version, change.
pub(crate) type Decoded = (Vec<u8>, Option<Version>, StoreChange);

/// A decoded log entry: a write, a freeze (towards a generation), a copied document,
/// the end of the copy, the old shard's retirement, or the end of an abandoned
/// resharding's freeze.
pub(crate) enum Entry {
    Write(Decoded),
    Freeze(u64),
    Load(Decoded),
    Open(u64),
    Retire(u64),
    Unfreeze(u64),
}

/// Decodes a log entry; `Err` says why it is refused.
pub(crate) fn decode_entry(bytes: &[u8]) -> Result<Entry, String> {
    let c: Command = decode_record(bytes).map_err(|e| format!("malformed command: {e}"))?;
    match c.change {
        Change::Freeze(g) => Ok(Entry::Freeze(g)),
        Change::Open(g) => Ok(Entry::Open(g)),
        Change::Retire(g) => Ok(Entry::Retire(g)),
        Change::Unfreeze(g) => Ok(Entry::Unfreeze(g)),
        Change::Load(_) => decode_op(c).map(|(d, _)| Entry::Load(d)),
        _ => decode_write(c).map(Entry::Write),
    }
}

/// Decodes one operation of a chunk: a client's write, or a resharding's copy (a put of
/// the final document, whatever is there), told by the flag; `Err` says why it is
/// refused (a freeze or an open is never an operation of a chunk).
pub(crate) fn decode_op(c: Command) -> Result<(Decoded, bool), String> {
    match c.change {
        Change::Load(json) => {
            let put = Command {
                key: c.key,
                expect: None,
                change: Change::Put(json),
            };
            decode_write(put).map(|d| (d, true))
        }
        _ => decode_write(c).map(|d| (d, false)),
    }
}

/// Decodes a write command; `Err` says why it is refused (a freeze is not a write).
#[cfg(test)]
pub(crate) fn decode_command(bytes: &[u8]) -> Result<Decoded, String> {
    let c: Command = decode_record(bytes).map_err(|e| format!("malformed command: {e}"))?;
    decode_write(c)
}

/// A client's write command, checked (alone, or one of a chunk's: `crate::replica_chunk`);
/// `Err` says why it is refused.
pub(crate) fn decode_write(c: Command) -> Result<Decoded, String> {
    let change = match c.change {
        Change::Freeze(_)
        | Change::Open(_)
        | Change::Retire(_)
        | Change::Unfreeze(_)
        | Change::Load(_) => return Err("not a client's write".into()),
        Change::Keep => StoreChange::Keep,
        Change::Delete => StoreChange::Delete,
        Change::Put(json) => {
            let d = datum::from_json_owned(json.into_bytes())
                .map_err(|e| format!("malformed document: {}", e.0))?;
            if d.as_object().is_none() {
                return Err("a document must be an object".into());
            }
            StoreChange::Put(d)
        }
    };
    Ok((c.key, c.expect.map(Version), change))
}

fn text(d: Option<&Datum>) -> Option<String> {
    d.map(Datum::to_json_string)
}

/// Encodes the machine's answer (the ticket of a local write has no place in it:
/// a replicated write is durable once its entry is committed).
pub(crate) fn encode_reply(outcome: Result<&Applied, &str>) -> Result<Vec<u8>, String> {
    encode_message(&reply_of(outcome)).map_err(|e| e.to_string())
}

/// The reply to an operation with this outcome.
pub(crate) fn reply_of(outcome: Result<&Applied, &str>) -> Reply {
    match outcome {
        Ok(Applied::Done((old, new, _))) => Reply::Done {
            old: text(old.as_ref()),
            new: text(new.as_ref()),
        },
        Ok(Applied::Conflict(current)) => Reply::Conflict(text(current.as_ref())),
        Err(why) => Reply::Refused(why.to_owned()),
    }
}

/// The answer of a frozen shard to a write (generation: the resharding's).
pub(crate) fn encode_frozen(generation: u64) -> Result<Vec<u8>, String> {
    encode_message(&Reply::Frozen(generation)).map_err(|e| e.to_string())
}

/// Decodes a replicated write's reply into the outcome `Shard::apply` would give
/// (with no ticket).
pub fn decode_reply(bytes: &[u8]) -> Result<Applied, ReplyError> {
    let reply = decode_message::<Reply>(bytes).map_err(|e| ReplyError::Malformed(e.to_string()))?;
    applied_of(reply)
}

/// The outcome a reply gives (with no ticket).
pub(crate) fn applied_of(reply: Reply) -> Result<Applied, ReplyError> {
    let doc = |t: Option<String>| -> Result<Option<Datum>, ReplyError> {
        t.map(|t| datum::from_json_owned(t.into_bytes()).map_err(|e| ReplyError::Malformed(e.0)))
            .transpose()
    };
    match reply {
        Reply::Done { old, new } => Ok(Applied::Done((doc(old)?, doc(new)?, None))),
        Reply::Conflict(current) => Ok(Applied::Conflict(doc(current)?)),
        Reply::Refused(why) => Err(ReplyError::Refused(why)),
        Reply::Frozen(g) => Err(ReplyError::Frozen(g)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(json: &str) -> Datum {
        datum::from_json_slice(json.as_bytes()).unwrap()
    }

    #[test]
    fn a_command_round_trips() {
        let d = doc(r#"{"id":1,"v":"x"}"#);
        let v = Version::of(Some(&d));
        let bytes = encode_command(&Datum::Number(1.0), Some(v), &StoreChange::Put(d.clone()));
        let (key, expect, change) = decode_command(&bytes.unwrap()).unwrap();
        assert_eq!(
            key,
            datum::keys::encode_primary(&Datum::Number(1.0)).unwrap()
        );
        assert_eq!(expect, Some(v));
        assert!(matches!(change, StoreChange::Put(p) if p == d));
        let bytes = encode_command(&Datum::str("k"), None, &StoreChange::Delete).unwrap();
        assert!(matches!(
            decode_command(&bytes),
            Ok((_, None, StoreChange::Delete))
        ));
    }

    #[test]
    fn a_freeze_round_trips_and_is_no_write() {
        let bytes = encode_freeze(3).unwrap();
        assert!(matches!(decode_entry(&bytes), Ok(Entry::Freeze(3))));
        assert!(decode_command(&bytes).is_err());
        let put = encode_command(&Datum::Number(1.0), None, &StoreChange::Keep).unwrap();
        assert!(matches!(decode_entry(&put), Ok(Entry::Write(_))));
        let open = encode_open(4).unwrap();
        assert!(matches!(decode_entry(&open), Ok(Entry::Open(4))));
        let retire = encode_retire(4).unwrap();
        assert!(matches!(decode_entry(&retire), Ok(Entry::Retire(4))));
        assert!(decode_command(&retire).is_err());
        let unfreeze = encode_unfreeze(3).unwrap();
        assert!(matches!(decode_entry(&unfreeze), Ok(Entry::Unfreeze(3))));
        assert!(decode_command(&unfreeze).is_err());
        let d = doc(r#"{"id":1}"#);
        let load = encode_load(&Datum::Number(1.0), &d).unwrap();
        assert!(
            matches!(decode_entry(&load), Ok(Entry::Load((_, None, StoreChange::Put(p)))) if p == d)
        );
        assert!(decode_command(&load).is_err());
        let frozen = encode_frozen(3).unwrap();
        assert_eq!(decode_reply(&frozen).unwrap_err(), ReplyError::Frozen(3));
    }

    #[test]
    fn malformed_commands_are_refused_not_panics() {
        let good = encode_command(&Datum::Number(1.0), None, &StoreChange::Keep).unwrap();
        let mut wrong_version = good.clone();
        wrong_version[0] = 9;
        for bad in [
            &b""[..],
            b"\x01",
            b"\x01\xff\xff\xff",
            &wrong_version,
            &good[..2],
        ] {
            assert!(decode_command(bad).is_err(), "{bad:?}");
        }
        let not_object = Command {
            key: b"k".to_vec(),
            expect: None,
            change: Change::Put("[1]".into()),
        };
        let e = decode_command(&encode_record(&not_object).unwrap()).unwrap_err();
        assert!(e.contains("object"), "{e}");
        let not_json = Command {
            key: b"k".to_vec(),
            expect: None,
            change: Change::Put("{\"id\":".into()),
        };
        let e = decode_command(&encode_record(&not_json).unwrap()).unwrap_err();
        assert!(e.starts_with("malformed document"), "{e}");
    }

    #[test]
    fn replies_round_trip_and_bad_ones_are_errors() {
        let d = doc(r#"{"id":1}"#);
        let done = Applied::Done((None, Some(d.clone()), Some(7)));
        let bytes = encode_reply(Ok(&done)).unwrap();
        assert!(matches!(decode_reply(&bytes), Ok(Applied::Done((None, Some(n), None))) if n == d));
        let conflict = Applied::Conflict(Some(d.clone()));
        let bytes = encode_reply(Ok(&conflict)).unwrap();
        assert!(matches!(decode_reply(&bytes), Ok(Applied::Conflict(Some(c))) if c == d));
        let bytes = encode_reply(Err("no")).unwrap();
        assert_eq!(
            decode_reply(&bytes).unwrap_err(),
            ReplyError::Refused("no".into())
        );
        assert!(matches!(
            decode_reply(b"\x09"),
            Err(ReplyError::Malformed(_))
        ));
        let bad_doc = encode_message(&Reply::Conflict(Some("{".into()))).unwrap();
        assert!(matches!(
            decode_reply(&bad_doc),
            Err(ReplyError::Malformed(_))
        ));
    }
}
