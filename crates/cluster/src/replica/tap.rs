//! The leader's side of changefeeds opened on servers holding no replica of a shard
//! ([`Taps`]): a remote server's poller opens a session on the shard's leader, which
//! subscribes to this server's table hub (restricted to the shard's key range) and
//! keeps what it hears in a [`Ring`] numbered from 1; the poller asks for the changes
//! after the last one it published ([`FeedQuery::Poll`], a long poll: the read waits up
//! to `wait_ms` for a change, `replication::ReadService::wait`).
//!
//! Initial values ([`FeedQuery::Snapshot`]): under the shard's quiesce (no write can
//! apply or publish), the session's subscription is drained into its ring, the number
//! of its last change `c` is taken and the documents are read. Every change published
//! before the quiesce is numbered `<= c` and is in the documents read; every later one
//! is numbered `> c` and is not. The poller publishes the changes up to `c` before it
//! registers the new feed with those documents, and later ones after: no overlap, no gap.
//!
//! Sessions are tied to the leader that opened them (RethinkDB ties a feed to the
//! shard's primary): after a leader change the new leader does not know the session
//! and answers [`FeedAnswer::Gone`], and so does a broken ring; the remote feeds then
//! end with "Changefeed aborted (unavailable).". Memory is bounded: at most
//! [`MAX_SESSIONS`] sessions per shard, each ring [`RING_ENTRIES`] changes and
//! [`RING_BYTES`] of text (the hub queue behind it is as long), one poll answer
//! [`POLL_ENTRIES`] changes and [`POLL_BYTES`], initial values [`INITIAL_BYTES`]; a
//! session not polled for [`SESSION_IDLE`] is dropped. Changes a snapshot install
//! brings to this replica are not published (as for every feed, see docs/clustering.md).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use changefeed::{Notify, Options, Request, Subscription};
use datum::Datum;
use parking_lot::Mutex;
use replication::Transport;
use serde::{Deserialize, Serialize};
use store::Shard;

use super::read::{KeyBound, ReadAnswer, ReadQuery};
use super::ring::{Ring, WireChange};
use super::{ReadMode, ReplicatedShard, RouteError};

/// The most changes a session's ring holds unacknowledged.
pub(crate) const RING_ENTRIES: usize = 4096;
/// The most text a session's ring holds unacknowledged.
pub(crate) const RING_BYTES: usize = 8 << 20;
/// The most changes one poll answers.
pub(crate) const POLL_ENTRIES: usize = 512;
/// The most text one poll answers (past its first change).
pub(crate) const POLL_BYTES: usize = 1 << 20;
/// The most text of initial values one snapshot answers.
pub(crate) const INITIAL_BYTES: usize = 16 << 20;
/// The longest a poll waits for a change.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(2);
/// How long a session lives without being polled.
pub(crate) const SESSION_IDLE: Duration = Duration::from_secs(30);
/// The most sessions one shard's replica keeps.
pub(crate) const MAX_SESSIONS: usize = 256;

/// What a snapshot reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum InitialRead {
    /// These primary keys (JSON text).
    Keys(Vec<String>),
    /// The documents between two primary-key bounds.
    Range { lower: KeyBound, upper: KeyBound },
}

/// A feed session's request to a shard's leader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum FeedQuery {
    /// Opens a session: changes from now on are kept for its poller.
    Open,
    /// The changes after `after` (up to `upto`), waiting up to `wait_ms` for one.
    Poll {
        session: u64,
        after: u64,
        upto: Option<u64>,
        wait_ms: u32,
    },
    /// Initial values, cut atomically with the session's changes.
    Snapshot { session: u64, read: InitialRead },
    /// Ends a session.
    Close { session: u64 },
}

/// A shard leader's answer to a [`FeedQuery`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FeedAnswer {
    Opened {
        session: u64,
    },
    /// The number of the last change answered, and the changes after the poll's `after`.
    Changes {
        last: u64,
        changes: Vec<WireChange>,
    },
    /// The documents read and the number of the last change they include.
    Snapshot {
        last: u64,
        docs: Vec<String>,
    },
    Closed,
    /// The session is unknown here (another leader, expired) or lost changes.
    Gone(String),
}

/// One session: its hub subscription and ring.
struct Session {
    sub: Subscription,
    waker: Arc<Notify>,
    ring: Ring,
    used: Instant,
}

/// The feed sessions on this replica of one shard.
pub(crate) struct Taps {
    sessions: Mutex<HashMap<u64, Session>>,
    ids: std::collections::hash_map::RandomState,
    opened: std::sync::atomic::AtomicU64,
}

impl Default for Taps {
    fn default() -> Self {
        Taps {
            sessions: Mutex::new(HashMap::new()),
            ids: std::collections::hash_map::RandomState::new(),
            opened: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// A change document (`{old_val, new_val}`) as the ring keeps it, if it belongs to the
/// shard; `Err` for a document that is no change (the hub's overflow notice).
fn wire_change(shard: &Shard, pk: &str, doc: &Datum) -> Result<Option<WireChange>, String> {
    if let Some(e) = doc.get("error") {
        return Err(e.to_json_string());
    }
    let side = |f: &str| doc.get(f).filter(|d| !matches!(d, Datum::Null)).cloned();
    let (old, new) = (side("old_val"), side("new_val"));
    let Some(key) = new.as_ref().or(old.as_ref()).and_then(|d| d.get(pk)) else {
        return Ok(None);
    };
    let encoded = datum::keys::encode_primary(key).map_err(|e| e.message().to_string())?;
    if !shard.range().contains(&encoded) {
        return Ok(None);
    }
    Ok(Some((
        old.map(|d| d.to_json_string()),
        new.map(|d| d.to_json_string()),
    )))
}

impl Session {
    /// Moves what the subscription queued into the ring.
    fn drain(&mut self, shard: &Shard, pk: &str) {
        while let Some(next) = self.sub.next_doc() {
            match next
                .map_err(|e| e.message)
                .and_then(|d| wire_change(shard, pk, &d))
            {
                Ok(Some(c)) => self.ring.push(c),
                Ok(None) => {}
                Err(_) => self.ring.break_off(),
            }
            if self.ring.broken() {
                return;
            }
        }
    }
}

fn parse(text: &str) -> Result<Datum, String> {
    datum::from_json_slice(text.as_bytes()).map_err(|e| format!("malformed datum: {}", e.0))
}

impl Taps {
    fn gone(why: &str) -> FeedAnswer {
        FeedAnswer::Gone(why.to_owned())
    }

    /// Answers `q` on `shard` (this replica, the leader's when routed), whose documents
    /// are keyed by `pk`.
    pub(crate) fn answer(
        &self,
        shard: &Shard,
        pk: &str,
        q: FeedQuery,
    ) -> Result<FeedAnswer, String> {
        let now = Instant::now();
        let mut sessions = self.sessions.lock();
        sessions.retain(|_, s| now.duration_since(s.used) < SESSION_IDLE);
        match q {
            FeedQuery::Open => {
                if sessions.len() >= MAX_SESSIONS {
                    return Err("too many changefeed sessions on this shard".into());
                }
                let waker = Arc::new(Notify::new());
                let mut req = Request::whole_table(Options {
                    queue_size: RING_ENTRIES,
                    ..Options::default()
                });
                req.waker = waker.clone();
                let sub = shard.feeds().subscribe(req).map_err(|e| e.message)?;
                // Not a feed of this server's clients: it keeps none of this server's
                // pollers running (two servers' sessions on each other would keep
                // each other's alive for good), and this server's aborts spare it.
                sub.mark_relay();
                let mut h = self.ids.build_hasher();
                // Random (per process) and distinct: a new leader never takes a
                // session number for one it does not have.
                h.write_u64(
                    self.opened
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                );
                let session = h.finish() | 1;
                sessions.insert(
                    session,
                    Session {
                        sub,
                        waker,
                        ring: Ring::new(RING_ENTRIES, RING_BYTES),
                        used: now,
                    },
                );
                Ok(FeedAnswer::Opened { session })
            }
            FeedQuery::Poll {
                session,
                after,
                upto,
                ..
            } => {
                let Some(s) = sessions.get_mut(&session) else {
                    return Ok(Self::gone("unknown session"));
                };
                s.used = now;
                s.drain(shard, pk);
                match s.ring.poll(after, upto, POLL_ENTRIES, POLL_BYTES) {
                    Ok((last, changes)) => Ok(FeedAnswer::Changes { last, changes }),
                    Err(why) => {
                        sessions.remove(&session);
                        Ok(Self::gone(&format!("{why:?}")))
                    }
                }
            }
            FeedQuery::Snapshot { session, read } => {
                let Some(s) = sessions.get_mut(&session) else {
                    return Ok(Self::gone("unknown session"));
                };
                s.used = now;
                let cut = shard
                    .quiesce(None, || {
                        s.drain(shard, pk);
                        (s.ring.last(), read_initial(shard, read))
                    })
                    .map_err(|e| e.to_string())?;
                if s.ring.broken() {
                    sessions.remove(&session);
                    return Ok(Self::gone("overflow"));
                }
                let (last, docs) = cut;
                Ok(FeedAnswer::Snapshot { last, docs: docs? })
            }
            FeedQuery::Close { session } => {
                sessions.remove(&session);
                Ok(FeedAnswer::Closed)
            }
        }
    }

    /// What a poll waits on before it is answered: `None` when it can be answered now.
    pub(crate) fn wait(
        &self,
        shard: &Shard,
        pk: &str,
        q: &FeedQuery,
    ) -> Option<(Arc<Notify>, Duration)> {
        let FeedQuery::Poll {
            session,
            after,
            wait_ms,
            ..
        } = q
        else {
            return None;
        };
        let mut sessions = self.sessions.lock();
        let s = sessions.get_mut(session)?;
        s.drain(shard, pk);
        if s.ring.has_after(*after) {
            return None;
        }
        let wait = Duration::from_millis(u64::from(*wait_ms)).min(MAX_WAIT);
        Some((s.waker.clone(), wait))
    }
}

/// The documents an initial read asks for, as JSON text, within [`INITIAL_BYTES`].
fn read_initial(shard: &Shard, read: InitialRead) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut keep = |d: Datum| -> Result<(), String> {
        let text = d.to_json_string();
        bytes += text.len();
        if bytes > INITIAL_BYTES {
            return Err(format!(
                "the initial values of a changefeed through a server without a replica of \
                 the shard are limited to {} MiB",
                INITIAL_BYTES >> 20
            ));
        }
        out.push(text);
        Ok(())
    };
    match read {
        InitialRead::Keys(keys) => {
            for k in keys {
                let key = parse(&k)?;
                let Ok(encoded) = datum::keys::encode_primary(&key) else {
                    continue;
                };
                if !shard.range().contains(&encoded) {
                    continue;
                }
                if let Some(d) = shard.get(&key).map_err(|e| e.to_string())? {
                    keep(d)?;
                }
            }
        }
        InitialRead::Range { lower, upper } => {
            let (lower, upper): (Bound<Datum>, Bound<Datum>) = (lower.datum()?, upper.datum()?);
            for d in shard.scan(lower, upper, false).map_err(|e| e.to_string())? {
                keep(d.map_err(|e| e.to_string())?)?;
            }
        }
    }
    Ok(out)
}

impl<T: Transport> ReplicatedShard<T> {
    /// Sends a feed session's request to the shard's leader.
    pub(crate) async fn feed(&self, q: FeedQuery) -> Result<FeedAnswer, RouteError> {
        match self.read(ReadMode::Single, &ReadQuery::Feed(q)).await? {
            ReadAnswer::Feed(a) => Ok(a),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }
}

/// The documents of an answer.
pub(crate) fn docs_of(texts: &[String]) -> Result<Vec<Datum>, String> {
    texts.iter().map(|t| parse(t)).collect()
}

/// A change of an answer: the primary key's encoding and the old and new documents.
pub(crate) type Decoded = (Vec<u8>, Option<Datum>, Option<Datum>);

/// Decodes the changes of an answer, each with its document's encoded primary key.
pub(crate) fn changes_of(pk: &str, changes: &[WireChange]) -> Result<Vec<Decoded>, String> {
    let mut out = Vec::with_capacity(changes.len());
    for (old, new) in changes {
        let old = old.as_deref().map(parse).transpose()?;
        let new = new.as_deref().map(parse).transpose()?;
        let key = new
            .as_ref()
            .or(old.as_ref())
            .and_then(|d| d.get(pk))
            .ok_or("a change without a primary key")?;
        let key = datum::keys::encode_primary(key).map_err(|e| e.message().to_string())?;
        out.push((key, old, new));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::{GroupCommit, StoreChange};

    fn shard() -> Arc<Shard> {
        let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let commit = GroupCommit::start(engine.clone());
        Arc::new(Shard::open(engine, "docs", commit).unwrap())
    }

    fn put(s: &Shard, id: u32, v: u32) {
        let doc = datum::from_json_slice(format!("{{\"id\":{id},\"v\":{v}}}").as_bytes()).unwrap();
        s.write(&Datum::Number(f64::from(id)), StoreChange::Put(doc))
            .unwrap();
    }

    fn open(t: &Taps, s: &Shard) -> u64 {
        match t.answer(s, "id", FeedQuery::Open).unwrap() {
            FeedAnswer::Opened { session } => session,
            a => panic!("{a:?}"),
        }
    }

    fn poll(t: &Taps, s: &Shard, session: u64, after: u64, upto: Option<u64>) -> FeedAnswer {
        let q = FeedQuery::Poll {
            session,
            after,
            upto,
            wait_ms: 0,
        };
        t.answer(s, "id", q).unwrap()
    }

    #[test]
    fn a_session_answers_the_changes_after_it_opened_in_order() {
        let (t, s) = (Taps::default(), shard());
        put(&s, 1, 0);
        let id = open(&t, &s);
        // A session is a relay, not a feed of this server's clients.
        assert_eq!(
            (s.feeds().listeners(), s.feeds().client_listeners()),
            (1, 0)
        );
        let q = FeedQuery::Poll {
            session: id,
            after: 0,
            upto: None,
            wait_ms: 100,
        };
        assert!(
            t.wait(&s, "id", &q).is_some(),
            "nothing to answer yet: it waits"
        );
        put(&s, 1, 1);
        put(&s, 2, 0);
        assert!(t.wait(&s, "id", &q).is_none());
        let FeedAnswer::Changes { last, changes } = poll(&t, &s, id, 0, None) else {
            panic!()
        };
        assert_eq!(last, 2);
        assert_eq!(
            changes,
            vec![
                (
                    Some(r#"{"id":1,"v":0}"#.into()),
                    Some(r#"{"id":1,"v":1}"#.into())
                ),
                (None, Some(r#"{"id":2,"v":0}"#.into())),
            ]
        );
        let decoded = changes_of("id", &changes).unwrap();
        assert_eq!(
            decoded[1].0,
            datum::keys::encode_primary(&Datum::Number(2.0)).unwrap()
        );
        assert!(matches!(
            t.answer(&s, "id", FeedQuery::Close { session: id }),
            Ok(FeedAnswer::Closed)
        ));
        assert!(matches!(poll(&t, &s, id, 2, None), FeedAnswer::Gone(_)));
        assert_eq!(s.feeds().listeners(), 0, "closing unsubscribes");
        assert_eq!(s.feeds().client_listeners(), 0);
    }

    #[test]
    fn a_snapshot_splits_the_changes_before_and_after_it() {
        let (t, s) = (Taps::default(), shard());
        put(&s, 1, 0);
        let id = open(&t, &s);
        put(&s, 2, 0);
        let read = InitialRead::Range {
            lower: KeyBound::Unbounded,
            upper: KeyBound::Unbounded,
        };
        let FeedAnswer::Snapshot { last, docs } = t
            .answer(&s, "id", FeedQuery::Snapshot { session: id, read })
            .unwrap()
        else {
            panic!()
        };
        // The insert of 2 is change 1, and in the documents.
        assert_eq!(last, 1);
        assert_eq!(docs, vec![r#"{"id":1,"v":0}"#, r#"{"id":2,"v":0}"#]);
        put(&s, 3, 0);
        let FeedAnswer::Changes { last, changes } = poll(&t, &s, id, 0, Some(1)) else {
            panic!()
        };
        assert_eq!((last, changes.len()), (1, 1));
        let FeedAnswer::Changes { last, changes } = poll(&t, &s, id, 1, None) else {
            panic!()
        };
        assert_eq!(last, 2);
        assert_eq!(changes, vec![(None, Some(r#"{"id":3,"v":0}"#.into()))]);
        let keys = InitialRead::Keys(vec!["3".into(), "9".into()]);
        let FeedAnswer::Snapshot { docs, .. } = t
            .answer(
                &s,
                "id",
                FeedQuery::Snapshot {
                    session: id,
                    read: keys,
                },
            )
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(docs, vec![r#"{"id":3,"v":0}"#]);
    }

    #[test]
    fn a_session_that_falls_behind_is_gone() {
        let (t, s) = (Taps::default(), shard());
        let id = open(&t, &s);
        for i in 0..(RING_ENTRIES as u32 + 10) {
            put(&s, i, 0);
        }
        assert!(matches!(poll(&t, &s, id, 0, None), FeedAnswer::Gone(_)));
        assert!(matches!(poll(&t, &s, id, 0, None), FeedAnswer::Gone(_)));
        assert!(matches!(poll(&t, &s, 12345, 0, None), FeedAnswer::Gone(_)));
    }
}
