//! The server's side of an emergency repair of a shard (docs/clustering.md,
//! "Emergency repair"): the seed of the shard's new group copies the documents of its
//! server's abandoned copy into the new copy before its machine opens
//! ([`seed_from_abandoned`]), and once it has started the group alone makes them a
//! snapshot with the log purged behind it ([`seal`]), so every replica that joins
//! later receives them by snapshot.
//!
//! Invariants: documents are copied only into a copy that has applied nothing (a copy
//! cut short by a crash is overwritten by the next attempt); only copies whose node id
//! the shard's lineage abandons are read.

use std::time::Duration;

use replication::{GroupId, Host, SharedTransport};

use super::{prefix_of, stored_incarnations};
use crate::placement::ShardPlacement;

/// Copies the documents of this server's most advanced abandoned copy of shard `shard`
/// of table `table` (`place.lineage.abandoned`) into the new copy under `prefix`,
/// unless that copy has applied something already (it was seeded and started before a
/// restart) or there is none (an erased shard starts empty). A copy cut short by a
/// crash is overwritten by the next attempt (the new copy has applied nothing yet).
pub(super) fn seed_from_abandoned(
    engine: &dyn storage::Engine,
    table: &str,
    shard: usize,
    prefix: &str,
    me: &str,
    place: &ShardPlacement,
) -> Result<(), replication::HostError> {
    if replication::applied_log_id(engine, prefix)?.is_some() {
        return Ok(());
    }
    let mut best: Option<(Option<u64>, String)> = None;
    for inc in stored_incarnations(engine, table, shard) {
        let Ok(id) = replication::member_id(me, inc) else {
            continue;
        };
        if !place.lineage.abandoned.contains(&id) {
            continue;
        }
        let old = prefix_of(table, shard, inc);
        let applied = replication::applied_log_id(engine, &old)?.map(|l| l.index);
        if best.as_ref().is_none_or(|(b, _)| applied > *b) {
            best = Some((applied, old));
        }
    }
    let Some((_, old)) = best else {
        return Ok(());
    };
    let kind = store::DOCS.to_string();
    let spaces = replication::state_spaces(engine, &old, std::slice::from_ref(&kind))?;
    let Some(docs) = spaces.into_iter().next() else {
        return Ok(());
    };
    if !engine.space_names()?.contains(&docs) {
        return Ok(());
    }
    let copied = replication::seed(engine, prefix, &[(kind, docs)], 1 << 20)?;
    tracing::info!("table {table} shard {shard}: {copied} documents seeded from an abandoned copy");
    Ok(())
}

/// Makes a seeded group's state a snapshot and purges its log behind it (unless its
/// log was purged already), so every member that joins receives the seeded documents
/// by snapshot instead of replaying a log that lacks them. Tried until it succeeds or
/// the member closes.
pub(super) async fn seal(
    host: &Host<SharedTransport>,
    group: GroupId,
    raft: &replication::Raft,
    wait: Duration,
) {
    loop {
        if raft.metrics().borrow().purged.is_some() {
            return;
        }
        match host.seal_seed(group, wait).await {
            Ok(()) => return,
            Err(replication::HostError::NotOpen(_)) => return,
            Err(e) => tracing::warn!("group {group}: could not seal its seeded documents: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
