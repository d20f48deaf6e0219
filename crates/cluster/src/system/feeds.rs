//! Changefeeds on the system tables (`r.db('rethinkdb').table(...).changes()`).
//!
//! System rows are computed from live state, so their changes are found by diffing:
//! each (table, identifier format, user) with open feeds keeps its last rows and a
//! `changefeed::Hub`; a refresh computes the rows again and publishes the differences
//! (deleted, changed and added rows, in key order). A write through a system table
//! refreshes at once, after it applied and under the system-write lock, so its feeds
//! see each write in order; changes from elsewhere (`table_create`, `reconfigure`,
//! counters, jobs) are picked up by a ticker thread every `TICK`, started with the
//! first system feed and stopped with the cluster.
//!
//! Invariant: a subscription is registered, and its initial values taken, under the
//! same lock as refreshes, from the rows last published: no change is both in the
//! initial values and in the feed, and none is in neither.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use changefeed::{Hub, Initial, Request, Subscription, Target};
use datum::Datum;
use parking_lot::Mutex;
use reql::error::op_failed;

use super::{in_bounds, key_of, Kind, SystemTable};
use crate::Cluster;

/// How often rows changed by other means than system-table writes are looked for.
const TICK: Duration = Duration::from_millis(100);

type FeedKey = (Kind, bool, String);

struct Entry {
    hub: Arc<Hub>,
    /// The rows last published, by encoded primary key.
    rows: BTreeMap<Vec<u8>, Datum>,
}

/// The system tables' feeds (one per server).
#[derive(Default)]
pub(crate) struct SystemFeeds {
    entries: Mutex<HashMap<FeedKey, Entry>>,
    ticker: AtomicBool,
}

fn encoded_rows(t: &SystemTable) -> reql::Result<BTreeMap<Vec<u8>, Datum>> {
    let mut out = BTreeMap::new();
    for r in t.rows()? {
        if let Ok(k) = datum::keys::encode_primary(&key_of(&r)) {
            out.insert(k, r);
        }
    }
    Ok(out)
}

fn table(cluster: &Arc<Cluster>, key: &FeedKey) -> SystemTable {
    SystemTable {
        cluster: cluster.clone(),
        kind: key.0,
        uuids: key.1,
        user: key.2.clone(),
    }
}

impl SystemFeeds {
    /// Opens a feed on system table `t`.
    pub(crate) fn subscribe(t: &SystemTable, req: Request) -> reql::Result<Subscription> {
        let feeds = &t.cluster.admin.feeds;
        let key: FeedKey = (t.kind, t.uuids, t.user.clone());
        let include_initial = req.options.include_initial;
        let target = req.target.clone();
        let sub = {
            let mut entries = feeds.entries.lock();
            let entry = match entries.entry(key) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(Entry {
                    hub: Hub::new(),
                    rows: encoded_rows(t)?,
                }),
            };
            let mut sub = entry.hub.subscribe(req).map_err(|e| op_failed(e.message))?;
            if include_initial {
                sub.set_initial(initial(&entry.rows, &target));
            }
            sub
        };
        feeds.start_ticker(&t.cluster);
        Ok(sub)
    }

    fn start_ticker(&self, cluster: &Arc<Cluster>) {
        if self.ticker.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<Cluster> = Arc::downgrade(cluster);
        let spawned = std::thread::Builder::new()
            .name("system-feeds".into())
            .spawn(move || loop {
                std::thread::sleep(TICK);
                let Some(c) = weak.upgrade() else {
                    return;
                };
                SystemFeeds::refresh(&c);
            });
        if spawned.is_err() {
            self.ticker.store(false, Ordering::SeqCst);
        }
    }

    /// Computes the rows of every system table with open feeds and publishes what
    /// changed; forgets tables whose feeds all closed.
    pub(crate) fn refresh(cluster: &Arc<Cluster>) {
        let mut entries = cluster.admin.feeds.entries.lock();
        if entries.is_empty() {
            return;
        }
        entries.retain(|_, e| e.hub.listeners() > 0);
        for (key, entry) in entries.iter_mut() {
            let Ok(rows) = encoded_rows(&table(cluster, key)) else {
                continue;
            };
            for (k, old) in &entry.rows {
                match rows.get(k) {
                    None => entry.hub.publish(k, Some(old), None),
                    Some(new) if new != old => entry.hub.publish(k, Some(old), Some(new)),
                    Some(_) => {}
                }
            }
            for (k, new) in &rows {
                if !entry.rows.contains_key(k) {
                    entry.hub.publish(k, None, Some(new));
                }
            }
            entry.rows = rows;
        }
    }
}

/// The initial values of a feed from the rows last published.
fn initial(rows: &BTreeMap<Vec<u8>, Datum>, target: &Target) -> Initial {
    match target {
        Target::Keys(keys) if keys.len() == 1 => {
            let row = keys
                .first()
                .and_then(|k| datum::keys::encode_primary(k).ok())
                .and_then(|k| rows.get(&k).cloned());
            Initial::Point(row.unwrap_or(Datum::Null))
        }
        Target::Keys(keys) => {
            let docs: Vec<_> = keys
                .iter()
                .filter_map(|k| datum::keys::encode_primary(k).ok())
                .filter_map(|k| rows.get(&k).cloned())
                .map(Ok)
                .collect();
            Initial::Docs(Box::new(docs.into_iter()))
        }
        Target::Range { lower, upper } => {
            let (lower, upper): (Bound<Datum>, Bound<Datum>) = (lower.clone(), upper.clone());
            let docs: Vec<_> = rows
                .values()
                .filter(|r| in_bounds(&key_of(r), &lower, &upper))
                .cloned()
                .map(Ok)
                .collect();
            Initial::Docs(Box::new(docs.into_iter()))
        }
    }
}
