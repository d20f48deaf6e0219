//! Changefeeds on a table: registration on the table's hub (every shard publishes to
//! it), with the initial values read under quiesced locks — the owning shard's stripe
//! for a point, every shard's stripes for a range (`store::quiesce_all`) — so that they
//! and the queued changes neither overlap nor leave a gap.
//!
//! On a replicated table, the initial values of the shards this server holds no
//! replica of are read by their leaders (`crate::groups`, feeds: cut consistently with
//! what their pollers publish, which wait until the feed is registered) and handed in
//! as `remote`, by shard position; the stand-ins of those shards are empty.

use changefeed::{FeedError, Initial, Request, Subscription, Target};
use datum::Datum;
use reql::error::op_failed;

use crate::replica::read_bound;
use crate::replica::tap::InitialRead;
use crate::table::{store_err, TableHandle};

/// What the leader of a remote shard reads as a feed's initial values.
pub(crate) fn initial_read(target: &Target) -> InitialRead {
    match target {
        Target::Keys(keys) => InitialRead::Keys(keys.iter().map(|k| k.to_json_string()).collect()),
        Target::Range { lower, upper } => InitialRead::Range {
            lower: read_bound(lower),
            upper: read_bound(upper),
        },
    }
}

/// The document under `key` among a remote shard's initial documents.
fn remote_doc(docs: &[Datum], pk: &str, key: &Datum) -> Option<Datum> {
    let want = datum::keys::encode_primary(key).ok()?;
    docs.iter()
        .find(|d| {
            d.get(pk)
                .and_then(|k| datum::keys::encode_primary(k).ok())
                .is_some_and(|k| k == want)
        })
        .cloned()
}

fn feed_err(e: FeedError) -> reql::ReqlError {
    op_failed(e.message)
}

/// Opens a changefeed on `t` (see `reql::Table::subscribe`); `remote` holds the
/// initial documents of shards read elsewhere, by shard position.
pub(crate) fn subscribe(
    t: &TableHandle,
    req: Request,
    remote: &[Option<Vec<Datum>>],
) -> reql::Result<Subscription> {
    let pk = t.primary_key.as_str();
    let hub = t.shards.feeds();
    if !req.options.include_initial {
        return hub.subscribe(req).map_err(feed_err);
    }
    match req.target.clone() {
        Target::Keys(keys) => {
            let point = keys.len() == 1;
            t.shards.held(|layout| {
                let read = |k: &Datum| -> Result<Option<Datum>, store::StoreError> {
                    let i = layout.index_of(k)?;
                    match (remote.get(i), layout.shards.get(i)) {
                        (Some(Some(docs)), _) => Ok(remote_doc(docs, pk, k)),
                        (_, Some(s)) => s.get(k),
                        _ => Ok(None),
                    }
                };
                let register = || -> reql::Result<Subscription> {
                    let mut sub = hub.subscribe(req).map_err(feed_err)?;
                    if point {
                        let doc = match keys.first() {
                            Some(k) => read(k).map_err(store_err)?,
                            None => None,
                        };
                        sub.set_initial(Initial::Point(doc.unwrap_or(Datum::Null)));
                    } else {
                        let mut docs = Vec::new();
                        for k in &keys {
                            if let Some(d) = read(k).map_err(store_err)? {
                                docs.push(Ok(d));
                            }
                        }
                        sub.set_initial(Initial::Docs(Box::new(docs.into_iter())));
                    }
                    Ok(sub)
                };
                match keys.first() {
                    Some(k) if point => layout
                        .owner_of(k)
                        .and_then(|s| s.quiesce(Some(k), register))
                        .map_err(store_err)?,
                    _ => store::quiesce_all(&layout.shards, register),
                }
            })
        }
        Target::Range { lower, upper } => t.shards.held(|layout| {
            store::quiesce_all(&layout.shards, || -> reql::Result<Subscription> {
                let mut sub = hub.subscribe(req).map_err(feed_err)?;
                // Each shard's scan takes its snapshot now, under the locks; the shards
                // are read lazily later, in key order.
                type Part = Box<dyn Iterator<Item = Result<Datum, FeedError>> + Send>;
                let mut parts: Vec<Part> = Vec::with_capacity(layout.shards.len());
                for (i, s) in layout.shards.iter().enumerate() {
                    if let Some(Some(docs)) = remote.get(i) {
                        parts.push(Box::new(docs.clone().into_iter().map(Ok)));
                        continue;
                    }
                    let docs = s
                        .scan(lower.clone(), upper.clone(), false)
                        .map_err(store_err)?;
                    parts.push(Box::new(
                        docs.map(|d| d.map_err(|e| FeedError::new(store_err(e).message))),
                    ));
                }
                sub.set_initial(Initial::Docs(Box::new(parts.into_iter().flatten())));
                Ok(sub)
            })
        }),
    }
}
