//! `Subscription`: the reader's side of one feed, and the documents it delivers.
//!
//! The order of what a reader sees is RethinkDB's: with `include_states`, a
//! `{state: "initializing"}` document (only when initial values follow), the initial
//! values as `{new_val}` (`include_initial`), `{state: "ready"}`, then the changes as
//! `{old_val, new_val}`. An overflow shows as one `{error: ...}` document in place of
//! the dropped changes; a dropped table ends the feed with an error.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use tokio::sync::Notify;

use crate::hub::{Hub, Shared};
use crate::queue::Change;
use crate::FeedError;

/// A per-document transformation applied before delivery: `None` drops the value.
pub type Transform = Arc<dyn Fn(&Datum) -> Option<Datum> + Send + Sync>;

/// What a feed listens to.
#[derive(Debug, Clone)]
pub enum Target {
    /// These primary keys (`get`, `get_all`).
    Keys(Vec<Datum>),
    /// Primary keys between two bounds (`between`, the whole table).
    Range {
        /// The lower bound.
        lower: Bound<Datum>,
        /// The upper bound.
        upper: Bound<Datum>,
    },
}

/// The options of `.changes()` that shape delivery.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Squash changes per document while they wait.
    pub squash: bool,
    /// The queue limit (`changefeed_queue_size`).
    pub queue_size: usize,
    /// Deliver the current values first.
    pub include_initial: bool,
    /// Deliver `{state: ...}` documents.
    pub include_states: bool,
    /// Add a `type` field.
    pub include_types: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            squash: false,
            queue_size: crate::DEFAULT_QUEUE_SIZE,
            include_initial: false,
            include_states: false,
            include_types: false,
        }
    }
}

/// A promise about a subscription's transform: it drops every document whose `field`
/// is not equal to `value` (a bool, number or string), so the hub may skip evaluating
/// it for such documents (`filter(row(field) == value)`).
#[derive(Debug, Clone)]
pub struct EqHint {
    /// The top-level field.
    pub field: String,
    /// Its value.
    pub value: Datum,
}

/// A subscription request.
pub struct Request {
    /// What to listen to.
    pub target: Target,
    /// Applied to old and new values before queueing.
    pub transform: Option<Transform>,
    /// Lets the hub find the subscription by a field's value.
    pub hint: Option<EqHint>,
    /// Delivery options.
    pub options: Options,
    /// Signalled whenever something is queued (shared by a query's feeds).
    pub waker: Arc<Notify>,
}

impl Request {
    /// A feed on every document of the table, untransformed, with `options`.
    pub fn whole_table(options: Options) -> Request {
        Request {
            target: Target::Range {
                lower: std::ops::Bound::Unbounded,
                upper: std::ops::Bound::Unbounded,
            },
            transform: None,
            hint: None,
            options,
            waker: Arc::new(Notify::new()),
        }
    }
}

/// The initial values of a feed, read atomically with its registration.
pub enum Initial {
    /// A point feed's document (null when missing).
    Point(Datum),
    /// The documents in range, lazily from a snapshot.
    Docs(Box<dyn Iterator<Item = Result<Datum, FeedError>> + Send>),
}

enum Phase {
    Start,
    Initial,
    Ready,
    Live,
    Ended,
}

/// The reader's handle of one feed; dropping it unregisters the feed.
pub struct Subscription {
    hub: Arc<Hub>,
    shared: Arc<Shared>,
    opts: Options,
    phase: Phase,
    initial: Option<Initial>,
}

/// A cheap view of a subscription's queue for the waiting reader.
#[derive(Clone)]
pub struct Probe(Arc<Shared>);

impl Probe {
    /// True when the queue is more than half full (a squash wait should end early).
    pub fn nearly_full(&self) -> bool {
        let st = self.0.state.lock();
        st.queue.len() > self.0.queue_size / 2 || st.skipped > 0 || st.error.is_some()
    }
}

fn with_type(mut pairs: Vec<(&'static str, Datum)>, types: bool, t: &str) -> Datum {
    if types {
        pairs.push(("type", Datum::str(t)));
    }
    Datum::from_pairs(pairs)
}

/// The document RethinkDB delivers for a change.
pub fn change_doc(c: Change, include_types: bool) -> Datum {
    let old = c.old.unwrap_or(Datum::Null);
    let new = c.new.unwrap_or(Datum::Null);
    let t = if matches!(old, Datum::Null) {
        "add"
    } else if matches!(new, Datum::Null) {
        "remove"
    } else {
        "change"
    };
    with_type(vec![("old_val", old), ("new_val", new)], include_types, t)
}

impl Subscription {
    pub(crate) fn new(hub: Arc<Hub>, shared: Arc<Shared>, opts: Options) -> Subscription {
        Subscription {
            hub,
            shared,
            opts,
            phase: Phase::Start,
            initial: None,
        }
    }

    /// Hands over the initial values (only used with `include_initial`).
    pub fn set_initial(&mut self, initial: Initial) {
        self.initial = Some(initial);
    }

    /// A probe for the reader's wait loop.
    pub fn probe(&self) -> Probe {
        Probe(self.shared.clone())
    }

    fn state_doc(&self, s: &str) -> Datum {
        with_type(
            vec![("state", Datum::str(s))],
            self.opts.include_types,
            "state",
        )
    }

    fn transform(&self, d: Datum) -> Option<Datum> {
        match &self.shared.transform {
            Some(t) => t(&d),
            None => Some(d),
        }
    }

    /// The next document for the reader, `None` when nothing is available now (the
    /// feed's waker is signalled when that changes), or the error ending the feed.
    pub fn next_doc(&mut self) -> Option<Result<Datum, FeedError>> {
        loop {
            match self.phase {
                Phase::Start => {
                    let initial = self.opts.include_initial;
                    self.phase = if initial { Phase::Initial } else { Phase::Live };
                    if self.opts.include_states {
                        let s = if initial { "initializing" } else { "ready" };
                        return Some(Ok(self.state_doc(s)));
                    }
                }
                Phase::Initial => match self.initial.take() {
                    None => self.phase = Phase::Ready,
                    Some(Initial::Point(d)) => {
                        self.phase = Phase::Ready;
                        let v = self.transform(d).unwrap_or(Datum::Null);
                        let t = self.opts.include_types;
                        return Some(Ok(with_type(vec![("new_val", v)], t, "initial")));
                    }
                    Some(Initial::Docs(mut it)) => match it.next() {
                        None => self.phase = Phase::Ready,
                        Some(Err(e)) => {
                            self.phase = Phase::Ended;
                            return Some(Err(e));
                        }
                        Some(Ok(d)) => {
                            let v = self.transform(d);
                            self.initial = Some(Initial::Docs(it));
                            if let Some(v) = v {
                                let t = self.opts.include_types;
                                return Some(Ok(with_type(vec![("new_val", v)], t, "initial")));
                            }
                        }
                    },
                },
                Phase::Ready => {
                    self.phase = Phase::Live;
                    if self.opts.include_states && self.opts.include_initial {
                        return Some(Ok(self.state_doc("ready")));
                    }
                }
                Phase::Live => {
                    let mut st = self.shared.state.lock();
                    if let Some(e) = st.error.clone() {
                        drop(st);
                        self.phase = Phase::Ended;
                        return Some(Err(e));
                    }
                    if st.skipped > 0 {
                        let n = std::mem::take(&mut st.skipped);
                        return Some(Ok(Datum::from_pairs([(
                            "error",
                            Datum::str(&format!(
                                "Changefeed cache over array size limit, skipped {n} elements."
                            )),
                        )])));
                    }
                    let c = st.queue.pop()?;
                    drop(st);
                    return Some(Ok(change_doc(c, self.opts.include_types)));
                }
                Phase::Ended => return None,
            }
        }
    }
}

impl Subscription {
    /// Marks this subscription as a relay of changes to another server (a remote
    /// feed's session), not a feed of a client here: `Hub::client_listeners` does not
    /// count it and `Hub::abort_all` leaves it alone (its own server decides).
    pub fn mark_relay(&self) {
        use std::sync::atomic::Ordering;
        if !self.shared.relay.swap(true, Ordering::AcqRel) {
            self.hub.relay_opened();
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unregister(&self.shared);
        if self.shared.relay.load(std::sync::atomic::Ordering::Acquire) {
            self.hub.relay_closed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EqHint;

    fn doc(id: f64, v: f64) -> Datum {
        Datum::from_pairs([("id", Datum::Number(id)), ("v", Datum::Number(v))])
    }

    fn key(id: f64) -> Vec<u8> {
        datum::keys::encode_primary(&Datum::Number(id)).unwrap()
    }

    fn req(target: Target, options: Options) -> Request {
        Request {
            target,
            transform: None,
            hint: None,
            options,
            waker: Arc::new(Notify::new()),
        }
    }

    fn all() -> Target {
        Target::Range {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    fn drain(s: &mut Subscription) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(d) = s.next_doc() {
            out.push(match d {
                Ok(d) => d.to_json_string(),
                Err(e) => format!("ERR {e}"),
            });
        }
        out
    }

    #[test]
    fn point_feed_sees_only_its_document() {
        let hub = Hub::new();
        let mut s = hub
            .subscribe(req(
                Target::Keys(vec![Datum::Number(1.0)]),
                Options::default(),
            ))
            .unwrap();
        hub.publish(&key(2.0), None, Some(&doc(2.0, 1.0)));
        hub.publish(&key(1.0), None, Some(&doc(1.0, 1.0)));
        hub.publish(&key(1.0), Some(&doc(1.0, 1.0)), None);
        assert_eq!(
            drain(&mut s),
            vec![
                r#"{"new_val":{"id":1,"v":1},"old_val":null}"#,
                r#"{"new_val":null,"old_val":{"id":1,"v":1}}"#
            ]
        );
        assert_eq!(hub.listeners(), 1);
        drop(s);
        assert_eq!(hub.listeners(), 0);
    }

    #[test]
    fn abort_all_ends_every_feed_but_accepts_new_ones() {
        let hub = Hub::new();
        let whole = Target::Range {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        };
        let point = Target::Keys(vec![Datum::Number(1.0)]);
        let mut a = hub
            .subscribe(req(whole.clone(), Options::default()))
            .unwrap();
        let mut b = hub.subscribe(req(point, Options::default())).unwrap();
        hub.publish(&key(1.0), None, Some(&doc(1.0, 1.0)));
        hub.abort_all("Changefeed aborted (unavailable).");
        for s in [&mut a, &mut b] {
            assert_eq!(drain(s), ["ERR Changefeed aborted (unavailable)."]);
        }
        let mut c = hub.subscribe(req(whole, Options::default())).unwrap();
        hub.publish(&key(2.0), None, Some(&doc(2.0, 1.0)));
        assert_eq!(
            drain(&mut c),
            [r#"{"new_val":{"id":2,"v":1},"old_val":null}"#]
        );
    }

    #[test]
    fn range_feed_respects_bounds() {
        let hub = Hub::new();
        let mut s = hub
            .subscribe(req(
                Target::Range {
                    lower: Bound::Included(Datum::Number(2.0)),
                    upper: Bound::Excluded(Datum::Number(4.0)),
                },
                Options::default(),
            ))
            .unwrap();
        for i in 0..6 {
            let i = i as f64;
            hub.publish(&key(i), None, Some(&doc(i, 0.0)));
        }
        let got = drain(&mut s);
        assert_eq!(got.len(), 2);
        assert!(got[0].contains(r#""id":2"#) && got[1].contains(r#""id":3"#));
    }

    #[test]
    fn states_initial_and_types() {
        let hub = Hub::new();
        let opts = Options {
            include_initial: true,
            include_states: true,
            include_types: true,
            ..Options::default()
        };
        let mut s = hub
            .subscribe(req(Target::Keys(vec![Datum::Number(1.0)]), opts))
            .unwrap();
        s.set_initial(Initial::Point(Datum::Null));
        hub.publish(&key(1.0), None, Some(&doc(1.0, 1.0)));
        assert_eq!(
            drain(&mut s),
            vec![
                r#"{"state":"initializing","type":"state"}"#,
                r#"{"new_val":null,"type":"initial"}"#,
                r#"{"state":"ready","type":"state"}"#,
                r#"{"new_val":{"id":1,"v":1},"old_val":null,"type":"add"}"#,
            ]
        );
    }

    #[test]
    fn table_feed_states_without_initial() {
        let hub = Hub::new();
        let opts = Options {
            include_states: true,
            ..Options::default()
        };
        let mut s = hub.subscribe(req(all(), opts)).unwrap();
        assert_eq!(drain(&mut s), vec![r#"{"state":"ready"}"#]);
    }

    #[test]
    fn initial_docs_are_transformed() {
        let hub = Hub::new();
        let mut r = req(
            all(),
            Options {
                include_initial: true,
                ..Options::default()
            },
        );
        r.transform = Some(Arc::new(|d: &Datum| {
            let v = d.get("v")?.as_f64()?;
            (v > 1.0).then_some(Datum::Number(v))
        }));
        let mut s = hub.subscribe(r).unwrap();
        let docs = vec![Ok(doc(1.0, 1.0)), Ok(doc(2.0, 5.0))];
        s.set_initial(Initial::Docs(Box::new(docs.into_iter())));
        // v goes 5 -> 1: the transformed new value is absent, so it leaves the feed.
        hub.publish(&key(2.0), Some(&doc(2.0, 5.0)), Some(&doc(2.0, 1.0)));
        // v goes 1 -> 1 on another field: nothing the feed can see changed.
        hub.publish(&key(1.0), Some(&doc(1.0, 1.0)), Some(&doc(1.0, 1.0)));
        assert_eq!(
            drain(&mut s),
            vec![r#"{"new_val":5}"#, r#"{"new_val":null,"old_val":5}"#]
        );
    }

    #[test]
    fn overflow_reports_skipped_then_continues() {
        let hub = Hub::new();
        let opts = Options {
            queue_size: 3,
            ..Options::default()
        };
        let mut s = hub.subscribe(req(all(), opts)).unwrap();
        for i in 0..5 {
            let i = i as f64;
            hub.publish(&key(i), None, Some(&doc(i, 0.0)));
        }
        hub.publish(&key(9.0), None, Some(&doc(9.0, 0.0)));
        let got = drain(&mut s);
        assert_eq!(
            got[0],
            r#"{"error":"Changefeed cache over array size limit, skipped 4 elements."}"#
        );
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn close_ends_feeds_and_refuses_new_ones() {
        let hub = Hub::new();
        let mut s = hub.subscribe(req(all(), Options::default())).unwrap();
        hub.publish(&key(1.0), None, Some(&doc(1.0, 0.0)));
        hub.close();
        assert_eq!(drain(&mut s), vec![format!("ERR {}", crate::TABLE_DROPPED)]);
        assert!(hub.subscribe(req(all(), Options::default())).is_err());
    }

    #[tokio::test]
    async fn waker_is_signalled_by_publish() {
        let hub = Hub::new();
        let r = req(Target::Keys(vec![Datum::Number(1.0)]), Options::default());
        let waker = r.waker.clone();
        let mut s = hub.subscribe(r).unwrap();
        let h = hub.clone();
        let t = tokio::spawn(async move {
            h.publish(&key(1.0), None, Some(&doc(1.0, 0.0)));
        });
        waker.notified().await;
        t.await.unwrap();
        assert!(s.next_doc().is_some());
    }

    #[test]
    fn equality_hint_finds_filtered_feeds_by_value() {
        let hub = Hub::new();
        let open = |v: f64| {
            let mut r = req(all(), Options::default());
            r.transform = Some(Arc::new(move |d: &Datum| {
                (d.get("v")?.as_f64()? == v).then(|| d.clone())
            }));
            r.hint = Some(EqHint {
                field: "v".into(),
                value: Datum::Number(v),
            });
            hub.subscribe(r).unwrap()
        };
        let (mut one, mut two) = (open(1.0), open(2.0));
        hub.publish(&key(5.0), None, Some(&doc(5.0, 1.0)));
        hub.publish(&key(5.0), Some(&doc(5.0, 1.0)), Some(&doc(5.0, 2.0)));
        hub.publish(&key(6.0), None, Some(&doc(6.0, 3.0)));
        assert_eq!(
            drain(&mut one),
            vec![
                r#"{"new_val":{"id":5,"v":1},"old_val":null}"#,
                r#"{"new_val":null,"old_val":{"id":5,"v":1}}"#
            ]
        );
        assert_eq!(
            drain(&mut two),
            vec![r#"{"new_val":{"id":5,"v":2},"old_val":null}"#]
        );
        hub.close();
        assert_eq!(
            drain(&mut one),
            vec![format!("ERR {}", crate::TABLE_DROPPED)]
        );
        drop((one, two));
        assert_eq!(hub.listeners(), 0);
    }

    #[test]
    fn publish_with_no_listeners_is_a_no_op() {
        let hub = Hub::new();
        hub.publish(&key(1.0), None, Some(&doc(1.0, 0.0)));
        assert_eq!(hub.listeners(), 0);
    }
}
