//! The shard's side of changefeeds: its `changefeed::Hub` and the quiescing that makes a
//! feed's registration and initial read atomic with respect to writes.
//!
//! `Shard::apply` publishes each change to the hub after applying it, while it holds
//! the document's stripe lock. Holding that lock (or every stripe, for a range) while
//! registering and taking the initial snapshot therefore splits the writes cleanly:
//! those before are in the initial values, those after are queued, none is in both.

use std::sync::Arc;

use datum::Datum;

use crate::shard::Shard;
use crate::StoreError;

impl Shard {
    /// The changefeed subscriptions of this shard.
    pub fn feeds(&self) -> &Arc<changefeed::Hub> {
        &self.feeds
    }

    /// Runs `f` while no write to `key` (to any key, when `None`) can apply or publish.
    /// Stripes are always taken in ascending order, and writers hold one at a time (a
    /// chunk's writes, `Shard::apply_many`, several of one shard in ascending order), so
    /// this cannot deadlock with them.
    pub fn quiesce<R>(&self, key: Option<&Datum>, f: impl FnOnce() -> R) -> Result<R, StoreError> {
        match key {
            Some(key) => {
                let k = datum::keys::encode_primary(key)
                    .map_err(|e| StoreError::Key(e.message().to_string()))?;
                let i = Shard::stripe_index(&k);
                let _g = self.locks.get(i).map(|l| l.lock());
                Ok(f())
            }
            None => {
                let _all: Vec<_> = self.locks.iter().map(|l| l.lock()).collect();
                Ok(f())
            }
        }
    }
}

/// Runs `f` while no write to any shard of `shards` can apply or publish (a range feed's
/// registration over a table of several shards). Shards are locked in order, each in
/// ascending stripe order; writers hold one stripe at a time, or a chunk's stripes of one
/// shard in ascending order (`Shard::apply_many`), so this cannot deadlock.
pub fn quiesce_all<R>(shards: &[Arc<Shard>], f: impl FnOnce() -> R) -> R {
    let _all: Vec<_> = shards
        .iter()
        .flat_map(|s| s.locks.iter().map(|l| l.lock()))
        .collect();
    f()
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use changefeed::{Initial, Options, Request};
    use storage::{Engine, Memory};

    use super::*;
    use crate::{GroupCommit, StoreChange};

    #[test]
    fn writes_publish_and_initial_read_is_atomic() {
        let e: Arc<dyn Engine> = Arc::new(Memory::new());
        let s = Shard::open(e.clone(), "t", GroupCommit::start(e)).unwrap();
        let put = |i: f64| {
            let d = Datum::from_pairs([("id", Datum::Number(i))]);
            s.write(&Datum::Number(i), StoreChange::Put(d.clone()))
                .unwrap();
        };
        put(1.0);
        let req = Request::whole_table(Options {
            include_initial: true,
            ..Options::default()
        });
        let mut sub = s
            .quiesce(None, || {
                let mut sub = s.feeds().subscribe(req).unwrap();
                let docs = s.scan(Bound::Unbounded, Bound::Unbounded, false).unwrap();
                sub.set_initial(Initial::Docs(Box::new(
                    docs.map(|d| d.map_err(|e| changefeed::FeedError::new(e.to_string()))),
                )));
                sub
            })
            .unwrap();
        put(2.0);
        let mut got = Vec::new();
        while let Some(d) = sub.next_doc() {
            got.push(d.unwrap().to_json_string());
        }
        assert_eq!(
            got,
            vec![
                r#"{"new_val":{"id":1}}"#,
                r#"{"new_val":{"id":2},"old_val":null}"#
            ]
        );
    }
}
