//! The primary hand-back: a shard whose configured primary (`table_config`'s
//! `primary_replica`) is connected but does not lead its group gets its leadership
//! back, as in RethinkDB, where the configured primary takes over again when it
//! returns. This server acts for the groups it leads: it hands leadership to the
//! configured primary with `Proposer::transfer_leader` (openraft 0.9 has none: the Raft
//! thesis' procedure, see `replication::transfer`), which only succeeds once the
//! target holds the leader's whole log, so nothing acknowledged is at stake.
//!
//! Invariants: at most one transfer at a time from this server, each bounded by
//! [`TRANSFER_TIMEOUT`]; a group whose transfer failed is left alone for [`BACKOFF`]
//! (a target that cannot catch up is not pestered every round).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::Cluster;
use replication::{GroupId, Host, SharedTransport};

/// How long one transfer may take (catch-up, the leader's lease, the election).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a group whose transfer failed is left alone.
const BACKOFF: Duration = Duration::from_secs(10);
/// How long the configured primary must have been connected before it is handed the
/// lead (a server that just came back first catches up as a follower).
pub(super) const SETTLE: Duration = Duration::from_secs(2);

/// Groups whose last transfer failed, and when.
#[derive(Default)]
pub(super) struct HandBack {
    failed: HashMap<GroupId, Instant>,
}

impl HandBack {
    /// One round: hands back the first group this server leads whose configured
    /// primary is among `settled` (server ids connected for at least [`SETTLE`]).
    pub(super) async fn round(
        &mut self,
        cluster: &Cluster,
        host: &Arc<Host<SharedTransport>>,
        transport: &SharedTransport,
        me: &str,
        settled: &[String],
    ) -> Option<String> {
        let now = Instant::now();
        self.failed
            .retain(|_, at| now.duration_since(*at) < BACKOFF);
        for (table, generation, shards) in cluster.placements() {
            for (i, place) in shards.iter().enumerate() {
                if place.primary == me || !settled.contains(&place.primary) {
                    continue;
                }
                let group =
                    cluster::groups::group_of(&table, cluster::groups::slot_of(generation, i));
                if self.failed.contains_key(&group) {
                    continue;
                }
                let Some(member) = host.member(group) else {
                    continue;
                };
                let m = member.raft.metrics().borrow().clone();
                if m.current_leader != Some(m.id) {
                    continue;
                }
                let Some(target) = place.member(&place.primary) else {
                    continue;
                };
                // The primary's replica must be a voter of the group (a new one is
                // first caught up and promoted by the moves).
                if !m
                    .membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == target)
                {
                    continue;
                }
                let outcome = member
                    .proposer
                    .transfer_leader(transport, group, target, TRANSFER_TIMEOUT)
                    .await;
                return Some(match outcome {
                    Ok(_) => format!("handed shard {i} of table {table} back to its primary"),
                    Err(e) => {
                        self.failed.insert(group, Instant::now());
                        format!(
                            "could not hand shard {i} of table {table} back to its primary: {e}"
                        )
                    }
                });
            }
        }
        None
    }
}
