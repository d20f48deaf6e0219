//! A single server's tables becoming replicated at its first join (docs/clustering.md,
//! "Converting a founder that has tables"): each table gets a placement with this
//! server as the only replica of each of its shards ([`founder_placement`]), and each
//! shard's documents are copied from the table's local space into that replica's
//! group before the group exists ([`seed_from_local`]). The group then starts as an
//! emergency repair's does (`super::repair`): this server is the lineage's seed, starts
//! it alone and seals the copied documents as a snapshot, so replicas added later
//! receive them. Secondary index definitions are in the table's catalog entry; each
//! replica builds their entries itself (`crate::replica::ShardIndexes`).
//!
//! Invariants: a seed writes only into a group that has applied nothing (storage left
//! under the table's group prefixes by an earlier attempt that never finished is
//! dropped first); the local space is only read here (dropped by the caller once the
//! converted catalog is durable).

use std::ops::Bound;

use super::prefix_of;
use crate::catalog::TableEntry;
use crate::placement::{fresh_incarnation, Lineage, ShardPlacement};

/// The placement of a single server's table of `shards` shards: server `me` the only
/// replica and primary of each, a fresh incarnation each, and the lineage's seed (its
/// copy starts the group alone from the seeded documents).
pub(crate) fn founder_placement(me: &str, shards: usize) -> Vec<ShardPlacement> {
    (0..shards)
        .map(|_| {
            let inc = fresh_incarnation();
            let mut shard = ShardPlacement {
                primary: me.to_owned(),
                voting: vec![me.to_owned()],
                nonvoting: vec![],
                incarnations: [(me.to_owned(), inc)].into_iter().collect(),
                lineage: Lineage::default(),
            };
            shard.lineage.seed = shard.member(me);
            shard
        })
        .collect()
}

/// Copies the documents of table `e` (placed by [`founder_placement`] on `me`) from its
/// local space `local` into each shard's group, each shard its own key range. Returns
/// how many documents were copied.
pub(crate) fn seed_from_local(
    engine: &dyn storage::Engine,
    e: &TableEntry,
    me: &str,
    local: &str,
) -> Result<u64, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    // What an attempt cut short by a crash left (other incarnations, or a copy that
    // never started): nothing has used it.
    let head = format!("raft.t{}.", e.id);
    for name in engine.space_names().map_err(|e| err(&e))? {
        if name.starts_with(&head) {
            engine.drop_space(&name).map_err(|e| err(&e))?;
        }
    }
    let ranges = crate::shards::Sharded::ranges(&e.splits).map_err(|e| err(&e))?;
    if ranges.len() != e.placement.len() {
        return Err(format!(
            "table {}: {} shards, {} placed",
            e.id,
            ranges.len(),
            e.placement.len()
        ));
    }
    let mut copied = 0;
    for (i, (range, place)) in ranges.iter().zip(&e.placement).enumerate() {
        let inc = place
            .incarnation(me)
            .ok_or_else(|| format!("table {} shard {i} is not placed here", e.id))?;
        let bounds = (
            range
                .lower
                .clone()
                .map_or(Bound::Unbounded, Bound::Included),
            range
                .upper
                .clone()
                .map_or(Bound::Unbounded, Bound::Excluded),
        );
        let sources = [(store::DOCS.to_owned(), local.to_owned())];
        let prefix = prefix_of(&e.id, i, inc);
        copied += replication::seed_range(engine, &prefix, &sources, bounds, 1 << 20)
            .map_err(|e| err(&e))?;
    }
    Ok(copied)
}
