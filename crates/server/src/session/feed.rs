//! Changefeed cursors: the CONTINUE of a feed waits, asynchronously and without holding
//! an evaluation thread, until its subscriptions have something, then answers with the
//! feed's notes in `"n"`.
//!
//! While it waits, the token's slot is `Slot::Waiting(waker)`: STOP and `Session::close`
//! signal the waker, and the waiting task ends the stream (answering the CONTINUE with an
//! empty SUCCESS_SEQUENCE, as RethinkDB does) and drops the cursor, which unregisters
//! its subscriptions. Deleting the query's `jobs` row sets its flag and signals the
//! waker too; that CONTINUE is answered with RethinkDB's "Query terminated by the
//! `rethinkdb.jobs` table." error. A `squash` interval delays each batch by that much
//! unless a queue fills past half of `changefeed_queue_size` first (RethinkDB's
//! `get_els`). A session of an `/ajax/reql` connection (`Session::new_http`) answers a
//! CONTINUE that found no change within `max_batch_seconds` with an empty
//! SUCCESS_PARTIAL, as RethinkDB's HTTP connections do (`subscription_t::get_els` with
//! `return_empty_normal_batches_t::YES`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proto::ql2::ResponseType;
use proto::response::ResponseWriter;
use reql::terms::changes::FeedInfo;
use reql::ReqlError;

use super::{batch, Cursor, Outcome, Session, Slot};
use crate::wire::{error_frame, finish};

/// The feed part of a cursor.
pub(super) struct FeedCursor {
    /// The query's feeds.
    pub(super) info: FeedInfo,
    /// The last batch stopped at a batch limit with more queued: do not squash-wait.
    mid_batch: bool,
}

impl FeedCursor {
    /// A feed cursor over `info`.
    pub(super) fn new(info: FeedInfo) -> FeedCursor {
        FeedCursor {
            info,
            mid_batch: false,
        }
    }
}

/// Pulls what the feed has now (never waits): the items, and whether the stream ended
/// (a `limit` after the feed delivered its last item).
pub(super) fn next_feed_batch(
    c: &mut Cursor,
    first: bool,
) -> Result<(batch::Items, bool), ReqlError> {
    let memory = c.memory.clone();
    let _memory = memory.enter();
    let limits = batch::Limits::new(&c.opts, first);
    let mut items = batch::Items::default();
    let mut cut = false;
    for d in c.seq.stream.by_ref() {
        items.push(&d?)?;
        if limits.reached(&items) {
            cut = true;
            break;
        }
    }
    let done = c.feed.as_ref().is_some_and(|f| f.info.is_done());
    if let Some(f) = c.feed.as_mut() {
        f.mid_batch = cut && !done;
    }
    Ok((items, done))
}

impl Session {
    /// True while the token's CONTINUE may keep waiting (`cancel` is the query's flag).
    fn feed_live(&self, token: u64, cancel: &AtomicBool) -> bool {
        !self.cancel.load(Ordering::SeqCst)
            && !cancel.load(Ordering::SeqCst)
            && matches!(self.tokens.lock().slots.get(&token), Some(Slot::Waiting(_)))
    }

    /// Ends a feed whose CONTINUE was stopped, whose connection closed, or whose `jobs`
    /// row was deleted (`cancel` set while its slot still waits).
    fn feed_ended(&self, token: u64, cancel: &AtomicBool) -> Vec<u8> {
        let killed = {
            let mut tokens = self.tokens.lock();
            let slot = tokens.slots.get(&token);
            let killed = matches!(slot, Some(Slot::Waiting(_)))
                && cancel.load(Ordering::SeqCst)
                && !self.cancel.load(Ordering::SeqCst);
            if matches!(slot, Some(Slot::Stopped | Slot::Waiting(_))) {
                tokens.slots.remove(&token);
            }
            killed
        };
        if killed {
            return error_frame(token, &super::terminated_by_jobs());
        }
        finish(ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE), token)
    }

    /// CONTINUE on a feed cursor.
    pub(super) async fn continue_feed(self: &Arc<Self>, token: u64, mut cursor: Cursor) -> Vec<u8> {
        let Some(feed) = cursor.feed.as_ref() else {
            return error_frame(token, &reql::error::internal("Not a changefeed cursor."));
        };
        let waker = feed.info.waker.clone();
        let cancel = cursor.cancel.clone();
        // Over HTTP the CONTINUE ends with an empty batch after `max_batch_seconds`.
        let give_up = self
            .empty_feed_batches
            .then(|| tokio::time::Instant::now() + cursor.opts.max_time);
        let squash = (feed.info.min_interval > 0.0 && !feed.mid_batch)
            .then(|| Duration::from_secs_f64(feed.info.min_interval.min(31_536_000.0)));
        {
            let mut tokens = self.tokens.lock();
            if !matches!(tokens.slots.get(&token), Some(Slot::Busy(_))) {
                drop(tokens);
                return self.feed_ended(token, &cancel);
            }
            tokens.slots.insert(token, Slot::Waiting(waker.clone()));
        }
        if let Some(wait) = squash {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                if !self.feed_live(token, &cancel) {
                    return self.feed_ended(token, &cancel);
                }
                if cursor.feed.as_ref().is_some_and(|f| f.info.nearly_full()) {
                    // Let the burst that filled the queue finish before reading it.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    _ = waker.notified() => {}
                }
            }
        }
        loop {
            if !self.feed_live(token, &cancel) {
                return self.feed_ended(token, &cancel);
            }
            let run = self
                .state
                .pool
                .run(move || {
                    let r = next_feed_batch(&mut cursor, false);
                    (r, cursor)
                })
                .await;
            match run {
                Some((Ok((items, done)), c)) => {
                    if !items.is_empty() || done {
                        if !self.feed_live(token, &cancel) {
                            return self.feed_ended(token, &cancel);
                        }
                        return self.respond(token, Outcome::Batch(items, Box::new(c), done), None);
                    }
                    cursor = c;
                }
                Some((Err(e), _)) => {
                    self.tokens.lock().slots.remove(&token);
                    return error_frame(token, &e);
                }
                None => {
                    self.tokens.lock().slots.remove(&token);
                    return error_frame(
                        token,
                        &reql::error::internal("The query failed unexpectedly."),
                    );
                }
            }
            match give_up {
                None => waker.notified().await,
                Some(deadline) => {
                    tokio::select! {
                        _ = waker.notified() => {}
                        _ = tokio::time::sleep_until(deadline) => {
                            if !self.feed_live(token, &cancel) {
                                return self.feed_ended(token, &cancel);
                            }
                            let empty = batch::Items::default();
                            return self.respond(token, Outcome::Batch(empty, Box::new(cursor), false), None);
                        }
                    }
                }
            }
        }
    }
}
