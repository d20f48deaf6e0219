//! The replica moves of the shard groups this server leads: each round, for every
//! placed table's shard whose group's leader is here, one membership change towards
//! the recorded placement (`cluster::moves::next_step`: learners first, the voters
//! switched once the new ones caught up, demoted learners removed last).
//!
//! Invariants: only a group's leader changes its membership, one change per group per
//! round, each bounded by [`CHANGE_TIMEOUT`]; a learner is added without waiting for it
//! to catch up (a server that is away must not hold up the round); the seed of a
//! repaired shard's group changes nothing until its log was purged behind the seeded
//! documents' snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::moves::{next_step, want_of, Step, View};
use cluster::Cluster;
use replication::openraft::ChangeMembers;
use replication::{Host, Node, NodeId, SharedTransport};

/// How long one membership change may take.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(5);

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
            let membership = m.membership_config.membership();
            let view = View {
                voters: membership.voter_ids().collect(),
                learners: membership.learner_ids().collect(),
                matched: m
                    .replication
                    .iter()
                    .flatten()
                    .map(|(n, l)| (*n, l.map(|l| l.index)))
                    .collect(),
                last: m.last_log_index.unwrap_or(0),
                config_index: m.membership_config.log_id().map_or(0, |l| l.index),
            };
            let want = want_of(place);
            let Some(step) = next_step(&view, &want) else {
                continue;
            };
            let what = format!("{step:?}");
            let change = match step {
                Step::AddLearners(ids) => {
                    let nodes: BTreeMap<NodeId, Node> = place
                        .all()
                        .filter_map(|s| {
                            let id = place.member(s)?;
                            ids.contains(&id).then_some(())?;
                            Some((id, Node::new(addresses(s)?)))
                        })
                        .collect();
                    if nodes.is_empty() {
                        continue;
                    }
                    ChangeMembers::AddNodes(nodes)
                }
                Step::ReplaceVoters(ids) => ChangeMembers::ReplaceAllVoters(ids),
                Step::DemoteVoters(ids) => ChangeMembers::RemoveVoters(ids),
                Step::RemoveLearners(ids) => ChangeMembers::RemoveNodes(ids),
            };
            let outcome =
                tokio::time::timeout(CHANGE_TIMEOUT, member.raft.change_membership(change, true))
                    .await;
            done.push(match outcome {
                Ok(Ok(_)) => format!("shard {i} of table {table}: {what}"),
                Ok(Err(e)) => format!("shard {i} of table {table}: {what} failed: {e}"),
                Err(_) => format!("shard {i} of table {table}: {what} timed out"),
            });
        }
    }
    done
}
