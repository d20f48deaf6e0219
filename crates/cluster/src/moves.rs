//! Moving a replicated shard's replicas to the placement the catalog records
//! (`reconfigure`, `table_config` writes): the rule a shard group's leader follows, one
//! membership change at a time ([`next_step`]; the server's controller carries it out
//! on the groups it leads, `server::membership::moves`).
//!
//! Order, as RethinkDB backfills before it switches: every wanted replica is added as a
//! learner (a non-voting replica stays one); once every wanted voter has caught up, the
//! voters become exactly the wanted ones in one joint-consensus change, the others kept
//! as learners; a learner nobody wants is removed once it has the configuration that
//! made it a learner (so it knows it may drop its copy, `crate::groups`, and never
//! stands for election with a stale configuration).
//!
//! One exception: a server whose replica was dropped and placed again holds the new
//! incarnation only after the old one left (one copy of a group per server). When a
//! wanted replica waits for such an old copy that still votes, that copy alone is made
//! a learner first (if voters remain).
//!
//! [`change_once`] carries one step out on a group's Raft (the server's controller and
//! the deterministic simulation both call it).
//!
//! Invariants: [`next_step`] is pure; voters are never changed before every wanted voter caught up
//! (except that exception, which never empties the voters); a learner is removed only
//! once it holds the configuration that demoted it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use replication::openraft::{ChangeMembers, RaftMetrics};
use replication::{same_server, Node, NodeId, Raft};

/// How long one membership change may take.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// How far behind the leader's log a learner may be and count as caught up.
pub const CAUGHT_UP_LAG: u64 = 128;

/// A group's membership as its leader sees it.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The voters (of both halves while a joint configuration is in effect).
    pub voters: BTreeSet<NodeId>,
    /// The learners.
    pub learners: BTreeSet<NodeId>,
    /// Each follower's and learner's last log index known to match the leader's.
    pub matched: BTreeMap<NodeId, Option<u64>>,
    /// The leader's last log index.
    pub last: u64,
    /// The log index of the membership in effect.
    pub config_index: u64,
    /// While a joint configuration is in effect: its second half's voters (where the
    /// change that made it was going).
    pub joint: Option<BTreeSet<NodeId>>,
}

impl View {
    /// The membership as a leader's `metrics` show it.
    pub fn of(m: &RaftMetrics<NodeId, Node>) -> Self {
        let membership = m.membership_config.membership();
        View {
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
            joint: match membership.get_joint_config().as_slice() {
                [_, second] => Some(second.clone()),
                _ => None,
            },
        }
    }
}

/// If `raft` leads its group and a change towards `want` is due, makes it (within
/// `timeout`): the step taken and its outcome. `None`: not the leader, nothing due, or
/// no address known for a learner to add (`node` answers a member's address).
pub async fn change_once(
    raft: &Raft,
    want: &Want,
    node: impl Fn(NodeId) -> Option<Node>,
    timeout: Duration,
) -> Option<(Step, Result<(), String>)> {
    let m = raft.metrics().borrow().clone();
    if m.current_leader != Some(m.id) {
        return None;
    }
    let step = next_step(&View::of(&m), want)?;
    let change = match &step {
        Step::AddLearners(ids) => {
            let nodes: BTreeMap<NodeId, Node> = ids
                .iter()
                .filter_map(|id| Some((*id, node(*id)?)))
                .collect();
            if nodes.is_empty() {
                return None;
            }
            ChangeMembers::AddNodes(nodes)
        }
        Step::ReplaceVoters(ids) => ChangeMembers::ReplaceAllVoters(ids.clone()),
        Step::DemoteVoters(ids) => ChangeMembers::RemoveVoters(ids.clone()),
        Step::RemoveLearners(ids) => ChangeMembers::RemoveNodes(ids.clone()),
    };
    let outcome = match tokio::time::timeout(timeout, raft.change_membership(change, true)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    };
    Some((step, outcome))
}

/// What the placement wants: the voters' and the non-voting replicas' node ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Want {
    /// Voting replicas.
    pub voters: BTreeSet<NodeId>,
    /// Non-voting replicas.
    pub learners: BTreeSet<NodeId>,
}

/// The next membership change of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Add these as learners.
    AddLearners(BTreeSet<NodeId>),
    /// Make these exactly the voters (the others stay learners).
    ReplaceVoters(BTreeSet<NodeId>),
    /// Make these voters learners.
    DemoteVoters(BTreeSet<NodeId>),
    /// Remove these learners.
    RemoveLearners(BTreeSet<NodeId>),
}

impl View {
    fn member(&self, n: NodeId) -> bool {
        self.voters.contains(&n) || self.learners.contains(&n)
    }

    fn caught_up(&self, n: NodeId) -> bool {
        self.voters.contains(&n)
            || self
                .matched
                .get(&n)
                .copied()
                .flatten()
                .is_some_and(|m| m + CAUGHT_UP_LAG >= self.last)
    }
}

/// The next change that brings `view` towards `want` (None: there, or waiting for
/// learners to catch up).
pub fn next_step(view: &View, want: &Want) -> Option<Step> {
    if want.voters.is_empty() {
        return None;
    }
    // A joint configuration whose change was not finished (its leader lost the lead
    // between the two halves; openraft's next leader does not finish it): left first, to
    // the wanted voters once they caught up, else to its second half. Without this, a
    // joint configuration whose voters are the wanted ones would stay forever.
    if let Some(second) = &view.joint {
        let to = match want.voters.iter().all(|n| view.caught_up(*n)) {
            true => want.voters.clone(),
            false => second.clone(),
        };
        return Some(Step::ReplaceVoters(to));
    }
    let wanted: BTreeSet<NodeId> = want.voters.union(&want.learners).copied().collect();
    let missing: BTreeSet<NodeId> = wanted
        .iter()
        .copied()
        .filter(|n| !view.member(*n))
        .collect();
    if !missing.is_empty() {
        return Some(Step::AddLearners(missing));
    }
    if view.voters != want.voters {
        if want.voters.iter().all(|n| view.caught_up(*n)) {
            return Some(Step::ReplaceVoters(want.voters.clone()));
        }
        // Old copies standing in the way of a new incarnation on their server.
        let stale: BTreeSet<NodeId> = view
            .voters
            .iter()
            .copied()
            .filter(|v| {
                !wanted.contains(v)
                    && wanted
                        .iter()
                        .any(|w| same_server(*v, *w) && !view.caught_up(*w))
            })
            .collect();
        if !stale.is_empty() && view.voters.len() > stale.len() {
            return Some(Step::DemoteVoters(stale));
        }
    }
    let unwanted: BTreeSet<NodeId> = view
        .learners
        .iter()
        .copied()
        .filter(|n| !wanted.contains(n))
        .filter(|n| {
            view.matched
                .get(n)
                .copied()
                .flatten()
                .is_some_and(|m| m >= view.config_index)
        })
        .collect();
    if !unwanted.is_empty() {
        return Some(Step::RemoveLearners(unwanted));
    }
    None
}

/// What the placement of one shard wants, in node ids (replicas whose server id is not
/// a UUID are left out).
pub fn want_of(place: &crate::placement::ShardPlacement) -> Want {
    let ids = |v: &[String]| v.iter().filter_map(|s| place.member(s)).collect();
    Want {
        voters: ids(&place.voting),
        learners: ids(&place.nonvoting),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Servers 1..=4 (upper halves), incarnations in the lower halves.
    const A: NodeId = 1 << 32;
    const B: NodeId = 2 << 32;
    const C: NodeId = 3 << 32;
    const D: NodeId = 4 << 32;

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    fn view(voters: &[NodeId], learners: &[NodeId], matched: &[(NodeId, u64)]) -> View {
        View {
            voters: set(voters),
            learners: set(learners),
            matched: matched.iter().map(|(n, m)| (*n, Some(*m))).collect(),
            last: 1000,
            config_index: 900,
            joint: None,
        }
    }

    fn want(voters: &[NodeId], learners: &[NodeId]) -> Want {
        Want {
            voters: set(voters),
            learners: set(learners),
        }
    }

    #[test]
    fn a_move_adds_catches_up_then_switches_then_cleans_up() {
        let w = want(&[B, C, D], &[]);
        // D is not a member: added as a learner first.
        let v = view(&[A, B, C], &[], &[(B, 1000), (C, 1000)]);
        assert_eq!(next_step(&v, &w), Some(Step::AddLearners(set(&[D]))));
        // D far behind: nothing yet.
        let v = view(&[A, B, C], &[D], &[(B, 1000), (C, 1000), (D, 10)]);
        assert_eq!(next_step(&v, &w), None);
        // Caught up: one change to the wanted voters.
        let v = view(&[A, B, C], &[D], &[(D, 950)]);
        assert_eq!(
            next_step(&v, &w),
            Some(Step::ReplaceVoters(set(&[B, C, D])))
        );
        // A, now a learner, has the configuration that demoted it: removed.
        let v = view(&[B, C, D], &[A], &[(A, 900)]);
        assert_eq!(next_step(&v, &w), Some(Step::RemoveLearners(set(&[A]))));
        // ... but not before it has it (it would go on voting with its old view).
        let v = view(&[B, C, D], &[A], &[(A, 899)]);
        assert_eq!(next_step(&v, &w), None);
        let v = view(&[B, C, D], &[], &[]);
        assert_eq!(next_step(&v, &w), None);
    }

    #[test]
    fn non_voting_replicas_are_learners_and_can_be_promoted() {
        let v = view(&[A], &[], &[]);
        assert_eq!(
            next_step(&v, &want(&[A], &[B])),
            Some(Step::AddLearners(set(&[B])))
        );
        let v = view(&[A], &[B], &[(B, 10)]);
        assert_eq!(next_step(&v, &want(&[A], &[B])), None);
        assert_eq!(next_step(&v, &want(&[A, B], &[])), None, "B is behind");
        let v = view(&[A], &[B], &[(B, 999)]);
        assert_eq!(
            next_step(&v, &want(&[A, B], &[])),
            Some(Step::ReplaceVoters(set(&[A, B])))
        );
        // A voter made non-voting: replaced as a voter, kept as a learner.
        let v = view(&[A, B], &[], &[(B, 1000)]);
        assert_eq!(
            next_step(&v, &want(&[A], &[B])),
            Some(Step::ReplaceVoters(set(&[A])))
        );
    }

    #[test]
    fn a_replica_placed_again_waits_for_its_old_copy_to_step_down() {
        let b2 = B | 7;
        let w = want(&[A, b2], &[]);
        let v = view(&[A, B], &[], &[(B, 1000)]);
        assert_eq!(next_step(&v, &w), Some(Step::AddLearners(set(&[b2]))));
        // b2 cannot start while B's old copy is open there: B is demoted first.
        let v = view(&[A, B], &[b2], &[(B, 1000)]);
        assert_eq!(next_step(&v, &w), Some(Step::DemoteVoters(set(&[B]))));
        // Never down to no voter at all.
        let v = view(&[B], &[b2], &[]);
        assert_eq!(next_step(&v, &want(&[b2], &[])), None);
    }

    #[test]
    fn an_unfinished_joint_configuration_is_left() {
        // A change from {A,B,C} to {A,B} interrupted between its halves (found by the
        // cluster simulation): the union is what is wanted, yet it must be left.
        let mut v = view(&[A, B, C], &[D], &[(A, 1000), (C, 1000), (D, 10)]);
        v.joint = Some(set(&[A, B]));
        let w = want(&[A, B, C], &[D]);
        assert_eq!(
            next_step(&v, &w),
            Some(Step::ReplaceVoters(set(&[A, B, C])))
        );
        // The wanted voters not caught up: to the second half first.
        let w = want(&[A, B, D], &[]);
        assert_eq!(next_step(&v, &w), Some(Step::ReplaceVoters(set(&[A, B]))));
    }

    #[test]
    fn a_lost_voter_is_replaced_once_the_new_one_caught_up() {
        // C is gone (no match known): its replacement D is caught up; C is voted out
        // and stays a learner until it is back and sees it.
        let v = view(&[A, B, C], &[D], &[(A, 1000), (D, 1000)]);
        let w = want(&[A, B, D], &[]);
        assert_eq!(
            next_step(&v, &w),
            Some(Step::ReplaceVoters(set(&[A, B, D])))
        );
        let mut v = view(&[A, B, D], &[C], &[]);
        v.matched.insert(C, None);
        assert_eq!(next_step(&v, &w), None);
    }
}
