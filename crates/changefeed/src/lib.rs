//! Changefeeds: subscriptions to the changes of one table shard, and their delivery.
//!
//! - [`Hub`]: one per shard. `Shard::modify` calls [`Hub::publish`] after it applied a
//!   write, while it still holds the document's stripe lock, so the changes of one
//!   document reach every subscription in commit order. Point subscriptions are found
//!   by their encoded key in a hash map and range subscriptions in a list, so a write
//!   costs nothing for feeds on other documents, and publishing takes no lock and
//!   allocates nothing while nobody listens.
//! - [`Subscription`]: the reader's handle. It owns a bounded queue (RethinkDB's
//!   `changefeed_queue_size`, default 100,000): when a slow reader lets it overflow, the
//!   queued changes are dropped and the reader gets RethinkDB's
//!   `{error: "Changefeed cache over array size limit, skipped N elements."}` document
//!   next. It formats what it delivers as RethinkDB does: `{old_val, new_val}`, the
//!   `type` field (`include_types`), `{state: ...}` documents (`include_states`) and
//!   the initial values (`include_initial`), and squashes changes per document when
//!   asked. Dropping it unregisters it.
//! - In cluster mode a subscription may be a relay to another server (a remote feed's
//!   session on a shard's leader, `Subscription::mark_relay`): `Hub::client_listeners`
//!   does not count it, and `Hub::abort_all` (RethinkDB's "Changefeed aborted
//!   (unavailable)." for every feed of the table here) spares it.
//! - Per-change transformations (`filter`, `map`, `pluck` before `.changes()`) are a
//!   [`Transform`] evaluated by the publisher on the old and the new value separately;
//!   a value the transform drops or fails on counts as absent, as in RethinkDB.
//!
//! Readers wait asynchronously: every subscription of one query shares a
//! [`tokio::sync::Notify`] that publishers signal after queueing.
//!
//! Departures from RethinkDB: stamps are unnecessary because registration and the
//! initial read happen under the shard's stripe locks (`Shard::quiesce`), so an initial
//! value and the queued changes never overlap or leave a gap.

mod hub;
mod queue;
mod subscription;

pub use hub::Hub;
pub use queue::Change;
pub use subscription::{EqHint, Initial, Options, Probe, Request, Subscription, Target, Transform};
pub use tokio::sync::Notify;

/// RethinkDB's default `changefeed_queue_size`.
pub const DEFAULT_QUEUE_SIZE: usize = 100_000;

/// The error a feed ends with when its table is dropped.
pub const TABLE_DROPPED: &str = "Changefeed aborted (table unavailable).";

/// An error ending a feed (its message is RethinkDB's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedError {
    /// The message.
    pub message: String,
}

impl FeedError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> FeedError {
        FeedError {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FeedError {}
