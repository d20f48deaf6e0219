//! A node following a replicated table's resharding (docs/clustering.md, "Resharding";
//! the procedure is `crate::reshard`): when it applies `BeginReshard` it opens the new
//! shards' groups next to the old ones ([`Pending`], kept in the table's handle; the
//! old shards go on serving the table), and when it applies `FinishReshard` it switches
//! the handle to them and drops its copies of the old ones; when it applies
//! `AbortReshard` it drops its copies of the new ones.
//!
//! Invariants: the new shards publish to a changefeed hub of their own until the
//! switch (the copy into them is no change of the table's), and at the switch the old
//! hub's feeds end with "Changefeed aborted (unavailable)."; a handle's shards are
//! always one generation's, never a mix.

use std::sync::Arc;

use datum::Datum;

use super::{space_of, TableEntry};
use crate::groups::{ReplicatedTable, TableGroups};
use crate::table::TableHandle;
use crate::Cluster;

/// The new shards of a table being resharded, open on this node.
pub(crate) struct Pending {
    /// Their generation (`crate::groups::slot_of`).
    pub(crate) generation: u64,
    /// Where they are cut.
    pub(crate) splits: Vec<Datum>,
    /// The layout's shards (this node's replicas, or stand-ins).
    shards: Vec<Arc<store::Shard>>,
    /// Their write path.
    pub(crate) table: Arc<ReplicatedTable>,
    /// The hub their replicas publish to (the table's from the switch on).
    feeds: Arc<changefeed::Hub>,
}

impl Cluster {
    /// `h` with the new shards of the resharding `next` (the table as it will be) open
    /// next to its own; a pending resharding of another generation is abandoned.
    pub(super) fn open_pending(
        &self,
        h: &TableHandle,
        next: &TableEntry,
    ) -> Result<Arc<TableHandle>, store::StoreError> {
        let g = self.table_groups()?;
        if let Some(p) = &h.pending {
            p.table.abandon();
            g.remove_slots(&next.id, p.table.group_slots(), self.engine.clone());
        }
        let feeds = changefeed::Hub::new();
        let (shards, table) = g.open(
            self.engine.clone(),
            next,
            self.commit.clone(),
            self.doc_cache.clone(),
            feeds.clone(),
        )?;
        let mut handle = h.clone();
        handle.pending = Some(Arc::new(Pending {
            generation: next.generation,
            splits: next.splits.clone(),
            shards,
            table,
            feeds,
        }));
        Ok(Arc::new(handle))
    }

    /// `h` without its pending new shards (their resharding was abandoned): this node's
    /// copies of them are dropped.
    pub(super) fn drop_pending(&self, h: &TableHandle, id: &str) -> Arc<TableHandle> {
        if let (Some(p), Ok(g)) = (&h.pending, self.table_groups()) {
            p.table.abandon();
            g.remove_slots(id, p.table.group_slots(), self.engine.clone());
        }
        let mut handle = h.clone();
        handle.pending = None;
        Arc::new(handle)
    }

    /// `h` switched to the shards of generation `e.generation` (a resharding finished):
    /// its pending shards when they are that generation's, else opened now (this node
    /// never saw the resharding begin). The old shards' feeds end and this node's
    /// copies of them are dropped.
    pub(super) fn switch_generation(
        &self,
        h: &TableHandle,
        e: &TableEntry,
    ) -> Result<Arc<TableHandle>, store::StoreError> {
        let g = self.table_groups()?;
        let (shards, table, feeds) = match &h.pending {
            Some(p) if p.generation == e.generation && p.splits == e.splits => {
                (p.shards.clone(), p.table.clone(), p.feeds.clone())
            }
            _ => {
                if let Some(p) = &h.pending {
                    p.table.abandon();
                }
                let feeds = changefeed::Hub::new();
                let (shards, table) = g.open(
                    self.engine.clone(),
                    e,
                    self.commit.clone(),
                    self.doc_cache.clone(),
                    feeds.clone(),
                )?;
                (shards, table, feeds)
            }
        };
        let env = crate::shards::ShardEnv {
            engine: self.engine.clone(),
            space: space_of(&e.id),
            commit: self.commit.clone(),
            cache: self.doc_cache.clone(),
            feeds,
        };
        let sharded = crate::shards::Sharded::with_shards(env, &e.splits, shards)?;
        if let Some(old) = &h.replicated {
            old.end_feeds(h.shards.feeds());
            old.drop_indexes();
            old.abandon();
            g.remove_slots(&e.id, old.group_slots(), self.engine.clone());
        }
        let mut handle = h.clone();
        handle.shards = Arc::new(sharded);
        handle.replicated = Some(table);
        handle.pending = None;
        Ok(Arc::new(handle))
    }

    /// Drops this node's storage of `e`'s shards of generations it no longer has (a
    /// resharding that finished while this node was away), when it opens the table.
    pub(super) fn drop_stale_generations(&self, e: &TableEntry) {
        let Ok(g) = self.table_groups() else {
            return;
        };
        let mut keep = vec![(e.generation, e.placement.len())];
        if let Some(r) = &e.resharding {
            keep.push((r.generation, r.placement.len()));
        }
        let stale = TableGroups::stale_slots(&*self.engine, &e.id, &keep);
        if !stale.is_empty() {
            g.remove_slots(&e.id, stale, self.engine.clone());
        }
    }

    fn table_groups(&self) -> Result<&Arc<TableGroups>, store::StoreError> {
        self.groups
            .get()
            .ok_or_else(|| store::StoreError::Corrupt("not a replicated table".into()))
    }
}
