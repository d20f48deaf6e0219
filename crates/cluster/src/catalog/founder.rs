//! Converting a single server that has tables at its first join (docs/clustering.md,
//! "Converting a founder that has tables"): the table side of
//! `Cluster::replicate_catalog`, and dropping the local copies once the converted
//! catalog is in charge.
//!
//! Order, for crash safety: (1) every table's local shards are frozen (writes in flight
//! finish, later ones are refused with a retry message); (2) each table is placed on
//! this server alone and its documents are copied into its shards' groups, fsynced
//! (`crate::groups::founder`); (3) the caller seeds the catalog group with the placed
//! entries and seals it; (4) the server records that it is replicated (`server.json`),
//! the commit point; (5) only then the placed tables open on their groups and their
//! local spaces are dropped ([`Cluster::drop_local_copy`], also at every start, for a
//! crash between (4) and (5)). A crash before (4) restarts the single server on its own
//! untouched catalog and spaces (the next conversion drops the half-made groups); after
//! it, the groups hold every document. Nothing is ever deleted before (4).

use storage::WriteBatch;

use super::apply::{table_key, table_record, CatalogGuard, Spaces, TableEntry};
use super::{space_of, Cluster, ClusterError};
use crate::groups::founder::{founder_placement, seed_from_local};
use crate::table::TableHandle;

impl Cluster {
    /// Steps (1) and (2) for every table of the catalog held by `g`: the placed entries.
    /// On failure the tables are thawed and serve locally as before.
    pub(super) fn seed_tables(&self, g: &CatalogGuard) -> Result<Vec<TableEntry>, ClusterError> {
        let tables: Vec<TableEntry> = g.state().tables.values().cloned().collect();
        for e in &tables {
            if let Some(h) = self.handle_by_id(&e.id) {
                h.shards.freeze(true);
            }
        }
        let seeded = self.seed_frozen(tables.clone());
        if seeded.is_err() {
            self.thaw(&tables);
        }
        seeded
    }

    /// Lets the local shards of `tables` take writes again (a conversion that failed
    /// before anything was committed).
    pub(super) fn thaw(&self, tables: &[TableEntry]) {
        for e in tables {
            if let Some(h) = self.handle_by_id(&e.id) {
                h.shards.freeze(false);
            }
        }
    }

    fn seed_frozen(&self, tables: Vec<TableEntry>) -> Result<Vec<TableEntry>, ClusterError> {
        let me = self.admin.server_id.clone();
        let mut placed = Vec::with_capacity(tables.len());
        for mut e in tables {
            if !e.placement.is_empty() {
                return Err(ClusterError::Write(format!(
                    "table {}.{} is placed already",
                    e.db, e.name
                )));
            }
            e.placement = founder_placement(&me, e.splits.len() + 1);
            let copied = seed_from_local(&*self.engine, &e, &me, &space_of(&e.id))
                .map_err(|m| ClusterError::Write(format!("table {}.{}: {m}", e.db, e.name)))?;
            tracing::info!(
                "table {}.{}: {copied} documents copied into its replicated shards",
                e.db,
                e.name
            );
            placed.push(e);
        }
        Ok(placed)
    }

    /// The placed entries' records in the catalog group's `spaces` (seeded with the
    /// single server's records, which have no placement), fsynced.
    pub(super) fn write_placed(
        &self,
        spaces: &Spaces,
        placed: &[TableEntry],
    ) -> Result<(), ClusterError> {
        let mut b = WriteBatch::new();
        for e in placed {
            b.put(
                &spaces.catalog,
                table_key(&e.id),
                table_record(e).to_json_bytes(),
            );
        }
        self.engine.apply(b)?;
        self.engine.persist()?;
        Ok(())
    }

    /// Drops what a placed table `e` kept in this server's local spaces as a single
    /// server (documents and index entries), with the indexes `before` (its handle as a
    /// single server, if it had one) registered. Its data is in its groups.
    pub(crate) fn drop_local_copy(&self, e: &TableEntry, before: Option<&TableHandle>) {
        if let Some(h) = before {
            h.indexes.drop_all(&h.shards.current().shards);
        }
        let docs = space_of(&e.id);
        let indexes = format!("i_{}_", e.id);
        for name in self.engine.space_names().unwrap_or_default() {
            if name == docs || name.starts_with(&indexes) {
                match self.engine.drop_space(&name) {
                    Ok(()) => tracing::info!("dropped {name}: its table is replicated"),
                    Err(err) => tracing::warn!("could not drop {name}: {err}"),
                }
            }
        }
    }
}
