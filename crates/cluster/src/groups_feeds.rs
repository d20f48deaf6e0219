//! Changefeeds on a replicated table ([`TableFeeds`]): what keeps a server's feeds on
//! the table fed and ends them when a shard's primary is lost.
//!
//! While at least one feed on the table is open here (the table hub has listeners that
//! are not relays to other servers: `Hub::client_listeners`),
//! the table has one supervisor generation ([`Running`]):
//!
//! * per shard this server holds no replica of, a poller: a session on the shard's
//!   leader (`crate::replica::tap`), long-polled for the changes after the last one it
//!   published, which it publishes to the table's local hub, so filters, squash, limits
//!   and formatting are the local feed machinery's;
//! * if the server holds replicas, a watcher of their Raft groups.
//!
//! Every feed on the table ends with "Changefeed aborted (unavailable)." (RethinkDB's
//! text, a `ReqlOpFailedError`: feeds are tied to the primary, the client
//! resubscribes) when a poll fails (no leader reachable within the route's deadline,
//! the leader changed and does not know the session, its ring overflowed), or a local
//! replica's group has been without a leader — or, leading, without a quorum — for
//! longer than the route's deadline ([`Outage`]). The pollers stop when the last feed
//! closes (checked before each poll, so within one poll's wait), closing their sessions.
//!
//! Initial values of remote shards: `prepare` locks each poller's cursor (the poller
//! publishes only under it, and does not hold it while its long poll waits on the
//! leader, so a cut never waits for that poll), has the leader cut a snapshot in the session's numbering
//! (its last change `c`), publishes the session's changes up to `c`, and only then is
//! the feed registered on the hub (with the local shards quiesced, `crate::feeds`), the
//! cursors still locked: changes up to `c` are in the initial values and were published
//! before the feed existed; those after `c` are published after it. No overlap, no gap.
//!
//! Invariants: one lock (`state`) orders starting, stopping and aborting a generation
//! and registering a feed, so a feed is never registered on a generation that has
//! stopped; a poller takes `state` only without its cursor held. The number of running
//! pollers is `TableCounters::feed_pollers` (shown in `rethinkdb.stats`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use changefeed::Hub;
use datum::Datum;
use replication::SharedTransport;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::ReplicatedTable;
use crate::replica::tap::{changes_of, docs_of, FeedAnswer, FeedQuery, InitialRead};
use crate::replica::{wait_for, Op, ReplicatedShard, RouteError};
use crate::system::TableCounters;

/// RethinkDB's error ending a feed whose shard's primary was lost.
pub(crate) const UNAVAILABLE: &str = "Changefeed aborted (unavailable).";
/// How long one poll waits on the leader for a change.
const POLL_WAIT_MS: u32 = 500;
/// How often the watcher looks at the local replicas' groups.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// A table's changefeed supervisor on this server.
#[derive(Default)]
pub(crate) struct TableFeeds {
    state: Arc<Mutex<Option<Arc<Running>>>>,
}

/// One generation of pollers and watcher, from the first feed to the last (or an abort).
struct Running {
    stop: AtomicBool,
    /// Per shard: the poller's cursor, for shards this server holds no replica of.
    cursors: Vec<Option<Arc<Mutex<Cursor>>>>,
}

/// Where a poller is in its session.
struct Cursor {
    session: u64,
    /// The last change published.
    pos: u64,
}

/// What the tasks of a generation share.
#[derive(Clone)]
struct Ctx {
    table: Arc<ReplicatedTable>,
    hub: Arc<Hub>,
    counters: Arc<TableCounters>,
    state: Arc<Mutex<Option<Arc<Running>>>>,
}

type Slot = Arc<OnceLock<ReplicatedShard<SharedTransport>>>;

/// A feed about to be registered: the generation and cursors stay locked until it is
/// dropped; the initial documents of each remote shard (by shard position).
pub(crate) struct Prepared {
    _state: OwnedMutexGuard<Option<Arc<Running>>>,
    _cursors: Vec<OwnedMutexGuard<Cursor>>,
    pub(crate) remote: Vec<Option<Vec<Datum>>>,
}

/// Tracks how long a group has been unavailable (pure).
#[derive(Debug, Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
}

impl Outage {
    /// Notes whether the group is available at `now`; true once it has been
    /// unavailable for longer than `limit`.
    pub(crate) fn observe(&mut self, available: bool, now: Instant, limit: Duration) -> bool {
        if available {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        now.duration_since(since) > limit
    }
}

/// Whether a member sees a primary: a leader elsewhere, or itself leading with a
/// quorum heard from within `limit_ms`.
pub(crate) fn sees_primary(
    me: u64,
    leader: Option<u64>,
    leading: bool,
    quorum_ack_ms: Option<u64>,
    limit_ms: u64,
) -> bool {
    match leader {
        None => false,
        Some(l) if l == me => leading && quorum_ack_ms.is_some_and(|ms| ms <= limit_ms),
        Some(_) => true,
    }
}

fn unavailable() -> reql::ReqlError {
    reql::error::op_failed(UNAVAILABLE)
}

impl Ctx {
    fn slot(&self, i: usize) -> Option<&Slot> {
        self.table.slots.get(i)
    }

    /// Publishes a poll's changes that the cursor has not published yet to the local
    /// hub, on the blocking pool: a feed's filter may read a table, which waits on this
    /// runtime, and on an async worker (the poller's) that wait held the hub while a
    /// feed dropped elsewhere waited for it, until no worker was left to answer (seen
    /// with two workers: every query of the server hung).
    async fn publish(
        &self,
        pk: &str,
        answer: FeedAnswer,
        cursor: &mut Cursor,
    ) -> Result<(), String> {
        match answer {
            FeedAnswer::Changes { last, changes } => {
                let skip = unpublished(cursor.pos, last, changes.len())?;
                let changes = changes_of(pk, &changes[skip..])?;
                let hub = self.hub.clone();
                tokio::task::spawn_blocking(move || {
                    for (key, old, new) in changes {
                        hub.publish(&key, old.as_ref(), new.as_ref());
                    }
                })
                .await
                .map_err(|e| format!("publishing changes failed: {e}"))?;
                cursor.pos = cursor.pos.max(last);
                Ok(())
            }
            FeedAnswer::Gone(why) => Err(why),
            _ => Err("answer of the wrong kind".into()),
        }
    }

    /// Ends this generation and every feed on the table, if it is still the current one.
    async fn abort(&self, running: &Arc<Running>, why: &str) {
        let mut state = self.state.lock().await;
        end(&mut state, running);
        tracing::info!("changefeeds on a replicated table aborted: {why}");
        self.hub.abort_all(UNAVAILABLE);
    }

    /// Ends this generation if no feed is open (under the state lock, so that no feed
    /// registers meanwhile); whether it ended.
    async fn stop_if_idle(&self, running: &Arc<Running>) -> bool {
        let mut state = self.state.lock().await;
        if self.hub.client_listeners() == 0 {
            end(&mut state, running);
        }
        running.stop.load(Ordering::SeqCst)
    }
}

/// How many of a poll answer's `len` changes, numbered up to `last`, the cursor at `pos`
/// published already (an answer to a poll that a snapshot's polls overtook starts
/// before `pos`); an answer starting after `pos + 1` would leave a gap (pure).
fn unpublished(pos: u64, last: u64, len: usize) -> Result<usize, String> {
    let count = u64::try_from(len).map_err(|_| "a poll answer too long")?;
    let before_first = last
        .checked_sub(count)
        .ok_or("a poll answer numbered below zero")?;
    if before_first > pos {
        return Err(format!(
            "a poll answer starts after change {before_first}, this server has {pos}"
        ));
    }
    Ok(usize::try_from(pos - before_first).map_or(len, |skip| skip.min(len)))
}

/// Marks `running` stopped and forgets it if it is current.
fn end(state: &mut Option<Arc<Running>>, running: &Arc<Running>) {
    running.stop.store(true, Ordering::SeqCst);
    if state.as_ref().is_some_and(|r| Arc::ptr_eq(r, running)) {
        *state = None;
    }
}

impl ReplicatedTable {
    /// This table's replicas moved (it is replaced by another `ReplicatedTable`): its
    /// pollers stop and every feed on `hub` ends with "Changefeed aborted
    /// (unavailable).", as RethinkDB's feeds end when their primaries change; clients
    /// resubscribe through the new placement.
    pub(crate) fn end_feeds(&self, hub: &Arc<Hub>) {
        let (state, hub) = (self.feeds.state.clone(), hub.clone());
        self.runtime.spawn(async move {
            let mut state = state.lock().await;
            if let Some(running) = state.take() {
                running.stop.store(true, Ordering::SeqCst);
            }
            hub.abort_all(UNAVAILABLE);
        });
    }

    /// Gets a changefeed on this table ready to be registered on `hub`: the pollers of
    /// remote shards running, and with `initial`, their initial documents cut
    /// consistently with what they publish (see the module note). Hold the answer
    /// until the feed is registered.
    pub(crate) fn prepare_feed(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        counters: &Arc<TableCounters>,
        initial: Option<InitialRead>,
    ) -> reql::Result<Prepared> {
        let ctx = Ctx {
            table: self.clone(),
            hub: hub.clone(),
            counters: counters.clone(),
            state: self.feeds.state.clone(),
        };
        let answer = wait_for(&self.runtime, async move { prepare(ctx, initial).await });
        answer.unwrap_or_else(|| Err(RouteError::LostContact(Op::Read).to_reql()))
    }
}

async fn prepare(ctx: Ctx, initial: Option<InitialRead>) -> reql::Result<Prepared> {
    let mut state = ctx.state.clone().lock_owned().await;
    let running = match state.as_ref() {
        Some(r) if !r.stop.load(Ordering::SeqCst) => r.clone(),
        _ => {
            let r = start(&ctx).await?;
            *state = Some(r.clone());
            r
        }
    };
    let shards = ctx.table.slots.len();
    let mut prepared = Prepared {
        _state: state,
        _cursors: Vec::new(),
        remote: vec![None; shards],
    };
    let Some(read) = initial else {
        return Ok(prepared);
    };
    for (i, cursor) in running.cursors.iter().enumerate() {
        let (Some(cursor), Some(rs)) = (cursor, ctx.slot(i).and_then(|s| s.get())) else {
            continue;
        };
        let mut c = cursor.clone().lock_owned().await;
        let cut = snapshot(&ctx, rs, &mut c, read.clone()).await;
        match cut {
            Ok(docs) => prepared.remote[i] = Some(docs),
            Err(why) => {
                // The generation is broken: end it and its feeds (the state is held).
                running.stop.store(true, Ordering::SeqCst);
                *prepared._state = None;
                ctx.hub.abort_all(UNAVAILABLE);
                tracing::info!("changefeeds on a replicated table aborted: {why}");
                return Err(unavailable());
            }
        }
        prepared._cursors.push(c);
    }
    Ok(prepared)
}

/// Cuts a remote shard's initial values in its session and publishes its changes up to
/// the cut.
async fn snapshot(
    ctx: &Ctx,
    rs: &ReplicatedShard<SharedTransport>,
    c: &mut Cursor,
    read: InitialRead,
) -> Result<Vec<Datum>, String> {
    let session = c.session;
    let q = FeedQuery::Snapshot { session, read };
    let (last, docs) = match rs.feed(q).await.map_err(|e| e.to_reql().message)? {
        FeedAnswer::Snapshot { last, docs } => (last, docs_of(&docs)?),
        FeedAnswer::Gone(why) => return Err(why),
        _ => return Err("answer of the wrong kind".into()),
    };
    while c.pos < last {
        let q = FeedQuery::Poll {
            session,
            after: c.pos,
            upto: Some(last),
            wait_ms: 0,
        };
        let answer = rs.feed(q).await.map_err(|e| e.to_reql().message)?;
        let before = c.pos;
        ctx.publish(rs.primary_key(), answer, c).await?;
        if c.pos == before {
            return Err("a poll up to a snapshot made no progress".into());
        }
    }
    Ok(docs)
}

/// Starts a generation: a session and a poller per remote shard, a watcher of the
/// local ones.
async fn start(ctx: &Ctx) -> reql::Result<Arc<Running>> {
    let mut cursors = Vec::with_capacity(ctx.table.slots.len());
    let mut local = false;
    let any_remote = ctx.table.has_remote_shards();
    for slot in &ctx.table.slots {
        let remote = slot.get().filter(|rs| any_remote && rs.raft().is_none());
        let Some(rs) = remote else {
            local = true;
            cursors.push(None);
            continue;
        };
        let session = match rs.feed(FeedQuery::Open).await {
            Ok(FeedAnswer::Opened { session }) => session,
            Ok(_) => return Err(unavailable()),
            Err(e) => return Err(e.to_reql()),
        };
        cursors.push(Some(Arc::new(Mutex::new(Cursor { session, pos: 0 }))));
    }
    let running = Arc::new(Running {
        stop: AtomicBool::new(false),
        cursors,
    });
    for (i, cursor) in running.cursors.iter().enumerate() {
        if let Some(cursor) = cursor {
            ctx.counters.feed_pollers.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(poll(ctx.clone(), running.clone(), i, cursor.clone()));
        }
    }
    if local {
        tokio::spawn(watch(ctx.clone(), running.clone()));
    }
    Ok(running)
}

/// A remote shard's poller: publishes its session's changes until the generation stops.
async fn poll(ctx: Ctx, running: Arc<Running>, shard: usize, cursor: Arc<Mutex<Cursor>>) {
    let Some(rs) = ctx.slot(shard).and_then(|s| s.get()) else {
        ctx.counters.feed_pollers.fetch_sub(1, Ordering::Relaxed);
        return;
    };
    let failed = loop {
        if running.stop.load(Ordering::SeqCst)
            || (ctx.hub.client_listeners() == 0 && ctx.stop_if_idle(&running).await)
        {
            break None;
        }
        let (session, after) = {
            let c = cursor.lock().await;
            (c.session, c.pos)
        };
        let q = FeedQuery::Poll {
            session,
            after,
            upto: None,
            wait_ms: POLL_WAIT_MS,
        };
        // The cursor is not held while the leader waits for a change: a new feed's
        // `prepare` takes it at once and its snapshot's polls overtake this one, whose
        // answer then holds changes published already (`unpublished` skips them).
        let answer = rs.feed(q).await.map_err(|e| e.to_reql().message);
        let mut c = cursor.lock().await;
        if running.stop.load(Ordering::SeqCst) {
            break None;
        }
        let published = match answer {
            Ok(a) => ctx.publish(rs.primary_key(), a, &mut c).await,
            Err(why) => Err(why),
        };
        if let Err(why) = published {
            break Some(why);
        }
    };
    match failed {
        Some(why) => ctx.abort(&running, &why).await,
        None => {
            let session = cursor.lock().await.session;
            let _ = rs.feed(FeedQuery::Close { session }).await;
        }
    }
    ctx.counters.feed_pollers.fetch_sub(1, Ordering::Relaxed);
    tracing::debug!("changefeed poller of shard {shard} stopped");
}

/// The watcher of this server's replicas: ends the feeds when one's group has been
/// without a primary for longer than the route's deadline.
async fn watch(ctx: Ctx, running: Arc<Running>) {
    let limit = ctx.table.wait;
    let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    let mut outages: Vec<Outage> = ctx.table.slots.iter().map(|_| Outage::default()).collect();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        if running.stop.load(Ordering::SeqCst)
            || (ctx.hub.client_listeners() == 0 && ctx.stop_if_idle(&running).await)
        {
            return;
        }
        let now = Instant::now();
        for (slot, outage) in ctx.table.slots.iter().zip(&mut outages) {
            let Some(raft) = slot.get().and_then(|rs| rs.raft()) else {
                continue;
            };
            let m = raft.metrics().borrow().clone();
            let leading = m.state == replication::openraft::ServerState::Leader;
            let ok = sees_primary(
                m.id,
                m.current_leader,
                leading,
                m.millis_since_quorum_ack,
                limit_ms,
            );
            if outage.observe(ok, now, limit) {
                ctx.abort(&running, "a local replica's group has no primary")
                    .await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_overtaken_by_a_snapshot_publishes_only_what_is_new() {
        // Changes 4..=6 after change 3: all new.
        assert_eq!(unpublished(3, 6, 3), Ok(0));
        // A long poll after 1 answered 2..=6 while a snapshot published up to 4.
        assert_eq!(unpublished(4, 6, 5), Ok(3));
        // Nothing new, or nothing at all.
        assert_eq!(unpublished(6, 6, 5), Ok(5));
        assert_eq!(unpublished(6, 4, 0), Ok(0));
        // A gap (change 4 missing) or a malformed answer is an error, never skipped.
        assert!(unpublished(3, 8, 3).is_err());
        assert!(unpublished(3, 2, 5).is_err());
    }

    #[test]
    fn an_outage_counts_from_its_first_observation_and_resets() {
        let limit = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut o = Outage::default();
        assert!(!o.observe(true, t0, limit));
        assert!(!o.observe(false, t0 + Duration::from_secs(1), limit));
        assert!(!o.observe(false, t0 + Duration::from_secs(11), limit));
        assert!(o.observe(false, t0 + Duration::from_secs(12), limit));
        assert!(!o.observe(true, t0 + Duration::from_secs(13), limit));
        assert!(!o.observe(false, t0 + Duration::from_secs(20), limit));
    }

    #[test]
    fn a_primary_is_a_leader_elsewhere_or_this_leader_with_a_recent_quorum() {
        assert!(!sees_primary(1, None, false, None, 1000));
        assert!(sees_primary(1, Some(2), false, None, 1000));
        assert!(sees_primary(1, Some(1), true, Some(10), 1000));
        assert!(!sees_primary(1, Some(1), true, Some(5000), 1000));
        assert!(!sees_primary(1, Some(1), true, None, 1000));
        assert!(!sees_primary(1, Some(1), false, Some(10), 1000));
    }
}
