//! Changefeeds on a table: registration on the table's hub (every shard publishes to
//! it), with the initial values read under quiesced locks — the owning shard's stripe
//! for a point, every shard's stripes for a range (`store::quiesce_all`) — so that they
//! and the queued changes neither overlap nor leave a gap.

use changefeed::{FeedError, Initial, Request, Subscription, Target};
use datum::Datum;
use reql::error::op_failed;

use crate::table::{store_err, TableHandle};

fn feed_err(e: FeedError) -> reql::ReqlError {
    op_failed(e.message)
}

/// Opens a changefeed on `t` (see `reql::Table::subscribe`).
pub(crate) fn subscribe(t: &TableHandle, req: Request) -> reql::Result<Subscription> {
    let hub = t.shards.feeds();
    if !req.options.include_initial {
        return hub.subscribe(req).map_err(feed_err);
    }
    match req.target.clone() {
        Target::Keys(keys) => {
            let point = keys.len() == 1;
            t.shards.held(|layout| {
                let read = |k: &Datum| layout.owner_of(k)?.get(k);
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
                let mut parts = Vec::with_capacity(layout.shards.len());
                for s in &layout.shards {
                    parts.push(
                        s.scan(lower.clone(), upper.clone(), false)
                            .map_err(store_err)?,
                    );
                }
                let docs = parts.into_iter().flatten();
                sub.set_initial(Initial::Docs(Box::new(
                    docs.map(|d| d.map_err(|e| FeedError::new(store_err(e).message))),
                )));
                Ok(sub)
            })
        }),
    }
}
