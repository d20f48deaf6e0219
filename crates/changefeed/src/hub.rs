//! `Hub`: the subscriptions of one shard and the publishing of its changes to them.
//!
//! Invariants: `listeners` counts the registered subscriptions, so `publish` returns
//! before taking any lock when it is zero; a subscription is registered under every key
//! of its point target, or once in the equality index when it carries an [`EqHint`],
//! or once in the range list, and removed when its handle drops. Publishing runs on the
//! writer's thread under its stripe lock: it evaluates each interested subscription's
//! transform and queues the result, nothing more.
//!
//! The equality index makes idle filtered feeds free: a feed such as
//! `filter(row('id') == 7)` is found through (field, value) from the old and the new
//! document, so a write evaluates only the filters that can match it, whatever the
//! number of feeds (anything else falls back to the range list and evaluation).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use datum::Datum;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::queue::{Change, ChangeQueue};
use crate::subscription::{EqHint, Request, Subscription, Target, Transform};
use crate::{FeedError, TABLE_DROPPED};

/// What a subscription listens to, in encoded keys.
pub(crate) enum KeyTarget {
    /// These documents.
    Keys(Vec<Vec<u8>>),
    /// Documents between two bounds.
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

impl KeyTarget {
    fn contains(&self, k: &[u8]) -> bool {
        match self {
            KeyTarget::Keys(keys) => keys.iter().any(|x| x.as_slice() == k),
            KeyTarget::Range(lo, hi) => {
                let above = match lo {
                    Bound::Unbounded => true,
                    Bound::Included(b) => k >= b.as_slice(),
                    Bound::Excluded(b) => k > b.as_slice(),
                };
                let below = match hi {
                    Bound::Unbounded => true,
                    Bound::Included(b) => k <= b.as_slice(),
                    Bound::Excluded(b) => k < b.as_slice(),
                };
                above && below
            }
        }
    }
}

/// A scalar value as a hash key, equal exactly when ReQL's `eq` says so.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum EqKey {
    Bool(bool),
    /// The bits of the number, with -0 read as 0.
    Num(u64),
    Str(datum::Str),
}

impl EqKey {
    /// The key of a bool, number or string; `None` for anything else.
    pub(crate) fn of(d: &Datum) -> Option<EqKey> {
        match d {
            Datum::Bool(b) => Some(EqKey::Bool(*b)),
            Datum::Number(n) => Some(EqKey::Num(if *n == 0.0 { 0.0f64 } else { *n }.to_bits())),
            Datum::String(s) => Some(EqKey::Str(s.clone())),
            _ => None,
        }
    }
}

/// The queue and status of one subscription, behind its mutex.
pub(crate) struct QueueState {
    pub(crate) queue: ChangeQueue,
    /// Changes dropped by overflow and not yet reported to the reader.
    pub(crate) skipped: usize,
    /// Set when the feed ends (its table was dropped).
    pub(crate) error: Option<FeedError>,
}

/// The part of a subscription the publisher sees.
pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) target: KeyTarget,
    pub(crate) transform: Option<Transform>,
    /// Where the subscription sits in the equality index.
    pub(crate) eq: Option<(String, EqKey)>,
    pub(crate) queue_size: usize,
    pub(crate) state: Mutex<QueueState>,
    pub(crate) waker: Arc<Notify>,
    /// A relay to another server (`Subscription::mark_relay`).
    pub(crate) relay: AtomicBool,
}

impl Shared {
    /// Queues one change if the transformed values make one; wakes the reader.
    fn offer(&self, key: &[u8], old: Option<&Datum>, new: Option<&Datum>) {
        let (old, new) = match &self.transform {
            None => (old.cloned(), new.cloned()),
            Some(t) => (old.and_then(|d| t(d)), new.and_then(|d| t(d))),
        };
        if (old.is_none() && new.is_none()) || (old.is_some() && old == new) {
            return;
        }
        {
            let mut st = self.state.lock();
            if st.error.is_some() {
                return;
            }
            st.queue.push(key, Change { old, new });
            let len = st.queue.len();
            if len > self.queue_size {
                st.skipped += len;
                st.queue.clear();
            }
        }
        self.waker.notify_one();
    }

    /// Ends the feed with `e` and wakes the reader.
    pub(crate) fn fail(&self, e: FeedError) {
        {
            let mut st = self.state.lock();
            st.queue.clear();
            st.error.get_or_insert(e);
        }
        self.waker.notify_one();
    }
}

#[derive(Default)]
struct Subs {
    /// Point subscriptions by encoded primary key.
    points: HashMap<Vec<u8>, Vec<Arc<Shared>>>,
    /// Range and whole-table subscriptions.
    ranges: Vec<Arc<Shared>>,
    /// Subscriptions with an equality hint: field, then value.
    eq: HashMap<String, HashMap<EqKey, Vec<Arc<Shared>>>>,
}

fn offer_in(list: Option<&Vec<Arc<Shared>>>, key: &[u8], old: Option<&Datum>, new: Option<&Datum>) {
    for s in list.into_iter().flatten() {
        if s.target.contains(key) {
            s.offer(key, old, new);
        }
    }
}

/// The subscriptions of one shard.
#[derive(Default)]
pub struct Hub {
    listeners: AtomicUsize,
    /// How many of the listeners relay changes to other servers (`relay_opened`).
    relays: AtomicUsize,
    closed: AtomicBool,
    next_id: AtomicU64,
    subs: RwLock<Subs>,
}

fn encode(d: &Datum) -> Result<Vec<u8>, FeedError> {
    datum::keys::encode_bound(d).map_err(|e| FeedError::new(e.message()))
}

fn encode_bound(b: &Bound<Datum>) -> Result<Bound<Vec<u8>>, FeedError> {
    Ok(match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(d) => Bound::Included(encode(d)?),
        Bound::Excluded(d) => Bound::Excluded(encode(d)?),
    })
}

impl Hub {
    /// A hub with no subscriptions.
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// The number of registered subscriptions.
    pub fn listeners(&self) -> usize {
        self.listeners.load(Ordering::Acquire)
    }

    /// Counts a relay (`Subscription::mark_relay`, after it registered).
    pub(crate) fn relay_opened(&self) {
        self.relays.fetch_add(1, Ordering::AcqRel);
    }

    /// Uncounts a relay (its subscription unregistered).
    pub(crate) fn relay_closed(&self) {
        self.relays.fetch_sub(1, Ordering::AcqRel);
    }

    /// The registered subscriptions that are not relays: the feeds of this server's
    /// clients (an overestimate while a relay registers or unregisters, never an
    /// underestimate).
    pub fn client_listeners(&self) -> usize {
        let relays = self.relays.load(Ordering::Acquire);
        self.listeners().saturating_sub(relays)
    }

    /// Delivers the change of the document under the encoded key `key` to every
    /// subscription that covers it. Called after the write was applied, under the
    /// document's lock.
    pub fn publish(&self, key: &[u8], old: Option<&Datum>, new: Option<&Datum>) {
        if self.listeners.load(Ordering::Acquire) == 0 {
            return;
        }
        let subs = self.subs.read();
        if let Some(list) = subs.points.get(key) {
            for s in list {
                s.offer(key, old, new);
            }
        }
        for s in &subs.ranges {
            if s.target.contains(key) {
                s.offer(key, old, new);
            }
        }
        for (field, by_value) in &subs.eq {
            let ko = old.and_then(|d| d.get(field)).and_then(EqKey::of);
            let kn = new.and_then(|d| d.get(field)).and_then(EqKey::of);
            if let Some(k) = &ko {
                offer_in(by_value.get(k), key, old, new);
            }
            if let Some(k) = &kn {
                if ko.as_ref() != Some(k) {
                    offer_in(by_value.get(k), key, old, new);
                }
            }
        }
    }

    /// Ends every subscription with RethinkDB's table-dropped error; later
    /// subscriptions fail at once.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let subs = self.subs.read();
        for list in subs.points.values() {
            for s in list {
                s.fail(FeedError::new(TABLE_DROPPED));
            }
        }
        for s in &subs.ranges {
            s.fail(FeedError::new(TABLE_DROPPED));
        }
        for s in subs.eq.values().flat_map(|m| m.values()).flatten() {
            s.fail(FeedError::new(TABLE_DROPPED));
        }
    }

    /// Ends every current subscription but relays with the error `message`
    /// (RethinkDB's "Changefeed aborted (unavailable)." when a shard's primary is
    /// lost); unlike `close`, later subscriptions are accepted.
    pub fn abort_all(&self, message: &str) {
        let subs = self.subs.read();
        let all = subs
            .points
            .values()
            .flatten()
            .chain(&subs.ranges)
            .chain(subs.eq.values().flat_map(|m| m.values()).flatten());
        for s in all.filter(|s| !s.relay.load(Ordering::Acquire)) {
            s.fail(FeedError::new(message));
        }
    }

    /// Registers a subscription; changes published from now on reach it. The caller
    /// reads the initial values (if any) before a concurrent write can publish, then
    /// hands them to [`Subscription::set_initial`].
    pub fn subscribe(self: &Arc<Self>, req: Request) -> Result<Subscription, FeedError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(FeedError::new(TABLE_DROPPED));
        }
        let (target, point) = match &req.target {
            Target::Keys(keys) => {
                let mut enc: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
                for k in keys {
                    let e = encode(k)?;
                    if !enc.contains(&e) {
                        enc.push(e);
                    }
                }
                (KeyTarget::Keys(enc), true)
            }
            Target::Range { lower, upper } => (
                KeyTarget::Range(encode_bound(lower)?, encode_bound(upper)?),
                false,
            ),
        };
        let eq = match (&req.hint, point) {
            (Some(EqHint { field, value }), false) => EqKey::of(value).map(|k| (field.clone(), k)),
            _ => None,
        };
        let shared = Arc::new(Shared {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            target,
            transform: req.transform.clone(),
            eq,
            queue_size: req.options.queue_size.max(1),
            state: Mutex::new(QueueState {
                queue: ChangeQueue::new(req.options.squash),
                skipped: 0,
                error: None,
            }),
            waker: req.waker.clone(),
            relay: AtomicBool::new(false),
        });
        {
            let mut subs = self.subs.write();
            match &shared.target {
                KeyTarget::Keys(keys) if point => {
                    for k in keys {
                        subs.points
                            .entry(k.clone())
                            .or_default()
                            .push(shared.clone());
                    }
                }
                _ => match &shared.eq {
                    Some((field, k)) => subs
                        .eq
                        .entry(field.clone())
                        .or_default()
                        .entry(k.clone())
                        .or_default()
                        .push(shared.clone()),
                    None => subs.ranges.push(shared.clone()),
                },
            }
            self.listeners.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Subscription::new(self.clone(), shared, req.options))
    }

    /// Removes a subscription (its handle dropped).
    pub(crate) fn unregister(&self, shared: &Arc<Shared>) {
        let mut subs = self.subs.write();
        let removed = match &shared.target {
            KeyTarget::Keys(keys) => {
                let mut found = false;
                for k in keys {
                    if let Some(list) = subs.points.get_mut(k.as_slice()) {
                        if let Some(i) = list.iter().position(|s| s.id == shared.id) {
                            list.swap_remove(i);
                            found = true;
                        }
                        if list.is_empty() {
                            subs.points.remove(k.as_slice());
                        }
                    }
                }
                found
            }
            KeyTarget::Range(..) => match &shared.eq {
                Some((field, k)) => {
                    let mut found = false;
                    if let Some(by_value) = subs.eq.get_mut(field) {
                        if let Some(list) = by_value.get_mut(k) {
                            if let Some(i) = list.iter().position(|s| s.id == shared.id) {
                                list.swap_remove(i);
                                found = true;
                            }
                            if list.is_empty() {
                                by_value.remove(k);
                            }
                        }
                        if by_value.is_empty() {
                            subs.eq.remove(field);
                        }
                    }
                    found
                }
                None => match subs.ranges.iter().position(|s| s.id == shared.id) {
                    Some(i) => {
                        subs.ranges.swap_remove(i);
                        true
                    }
                    None => false,
                },
            },
        };
        if removed {
            self.listeners.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
