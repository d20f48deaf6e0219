//! A node's `Cluster` following a replicated catalog (`super::machine`): the side
//! effects a single server performs around `Catalog::apply`, derived from each
//! committed entry's `Outcome` alone, on every replica.
//!
//! For each table the outcome names: a created one gets its storage and handle (with
//! its indexes and hook); a dropped one is retired (feeds end, indexes unregistered,
//! storage dropped); a changed one gets its new name and durability
//! (`Cluster::sync_handles`, shared with the local path), its new cut when the split
//! points changed, and its index definitions and hook followed by id
//! (`TableIndexes::follow`). After a snapshot install every table is reconciled that
//! way with the whole catalog, and handles of tables it no longer has are retired.
//!
//! Invariants: runs on the task applying the group's entries, in log order; `applied`
//! under the catalog lock (it never takes it); everything is idempotent (reconciling
//! twice changes nothing), so the install path is the same as the entry path. Every
//! table is hosted on every node today: placement will decide here which effects
//! apply locally. Failures cannot be answered to anyone (the entry is committed): they
//! are counted (`Cluster::follow_failures`) and the table is left as it was.

use std::sync::{Arc, Weak};

use storage::Engine;

use super::machine::{open_catalog, CatalogEffects, CatalogMachine};
use super::{Catalog, Cluster, ClusterError, ClusterOptions, Outcome, TableEntry};

/// The effects of a replicated catalog on a node's `Cluster`.
struct ClusterEffects(Weak<Cluster>);

impl CatalogEffects for ClusterEffects {
    fn applied(&self, outcome: &Outcome) {
        if let Some(c) = self.0.upgrade() {
            c.follow(outcome);
        }
    }

    fn reloaded(&self) {
        if let Some(c) = self.0.upgrade() {
            c.reconcile();
        }
    }
}

impl Cluster {
    /// Opens a node whose catalog is the one replicated by the Raft group stored under
    /// `prefix` in `engine`: the `Cluster` (its tables opened from the catalog as it
    /// is now) and the group's state machine, to hand to
    /// `replication::StateMachineStore::open` with the same prefix. The catalog changes
    /// only through the group's entries (propose `super::encode_command`, read the
    /// reply with `super::decode_reply`); a new group's catalog is empty until its
    /// first entries (database `test`, user `admin`) are proposed.
    pub fn open_replicated(
        engine: Arc<dyn Engine>,
        opts: ClusterOptions,
        prefix: &str,
    ) -> Result<(Arc<Cluster>, CatalogMachine), ClusterError> {
        let catalog: Arc<Catalog> = Arc::new(open_catalog(engine.clone(), prefix)?);
        let cluster = Cluster::assemble(engine, opts, catalog.clone())?;
        let effects = Arc::new(ClusterEffects(Arc::downgrade(&cluster)));
        Ok((cluster, CatalogMachine::with_catalog(catalog, effects)))
    }

    /// Sets how this node's replicated catalog proposes its changes (the catalog
    /// group's [`super::RaftProposer`]): from then on `TableAccess` and the system
    /// tables change the catalog through the group. False if it was set already or the
    /// catalog is not replicated.
    pub fn set_catalog_proposer(&self, p: Arc<dyn super::CatalogProposer>) -> bool {
        self.catalog.set_proposer(p)
    }

    /// Hosts the shards of this node's placed tables as Raft groups (`crate::groups`);
    /// set before the catalog group starts applying entries. False if set already.
    /// The catalog's placed tables (a restarted node's) are opened now.
    pub fn set_table_groups(&self, g: crate::groups::TableGroups) -> Result<bool, ClusterError> {
        if self.groups.set(Arc::new(g)).is_err() {
            return Ok(false);
        }
        // Under the catalog lock, so no entry applied meanwhile opens a table twice.
        let _g = self.catalog.lock();
        self.load_tables(|e| !e.placement.is_empty())?;
        Ok(true)
    }

    /// Whether this node's catalog is replicated (changes go through its group).
    pub fn is_replicated(&self) -> bool {
        self.catalog.is_replicated()
    }

    /// Turns this single server's catalog into the first state of the replicated catalog
    /// group stored under `prefix`: each table is placed on this server alone and its
    /// documents copied into its shards' groups (`super::founder`), its records
    /// (databases, tables with their placement, users, permissions) are copied into the
    /// group's spaces (`replication::seed`), the catalog moves there and from then on
    /// changes only through the group, and the group's machine is returned (hand it to
    /// the group's member, bootstrap this server as its only voter and `seal_seed`, so
    /// servers that join receive the catalog by snapshot; then record that the server is
    /// replicated and `set_table_groups`, which opens the tables on their groups and
    /// drops their local copies). Refused when the catalog is replicated already.
    /// Until the tables open on their groups, their local shards refuse writes.
    pub fn replicate_catalog(
        self: &Arc<Self>,
        prefix: &str,
    ) -> Result<CatalogMachine, ClusterError> {
        let mut g = self.catalog.lock();
        if g.replicated() {
            return Err(ClusterError::Write(
                "the catalog is replicated already".into(),
            ));
        }
        let placed = self.seed_tables(&g)?;
        let local = super::apply::Spaces::local();
        let sources = [
            (super::CATALOG_KIND.to_owned(), local.catalog),
            (super::USERS_KIND.to_owned(), local.users),
        ];
        let seeded = (|| {
            let seeded = |e: replication::HostError| ClusterError::Write(e.to_string());
            replication::seed(&*self.engine, prefix, &sources, 1 << 20).map_err(seeded)?;
            let names = replication::state_spaces(&*self.engine, prefix, &super::space_kinds())
                .map_err(|e| ClusterError::Corrupt(format!("replicated catalog state: {e}")))?;
            let spaces = super::machine::spaces_of(&names)?;
            self.write_placed(&spaces, &placed)?;
            Ok(spaces)
        })();
        let spaces = match seeded {
            Ok(s) => s,
            Err(e) => {
                self.thaw(&placed);
                return Err(e);
            }
        };
        g.become_replicated(spaces);
        g.place_tables(&placed);
        drop(g);
        let effects = Arc::new(ClusterEffects(Arc::downgrade(self)));
        Ok(CatalogMachine::with_catalog(self.catalog.clone(), effects))
    }

    /// How many side effects of a replicated catalog failed on this node.
    pub fn follow_failures(&self) -> u64 {
        self.follow_failures
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn failed(&self) {
        self.follow_failures
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The side effects of one committed entry.
    fn follow(&self, out: &Outcome) {
        // Dropped tables, renames, moves and durability: as the local path does.
        self.sync_handles(out);
        for (_, new) in &out.tables {
            if let Some(n) = new {
                self.follow_table(n);
            }
        }
    }

    /// After a snapshot install: every table as the catalog has it, and no other.
    fn reconcile(&self) {
        let tables: Vec<TableEntry> = self.catalog.read_state().tables.values().cloned().collect();
        let stale: Vec<String> = {
            let handles = self.handles.read();
            handles
                .keys()
                .filter(|id| !tables.iter().any(|t| t.id == **id))
                .cloned()
                .collect()
        };
        for id in &stale {
            self.retire(id);
        }
        for e in &tables {
            let out = Outcome {
                tables: vec![(self.handle_entry(e), Some(e.clone()))],
                ..Outcome::default()
            };
            self.sync_handles(&out);
            self.follow_table(e);
        }
    }

    /// The entry a handle stands for (name and durability), to diff against `e`.
    fn handle_entry(&self, e: &TableEntry) -> Option<TableEntry> {
        self.handle_by_id(&e.id).map(|h| TableEntry {
            db: h.db.clone(),
            name: h.name.clone(),
            durability: h.durability,
            ..e.clone()
        })
    }

    /// Opens `e`'s table if this node has no handle for it; cuts it at its split
    /// points and follows its index definitions and hook.
    fn follow_table(&self, e: &TableEntry) {
        let h = match self.handle_by_id(&e.id) {
            // A resharding finished: the new shards serve the table.
            Some(h)
                if h.replicated
                    .as_ref()
                    .is_some_and(|r| r.generation() != e.generation) =>
            {
                match self.switch_generation(&h, e) {
                    Ok(n) => {
                        self.handles.write().insert(e.id.clone(), n.clone());
                        n
                    }
                    Err(_) => return self.failed(),
                }
            }
            // Its replicas moved: the groups follow the new placement.
            Some(h)
                if h.replicated
                    .as_ref()
                    .is_some_and(|r| !r.placed_as(&e.placement)) =>
            {
                match self.replace_placement(&h, e) {
                    Ok(n) => {
                        self.handles.write().insert(e.id.clone(), n.clone());
                        n
                    }
                    Err(_) => return self.failed(),
                }
            }
            Some(h) => h,
            None => match self.open_table(e) {
                Ok(h) => {
                    self.handles.write().insert(e.id.clone(), h.clone());
                    h
                }
                Err(_) => return self.failed(),
            },
        };
        // A resharding under way: its new shards open next to the old ones; abandoned:
        // they are dropped.
        let next = e.resharded();
        let h = match next {
            Some(next) if h.pending.as_ref().map(|p| p.generation) != Some(next.generation) => {
                match self.open_pending(&h, &next) {
                    Ok(n) => {
                        self.handles.write().insert(e.id.clone(), n.clone());
                        n
                    }
                    Err(_) => return self.failed(),
                }
            }
            None if h.pending.is_some() => {
                let n = self.drop_pending(&h, &e.id);
                self.handles.write().insert(e.id.clone(), n.clone());
                n
            }
            _ => h,
        };
        if let Some(next) = e.resharded() {
            if let Some(p) = &h.pending {
                if p.table.follow_indexes(&next).is_err() {
                    self.failed();
                }
            }
        }
        // A replicated table's shards are its groups, re-cut by a resharding (above).
        if h.replicated.is_none() && !h.shards.cut_at(&e.splits) {
            let indexes = || h.indexes.all_ready();
            if h.shards.reshard(&e.splits, indexes).is_err() {
                self.failed();
            }
        }
        // A replicated table's replicas hold their own indexes; its definitions are
        // followed with no shard of the layout.
        let shards = match &h.replicated {
            Some(_) => vec![],
            None => h.shards.current().shards.clone(),
        };
        if h.indexes.follow(e, &shards).is_err() {
            self.failed();
        }
        if let Some(r) = &h.replicated {
            if r.follow_indexes(e).is_err() {
                self.failed();
            }
        }
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
