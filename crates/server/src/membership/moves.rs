//! The replica moves of the shard groups this server leads: each round, for every
//! placed table's shard whose group's leader is here, one membership change towards
//! the recorded placement (`cluster::moves::change_once`, by the rule `next_step`:
//! learners first, the voters switched once the new ones caught up, demoted learners
//! removed last).
//!
//! Invariants: only a group's leader changes its membership, one change per group per
//! round, each bounded by [`CHANGE_TIMEOUT`]; a learner is added without waiting for it
//! to catch up (a server that is away must not hold up the round); the seed of a
//! repaired shard's group changes nothing until its log was purged behind the seeded
//! documents' snapshot.

use std::sync::Arc;

use cluster::moves::{change_once, want_of, CHANGE_TIMEOUT};
use cluster::Cluster;
use replication::{Host, Node, NodeId, SharedTransport};

/// One round over the groups led here; what was done, for the log.
pub(super) async fn round(
    cluster: &Cluster,
    host: &Arc<Host<SharedTransport>>,
    addresses: &cluster::groups::Addresses,
) -> Vec<String> {
    let mut done = Vec::new();
    for (table, generation, shards) in cluster.placements() {
        for (i, place) in shards.iter().enumerate() {
            let slot = cluster::groups::slot_of(generation, i);
            let group = cluster::groups::group_of(&table, slot);
            let Some(member) = host.member(group) else {
                continue;
            };
            let m = member.raft.metrics().borrow().clone();
            if m.current_leader != Some(m.id) {
                continue;
            }
            // A repaired shard's seed adds no one before its seeded documents are a
            // snapshot (`cluster::groups`: a member that replayed the log from its
            // start would lack them).
            if place.lineage.seed == Some(m.id) && m.purged.is_none() {
                continue;
            }
            let want = want_of(place);
            // A learner's address: its server's, by the replica's node id.
            let node = |id: NodeId| {
                let server = place.all().find(|s| place.member(s) == Some(id))?;
                Some(Node::new(addresses(server)?))
            };
            let Some((step, outcome)) =
                change_once(&member.raft, &want, node, CHANGE_TIMEOUT).await
            else {
                continue;
            };
            done.push(match outcome {
                Ok(()) => format!("shard {i} of table {table}: {step:?}"),
                Err(e) => format!("shard {i} of table {table}: {step:?} failed: {e}"),
            });
        }
    }
    done
}
