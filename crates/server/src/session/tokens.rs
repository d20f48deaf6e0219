//! The token table of one session: what each token in use is doing, and the answers it
//! still owes.
//!
//! RethinkDB serialises the queries of one token on a lock (`query_cache_t::ref_t`): a
//! CONTINUE that arrives while the token's previous batch is still being computed waits
//! its turn and is then served, and a STOP interrupts the query at once but is answered
//! only after the query's own answer. Ponder decides every CONTINUE and STOP on the
//! connection's reader, in frame order, against this table (`claim_continue`, `stop`):
//! what cannot be answered yet is queued in `owed` and served in order by the task that
//! finishes the query in flight (`Session::serve_owed`, through `next_owed`). So a
//! token's answers never overtake each other, and a CONTINUE is never refused with
//! "Token N not in stream cache." while its cursor is still open.
//!
//! Invariant: while a token has answers owed, nothing new starts on it (a START is a
//! duplicate, a CONTINUE or STOP joins the queue); only `next_owed` takes them, after the
//! query in flight has left its slot. A cursor taken out of the table is returned to
//! the caller to be dropped outside the lock (its job guard takes the jobs registry's).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use proto::ql2::ResponseType;
use proto::response::ResponseWriter;
use reql::ReqlError;
use tokio::sync::Notify;

use super::Cursor;
use crate::wire::{error_frame, finish};

/// What a token in use is doing. `Running` and `Busy` hold the query's interruption
/// flag, which STOP and `close` set; a deleted `jobs` row sets it too (`job_deleted`).
pub(super) enum Slot {
    /// Its START is being evaluated.
    Running(Arc<AtomicBool>),
    /// A cursor waiting for CONTINUE.
    Idle(Cursor),
    /// A CONTINUE is being evaluated.
    Busy(Arc<AtomicBool>),
    /// STOP arrived while it was running: drop whatever it produces.
    Stopped,
    /// A changefeed's CONTINUE waiting for changes; signal to wake it (STOP, close,
    /// a deleted `jobs` row).
    Waiting(Arc<Notify>),
    /// Its `jobs` row was deleted while the cursor was idle: the cursor is gone and the
    /// next CONTINUE is refused as RethinkDB refuses it.
    Killed,
}

impl Slot {
    /// True while a START or CONTINUE of the token is being answered.
    fn in_flight(&self) -> bool {
        matches!(
            self,
            Slot::Running(_) | Slot::Busy(_) | Slot::Stopped | Slot::Waiting(_)
        )
    }
}

/// A request waiting for the token's query in flight to finish.
enum Owed {
    Continue,
    Stop,
}

/// What to do with a CONTINUE or STOP (or an owed one).
pub(super) enum Claim {
    /// Compute the next batch of this cursor now; the token's slot is `Busy`.
    Run(Cursor),
    /// Answer with this frame now; drop the cursor, if any, outside the lock.
    Answer(Vec<u8>, Option<Cursor>),
    /// Queued behind the query in flight, which answers it when it finishes; drop the
    /// cursor, if any (a STOP closed it), outside the lock.
    Queued(Option<Cursor>),
}

/// Every token of a session in use, and the answers each owes.
#[derive(Default)]
pub(super) struct Tokens {
    /// What each token is doing.
    pub(super) slots: HashMap<u64, Slot>,
    /// CONTINUEs and STOPs to answer, in arrival order, once the query in flight ends.
    owed: HashMap<u64, VecDeque<Owed>>,
}

/// RethinkDB's answer to a START or NOREPLY_WAIT on a token in use, and to a CONTINUE
/// whose query ended before its turn came (`query_cache_t::ref_t::fill_response`).
pub(super) fn duplicate_token(token: u64) -> Vec<u8> {
    error_frame(
        token,
        &ReqlError::new(
            reql::ErrorKind::Client,
            format!("ERROR: duplicate token {token}"),
        ),
    )
}

/// RethinkDB's answer to a CONTINUE or STOP on a token with no query.
fn not_in_cache(token: u64) -> Vec<u8> {
    error_frame(
        token,
        &ReqlError::new(
            reql::ErrorKind::Client,
            format!("Token {token} not in stream cache."),
        ),
    )
}

/// The answer to STOP: an empty SUCCESS_SEQUENCE.
fn stopped(token: u64) -> Vec<u8> {
    finish(ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE), token)
}

impl Tokens {
    /// True while `token` is in use (a START on it is a duplicate).
    pub(super) fn in_use(&self, token: u64) -> bool {
        self.slots.contains_key(&token) || self.owed.contains_key(&token)
    }

    /// Decides a CONTINUE that just arrived.
    pub(super) fn claim_continue(&mut self, token: u64) -> Claim {
        if let Some(q) = self.owed.get_mut(&token) {
            q.push_back(Owed::Continue);
            return Claim::Queued(None);
        }
        match self.slots.remove(&token) {
            Some(slot) if slot.in_flight() => {
                self.slots.insert(token, slot);
                self.owed.insert(token, VecDeque::from([Owed::Continue]));
                Claim::Queued(None)
            }
            None => Claim::Answer(not_in_cache(token), None),
            Some(slot) => self.take_turn(token, slot),
        }
    }

    /// Decides a STOP that just arrived: it ends the query at once (a request in
    /// flight is interrupted, an idle cursor closed, CONTINUEs still queued will be
    /// refused) and is answered after every earlier request of the token.
    pub(super) fn stop(&mut self, token: u64) -> Claim {
        let (in_flight, cursor) = match self.slots.remove(&token) {
            Some(slot) if slot.in_flight() => {
                match slot {
                    // The evaluation stops at its next check and answers with an empty
                    // SUCCESS_SEQUENCE, as RethinkDB does.
                    Slot::Running(cancel) | Slot::Busy(cancel) => {
                        cancel.store(true, Ordering::SeqCst)
                    }
                    Slot::Waiting(waker) => waker.notify_one(),
                    _ => {}
                }
                self.slots.insert(token, Slot::Stopped);
                (true, None)
            }
            Some(Slot::Idle(c)) => (false, Some(c)),
            // A cursor its `jobs` row ended: STOP just forgets it, as RethinkDB does.
            Some(_) => (false, None),
            None if self.owed.contains_key(&token) => (false, None),
            // RethinkDB's STOP looks the token up (`query_cache_t::stop_query`).
            None => return Claim::Answer(not_in_cache(token), None),
        };
        if in_flight || self.owed.contains_key(&token) {
            self.owed.entry(token).or_default().push_back(Owed::Stop);
            return Claim::Queued(cursor);
        }
        Claim::Answer(stopped(token), cursor)
    }

    /// The next owed request of `token`, once its query in flight has finished; None
    /// when nothing is owed (or the token is busy again, whose finisher serves the rest).
    pub(super) fn next_owed(&mut self, token: u64) -> Option<Claim> {
        let q = self.owed.get_mut(&token)?;
        if self.slots.get(&token).is_some_and(Slot::in_flight) {
            return None;
        }
        let Some(next) = q.pop_front() else {
            self.owed.remove(&token);
            return None;
        };
        if q.is_empty() {
            self.owed.remove(&token);
        }
        let slot = self.slots.remove(&token);
        Some(match (next, slot) {
            (Owed::Stop, Some(Slot::Idle(c))) => Claim::Answer(stopped(token), Some(c)),
            (Owed::Stop, _) => Claim::Answer(stopped(token), None),
            (Owed::Continue, None) => Claim::Answer(duplicate_token(token), None),
            (Owed::Continue, Some(slot)) => self.take_turn(token, slot),
        })
    }

    /// A CONTINUE's turn on a token that is not in flight (`slot` was removed).
    fn take_turn(&mut self, token: u64, slot: Slot) -> Claim {
        match slot {
            // Its `jobs` row was deleted between batches: RethinkDB ends the cursor and
            // answers its next CONTINUE so (`query_cache_t::ref_t::fill_response`).
            Slot::Idle(c) if c.cancel.load(Ordering::SeqCst) => {
                Claim::Answer(duplicate_token(token), Some(c))
            }
            Slot::Idle(c) => {
                self.slots.insert(token, Slot::Busy(c.cancel.clone()));
                Claim::Run(c)
            }
            Slot::Killed => Claim::Answer(duplicate_token(token), None),
            other => {
                // In flight: callers checked, but keep the slot and queue the request.
                self.slots.insert(token, other);
                self.owed
                    .entry(token)
                    .or_default()
                    .push_front(Owed::Continue);
                Claim::Queued(None)
            }
        }
    }

    /// Empties the table (the connection closed): the slots, for the caller to drop.
    pub(super) fn clear(&mut self) -> HashMap<u64, Slot> {
        self.owed.clear();
        std::mem::take(&mut self.slots)
    }
}
