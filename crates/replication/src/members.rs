//! Growing a group to the servers that should be in it ([`grow`]): run on every member
//! periodically (only the leader acts), it adds each wanted server the group lacks as a
//! learner, waits for it to catch up, then makes the group's voters the wanted servers
//! (at most `max_voters`; the rest stay learners). The catalog's group uses it as
//! servers join; [`next_voters`] is its pure rule.
//!
//! Invariants: voters are only added, never removed (a server that is away keeps its
//! vote, as RethinkDB keeps a server's replicas until an operator removes it), so a
//! partition cannot shrink the group; a voter is added only after it caught up as a
//! learner (`add_learner` blocking), so the quorum never waits for a new member's
//! backfill; only the leader changes the membership, one change at a time.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{Node, NodeId, Raft};

/// The voters the group should have: its current voters, then wanted servers in id
/// order until there are `max_voters` (none dropped, even above the cap).
pub fn next_voters(
    current: &BTreeSet<NodeId>,
    wanted: &BTreeSet<NodeId>,
    max_voters: usize,
) -> BTreeSet<NodeId> {
    let mut next = current.clone();
    for id in wanted {
        if next.len() >= max_voters {
            break;
        }
        next.insert(*id);
    }
    next
}

/// What [`grow`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grown {
    /// Servers added as learners.
    pub learners: Vec<NodeId>,
    /// Whether the voters changed.
    pub voters_changed: bool,
}

/// If this member leads, adds the `wanted` servers the group lacks (learners first, then
/// voters up to `max_voters`). A member that does not lead does nothing.
pub async fn grow(
    raft: &Raft,
    wanted: &BTreeMap<NodeId, Node>,
    max_voters: usize,
) -> Result<Grown, String> {
    let metrics = raft.metrics().borrow().clone();
    if metrics.current_leader != Some(metrics.id) {
        return Ok(Grown::default());
    }
    let membership = metrics.membership_config.membership().clone();
    let known: BTreeSet<NodeId> = membership.nodes().map(|(id, _)| *id).collect();
    let mut grown = Grown::default();
    for (id, node) in wanted {
        if !known.contains(id) {
            raft.add_learner(*id, node.clone(), true)
                .await
                .map_err(|e| e.to_string())?;
            grown.learners.push(*id);
        }
    }
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let ids: BTreeSet<NodeId> = wanted.keys().copied().collect();
    let next = next_voters(&voters, &ids, max_voters);
    if next != voters {
        raft.change_membership(next, true)
            .await
            .map_err(|e| e.to_string())?;
        grown.voters_changed = true;
    }
    Ok(grown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn voters_grow_to_the_cap_and_never_shrink() {
        assert_eq!(next_voters(&set(&[1]), &set(&[2, 3]), 5), set(&[1, 2, 3]));
        assert_eq!(
            next_voters(&set(&[1]), &set(&[2, 3, 4, 5, 6, 7]), 5),
            set(&[1, 2, 3, 4, 5])
        );
        // A voter that is not wanted now (away) keeps its vote.
        assert_eq!(next_voters(&set(&[1, 9]), &set(&[2]), 5), set(&[1, 2, 9]));
        // Above the cap already: nothing added, nothing dropped.
        assert_eq!(
            next_voters(&set(&[1, 2, 3]), &set(&[4]), 2),
            set(&[1, 2, 3])
        );
    }
}
