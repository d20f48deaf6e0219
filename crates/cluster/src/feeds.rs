//! Changefeeds on a table: registration on the shard's hub, with the initial values
//! read under the shard's quiesced locks (`store::Shard::quiesce`) so that they and the
//! queued changes neither overlap nor leave a gap.

use changefeed::{FeedError, Initial, Request, Subscription, Target};
use datum::Datum;
use reql::error::op_failed;

use crate::table::{store_err, TableHandle};

fn feed_err(e: FeedError) -> reql::ReqlError {
    op_failed(e.message)
}

/// Opens a changefeed on `t` (see `reql::Table::subscribe`).
pub(crate) fn subscribe(t: &TableHandle, req: Request) -> reql::Result<Subscription> {
    let shard = &t.shard;
    let hub = shard.feeds();
    if !req.options.include_initial {
        return hub.subscribe(req).map_err(feed_err);
    }
    match req.target.clone() {
        Target::Keys(keys) => {
            let point = keys.len() == 1;
            let lock_key = if point { keys.first() } else { None };
            shard
                .quiesce(lock_key, || -> reql::Result<Subscription> {
                    let mut sub = hub.subscribe(req).map_err(feed_err)?;
                    if point {
                        let doc = match keys.first() {
                            Some(k) => shard.get(k).map_err(store_err)?,
                            None => None,
                        };
                        sub.set_initial(Initial::Point(doc.unwrap_or(Datum::Null)));
                    } else {
                        let mut docs = Vec::new();
                        for k in &keys {
                            if let Some(d) = shard.get(k).map_err(store_err)? {
                                docs.push(Ok(d));
                            }
                        }
                        sub.set_initial(Initial::Docs(Box::new(docs.into_iter())));
                    }
                    Ok(sub)
                })
                .map_err(store_err)?
        }
        Target::Range { lower, upper } => shard
            .quiesce(None, || -> reql::Result<Subscription> {
                let mut sub = hub.subscribe(req).map_err(feed_err)?;
                // `scan` takes its snapshot now, under the locks; it reads lazily later.
                let docs = shard.scan(lower, upper, false).map_err(store_err)?;
                sub.set_initial(Initial::Docs(Box::new(
                    docs.map(|d| d.map_err(|e| FeedError::new(store_err(e).message))),
                )));
                Ok(sub)
            })
            .map_err(store_err)?,
    }
}
