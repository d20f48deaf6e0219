//! Catalog changes made through the system tables and the admin terms: renaming tables
//! and databases, changing a table's durability or recorded sharding, creating a table
//! with a given id. Each is a catalog command (`crate::catalog::CatalogCommand`) applied
//! under the catalog lock; resharding and handle updates follow from its outcome. A
//! replicated table is resharded by `crate::reshard` first (outside the lock: it
//! copies the table), then the other changes are applied. An emergency repair abandons
//! a resharding under way instead (`AbortReshard`: it repairs the old shards, which
//! serve the table), and their unfreeze follows the repair.

use reql::Durability;

use super::{system_id, SYSTEM_DB};
use crate::catalog::{message, CatalogCommand, TableChanges, TableEntry};
use crate::Cluster;

/// What to change in a table's configuration (`None` keeps the value).
#[derive(Default)]
pub(crate) struct TableAlter {
    pub(crate) db: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) durability: Option<Durability>,
    /// `write_acks`: `Some(true)` for `"single"`.
    pub(crate) single_ack: Option<bool>,
    pub(crate) shards: Option<u32>,
    pub(crate) replicas: Option<u32>,
    /// Cut the shards anew from the data's distribution even if their number stays.
    pub(crate) rebalance: bool,
    /// Which servers hold each shard (a replicated catalog's tables).
    pub(crate) placement: Option<Vec<crate::placement::ShardPlacement>>,
    /// `placement` is an emergency repair's: its incarnations are the repair's own.
    pub(crate) repair: bool,
}

impl Cluster {
    /// `(name, id)` of every user database, by name.
    pub(crate) fn dbs_snapshot(&self) -> Vec<(String, String)> {
        self.catalog
            .read_state()
            .dbs
            .iter()
            .map(|(n, e)| (n.clone(), e.id.clone()))
            .collect()
    }

    /// Every table's catalog entry, by database and name.
    pub(crate) fn tables_snapshot(&self) -> Vec<TableEntry> {
        self.catalog.read_state().tables.values().cloned().collect()
    }

    /// The id of a database (the system database included).
    pub(crate) fn db_id_of(&self, name: &str) -> Option<String> {
        if name == SYSTEM_DB {
            return Some(system_id(SYSTEM_DB));
        }
        self.catalog
            .read_state()
            .dbs
            .get(name)
            .map(|e| e.id.clone())
    }

    /// The name of the database with `id` (user databases only).
    pub(crate) fn db_name_of(&self, id: &str) -> Option<String> {
        self.catalog
            .read_state()
            .dbs
            .iter()
            .find(|(_, e)| e.id == id)
            .map(|(n, _)| n.clone())
    }

    /// The catalog entry of the table with `id`.
    pub(crate) fn table_by_id(&self, id: &str) -> Option<TableEntry> {
        self.catalog
            .read_state()
            .tables
            .values()
            .find(|e| e.id == id)
            .cloned()
    }

    /// The catalog entry of `db.name`.
    pub(crate) fn table_entry(&self, db: &str, name: &str) -> Option<TableEntry> {
        self.catalog
            .read_state()
            .tables
            .get(&(db.to_string(), name.to_string()))
            .cloned()
    }

    /// Changes a table's name, database, durability or recorded sharding (`AlterTable`).
    pub(crate) fn alter_table(&self, id: &str, a: TableAlter) -> Result<(), String> {
        let mut a = a;
        let repair = a.repair;
        if repair {
            // The old shards may lack the quorum to finish it; they are repaired first.
            self.abandon_reshard(id)?;
        }
        if let Some(target) = self.reshard_target(id, &mut a) {
            self.reshard_replicated(id, target)?;
        }
        let mut g = self.catalog.lock();
        let (old, db_id) = {
            let st = g.state();
            let old = st
                .tables
                .values()
                .find(|e| e.id == id)
                .cloned()
                .ok_or_else(|| format!("Table with id `{id}` does not exist."))?;
            let db_id = match &a.db {
                Some(db) => Some(
                    st.dbs
                        .get(db)
                        .map(|d| d.id.clone())
                        .ok_or_else(|| format!("Database `{db}` does not exist."))?,
                ),
                None => None,
            };
            (old, db_id)
        };
        let shards = a.shards.unwrap_or(old.shards);
        let handle = self.handle_by_id(id);
        // Resharding: new split points from the data, the indexes to register with the
        // new shards (none may be building: its backfill holds the old shards' locks).
        let building = |name: String| {
            format!(
                "Cannot reshard table `{}.{}` while its index `{name}` is being built.",
                old.db, old.name
            )
        };
        let reshard = match &handle {
            // A replicated table was resharded above (`reshard_target`).
            Some(h) if (shards != old.shards || a.rebalance) && h.replicated.is_none() => {
                h.indexes.all_ready().map_err(building)?;
                let splits = h
                    .shards
                    .balanced_splits(shards as usize)
                    .map_err(|e| e.to_string())?;
                Some(splits)
            }
            _ => None,
        };
        let changes = TableChanges {
            name: a.name,
            db_id,
            durability: a.durability.map(|d| d.as_str().to_string()),
            write_acks: a
                .single_ack
                .map(|s| crate::catalog::write_acks_str(s).to_string()),
            shards: a.shards,
            replicas: a.replicas,
            split_points: reshard
                .as_ref()
                .map(|s| s.iter().map(datum::to_json_value).collect()),
            placement: match a.placement {
                _ if !g.replicated() => None,
                Some(p) => Some(p),
                // Re-placed for a new shard or replica count (a `table_config` write).
                None if a.shards.is_some() || a.replicas.is_some() => {
                    let replicas = reql::Replicas::count(a.replicas.unwrap_or(old.replicas));
                    Some(
                        self.check_placement(
                            shards,
                            &replicas,
                            (!old.placement.is_empty()).then_some(&old.placement[..]),
                        )
                        .map_err(message)?,
                    )
                }
                None => None,
            },
        };
        // Fresh incarnations proposed for every replica; the catalog keeps those of the
        // replicas that stay, against the placement it has when it applies this (this
        // server's view may be behind). Every node's groups follow the recorded
        // placement: `crate::groups`, the leaders' moves.
        let mut changes = changes;
        if let Some(p) = changes.placement.as_mut().filter(|_| !a.repair) {
            crate::placement::propose_incarnations(p);
        }
        let out = g
            .apply(CatalogCommand::AlterTable {
                id: id.to_string(),
                changes,
            })
            .map_err(message)?;
        // Replicated, every node cut the table as it applied the entry (`follow`).
        let reshard = reshard.filter(|_| !g.replicated());
        if let (Some(h), Some(splits)) = (&handle, reshard) {
            // The data stays where it is: any split points are valid after a crash. The
            // indexes are taken under the layout's lock, so none created meanwhile is
            // missed (a reshard refuses while one is building).
            h.shards
                .reshard(&splits, || h.indexes.all_ready().map_err(building))?;
        }
        self.sync_handles(&out);
        drop(g);
        if repair && self.table_by_id(id).is_some_and(|e| e.abandoned.unfreezing) {
            // Once the repaired groups run (the catalog's leader tries again later).
            self.resume_in_background(id.to_string());
        }
        Ok(())
    }

    /// What to reshard replicated table `id` to, when `a` changes its number of shards
    /// or rebalances it, or a resharding of it is under way (it is finished first):
    /// those changes are taken out of `a`. None for any other table or change.
    fn reshard_target(&self, id: &str, a: &mut TableAlter) -> Option<crate::reshard::Target> {
        let old = self.table_by_id(id)?;
        self.handle_by_id(id)?.replicated.as_ref()?;
        let shards = a.shards.unwrap_or(old.shards);
        let resharding = shards != old.shards || a.rebalance;
        let under_way = old.resharding.is_some() || old.abandoned.unfreezing;
        // A repair keeps the shards (its resharding was abandoned, above).
        if a.repair || (!resharding && !under_way) {
            return None;
        }
        let target = crate::reshard::Target {
            shards,
            replicas: a.replicas.unwrap_or(old.replicas),
            placement: if resharding { a.placement.take() } else { None },
            rebalance: a.rebalance,
            // Another change while a resharding is under way: that one is finished
            // first, and nothing more is resharded.
            resume_only: !resharding,
        };
        if resharding {
            a.shards = None;
            a.replicas = None;
            a.rebalance = false;
        }
        Some(target)
    }

    /// Renames the database with `id` (`RenameDb`).
    pub(crate) fn rename_db(&self, id: &str, new_name: &str) -> Result<(), String> {
        let mut g = self.catalog.lock();
        let old_name = {
            let st = g.state();
            let old = st
                .dbs
                .iter()
                .find(|(_, e)| e.id == id)
                .map(|(n, _)| n.clone())
                .ok_or_else(|| format!("Database with id `{id}` does not exist."))?;
            if old != new_name && (new_name == SYSTEM_DB || st.dbs.contains_key(new_name)) {
                return Err(format!("Database `{new_name}` already exists."));
            }
            old
        };
        if old_name == new_name {
            return Ok(());
        }
        let out = g
            .apply(CatalogCommand::RenameDb {
                id: id.to_string(),
                name: new_name.to_string(),
            })
            .map_err(message)?;
        self.sync_handles(&out);
        Ok(())
    }

    /// Creates a database with a given id (an insert into `db_config`).
    pub(crate) fn create_db_with_id(&self, name: &str, id: &str) -> Result<(), String> {
        let mut g = self.catalog.lock();
        if name == SYSTEM_DB || g.state().dbs.contains_key(name) {
            return Err(format!("Database `{name}` already exists."));
        }
        g.apply(CatalogCommand::CreateDb {
            id: id.to_string(),
            name: name.to_string(),
        })
        .map(|_| ())
        .map_err(message)
    }

    /// Creates a table with a given id (an insert into `table_config`).
    pub(crate) fn create_table_with_id(&self, e: TableEntry) -> Result<(), String> {
        let mut g = self.catalog.lock();
        {
            let st = g.state();
            if !st.dbs.contains_key(&e.db) {
                return Err(format!("Database `{}` does not exist.", e.db));
            }
            if st.tables.contains_key(&(e.db.clone(), e.name.clone())) {
                return Err(format!("Table `{}.{}` already exists.", e.db, e.name));
            }
        }
        let mut e = e;
        if g.replicated() && e.placement.is_empty() {
            let replicas = reql::Replicas::count(e.replicas);
            e.placement = self
                .check_placement(e.shards, &replicas, None)
                .map_err(message)?;
        }
        self.create_table_locked(&mut g, &e).map_err(message)
    }
}
