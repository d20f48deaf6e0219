//! `reconfigure(emergency_repair=...)` of a replicated table: the shards whose groups
//! lost a quorum of their voting replicas are placed anew as new groups of their
//! replicas on available servers (`crate::placement::repair`), recorded in the catalog
//! as an `AlterTable` with the repaired placement; every server's groups then follow
//! it (`crate::groups`: the seed copies its old copy's documents and starts the group
//! alone, the other kept replicas join it empty, every abandoned copy is dropped).
//!
//! The catalog itself must have its quorum (the change is a catalog entry): without it
//! the catalog's own error is returned, as for any reconfigure. Available servers are
//! the connected ones (`Cluster::server_records`). A table that is not replicated (a
//! single server's) never needs repair.

use datum::Datum;
use reql::error::op_failed;

use super::SYSTEM_DB;
use std::collections::HashMap;

use crate::placement::repair::{need, repair_ranked, Need, Refused};
use crate::Cluster;

impl Cluster {
    /// `reconfigure(emergency_repair=...)` of `db.name`: `erase` for
    /// `unsafe_rollback_or_erase`; RethinkDB's result shape, or its refusals.
    pub(crate) fn repair_table(
        &self,
        db: &str,
        name: &str,
        erase: bool,
        dry_run: bool,
    ) -> reql::Result<Datum> {
        if db == SYSTEM_DB {
            return Err(crate::access::special());
        }
        <Self as reql::TableAccess>::check_db(self, db)?;
        let e = self
            .table_entry(db, name)
            .ok_or_else(|| Self::no_table(db, name))?;
        if e.placement.is_empty() {
            return Err(op_failed(Refused::NotNeeded.message()));
        }
        let up: std::collections::HashSet<String> =
            self.server_records().into_iter().map(|r| r.id).collect();
        let available = |s: &str| up.contains(s);
        // An erased shard goes where a new one-replica table would.
        let mut erase_on = |_: usize| {
            self.check_placement(1, &reql::Replicas::count(1), None)
                .ok()
                .and_then(|p| p.into_iter().next())
                .map(|p| p.primary)
        };
        // Each available replica of a shard to roll back says how far it applied.
        let asks: Vec<(usize, String, replication::NodeId)> = (e.placement.iter().enumerate())
            .filter(|(_, p)| need(p, &available) == Need::Rollback)
            .flat_map(|(i, p)| {
                (p.all().filter(|s| available(s)))
                    .filter_map(move |s| Some((i, s.clone(), p.member(s)?)))
            })
            .collect();
        let members: Vec<_> = asks.iter().map(|(i, _, m)| (*i, *m)).collect();
        let answers = self.applied_by(&e.id, &members);
        let applied: HashMap<(usize, &str), u64> = (asks.iter().zip(answers))
            .filter_map(|((i, s, _), a)| Some(((*i, s.as_str()), a?)))
            .collect();
        let applied = |i: usize, s: &str| applied.get(&(i, s)).copied();
        let mut fresh = crate::placement::fresh_incarnation;
        let placement = repair_ranked(
            &e.placement,
            &available,
            &applied,
            erase,
            &mut erase_on,
            &mut fresh,
        )
        .map_err(|r| op_failed(r.message()))?;
        let old_cfg = super::table_config_row(self, &e, false);
        let old_status = super::table_status_row(self, &e, false);
        let mut ne = e.clone();
        ne.placement = placement.clone();
        ne.replicas = placement
            .iter()
            .map(|p| p.all().count() as u32)
            .max()
            .unwrap_or(e.replicas);
        if !dry_run {
            self.alter_table(
                &e.id,
                super::TableAlter {
                    replicas: Some(ne.replicas),
                    placement: Some(placement),
                    repair: true,
                    ..Default::default()
                },
            )
            .map_err(op_failed)?;
        }
        let new_cfg = super::table_config_row(self, &ne, false);
        let mut pairs = vec![
            (
                "reconfigured",
                Datum::Number(if dry_run { 0.0 } else { 1.0 }),
            ),
            ("config_changes", crate::catalog::change(old_cfg, new_cfg)),
        ];
        if !dry_run {
            let new_status = super::table_status_row(self, &ne, false);
            pairs.push((
                "status_changes",
                crate::catalog::change(old_status, new_status),
            ));
        }
        Ok(Datum::from_pairs(pairs))
    }
}
