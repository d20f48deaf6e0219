//! The simulation's steering: stepping the simulation while checking election safety
//! in every group ([`Watch`]), cutting a node off and healing, and reading who leads a
//! group and whether its membership is the placement's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::node::{host_name, Cluster, Group};
use super::Replicated;
use crate::openraft::ServerState;
use crate::{NodeId, Vote};

/// The node that leads `group` in the highest term among live nodes not in
/// `excluded`, if it sees itself as leader.
pub fn leader_of(group: &Group, excluded: &BTreeSet<NodeId>) -> Option<NodeId> {
    let rafts = group.rafts.lock();
    rafts
        .iter()
        .filter(|(id, _)| !excluded.contains(id))
        .map(|(id, r)| (*id, r.metrics().borrow().clone()))
        .filter(|(_, m)| m.state == ServerState::Leader)
        .max_by_key(|(_, m)| m.current_term)
        .map(|(id, _)| id)
}

/// Whether every member of `group`'s placement runs and follows one leader in one term,
/// and that leader has matched every member's log.
pub fn settled(group: &Group) -> bool {
    let want = group.want.lock().clone();
    let members: BTreeSet<NodeId> = want.voters.union(&want.learners).copied().collect();
    let rafts = group.rafts.lock();
    let metrics: Vec<_> = rafts
        .iter()
        .filter(|(id, _)| members.contains(id))
        .map(|(_, r)| r.metrics().borrow().clone())
        .collect();
    let views: BTreeSet<_> = metrics
        .iter()
        .map(|m| (m.current_term, m.current_leader))
        .collect();
    let matched = metrics.iter().any(|m| {
        m.state == ServerState::Leader
            && m.replication.as_ref().is_some_and(|r| {
                members
                    .iter()
                    .all(|id| r.get(id).is_some_and(|l| l.is_some()))
            })
    });
    metrics.len() == members.len()
        && views.len() == 1
        && views.iter().all(|(_, l)| l.is_some())
        && matched
}

/// Whether `group`'s leader has exactly its placement's membership, in one
/// configuration (not a joint one), committed.
pub fn placed(group: &Group) -> bool {
    let want = group.want.lock().clone();
    let Some(leader) = leader_of(group, &BTreeSet::new()) else {
        return false;
    };
    let m = group.rafts.lock()[&leader].metrics().borrow().clone();
    let membership = m.membership_config.membership();
    membership.get_joint_config().len() == 1
        && membership.voter_ids().collect::<BTreeSet<_>>() == want.voters
        && membership.learner_ids().collect::<BTreeSet<_>>() == want.learners
        && m.membership_config.log_id().map(|l| l.index) <= m.last_applied.map(|l| l.index)
}

pub fn term_of(group: &Group, id: NodeId) -> u64 {
    group.rafts.lock()[&id].metrics().borrow().current_term
}

/// Cuts `id` off from the other nodes (the client still reaches it).
pub fn isolate(sim: &turmoil::Sim<'_>, names: &[String], id: NodeId) {
    let me = host_name(id);
    for n in names.iter().filter(|n| **n != me) {
        sim.partition(me.as_str(), n.as_str());
    }
}

/// Repairs every link and restarts crashed nodes.
pub fn heal(sim: &mut turmoil::Sim<'_>, names: &[String], crashed: &mut BTreeSet<NodeId>) {
    for a in names {
        for b in names.iter().filter(|b| *b != a) {
            sim.repair(a.as_str(), b.as_str());
        }
    }
    sim.set_fail_rate(0.0);
    for id in std::mem::take(crashed) {
        sim.bounce(host_name(id).as_str());
    }
}

/// Watches every step for Raft's safety as openraft 0.9 defines it, in every group. Its default leader
/// ids are `(term, node id)`, totally ordered, and a vote moves to any greater one: a
/// voter that granted `(t, a)` may later grant `(t, b)` for `b > a`, so two nodes can
/// lead the same term one after the other (like Paxos ballots; the first can commit
/// nothing more once its voters moved on). "One leader per term" is therefore not an
/// invariant here; these are:
/// * a node's persisted vote never goes back, across crashes and power losses too (the
///   durability election safety rests on);
/// * leader completeness: a node seen leading a leader id for the first time holds (by
///   index) every entry any node has applied, applied entries being committed.
pub struct Watch<R: Replicated> {
    pub seed: u64,
    pub cluster: Arc<Cluster<R>>,
    /// Leader ids seen leading, by group.
    pub leaders: BTreeSet<(usize, u64, NodeId)>,
    /// The greatest vote each node has reported, by group.
    pub votes: BTreeMap<(usize, NodeId), Vote>,
}

impl<R: Replicated> Watch<R> {
    pub fn new(seed: u64, cluster: Arc<Cluster<R>>) -> Self {
        Self {
            seed,
            cluster,
            leaders: BTreeSet::new(),
            votes: BTreeMap::new(),
        }
    }

    pub fn check(&mut self) {
        let seed = self.seed;
        for (g, group) in self.cluster.groups.iter().enumerate() {
            let metrics: Vec<_> = group
                .rafts
                .lock()
                .values()
                .map(|r| r.metrics().borrow().clone())
                .collect();
            let applied = metrics
                .iter()
                .filter_map(|m| m.last_applied.map(|l| (l.index, m.id)))
                .max();
            for m in &metrics {
                let seen = self.votes.entry((g, m.id)).or_insert(m.vote);
                assert!(
                    m.vote >= *seen,
                    "seed {seed}: group {g}: n{}'s vote went back from {seen} to {}",
                    m.id,
                    m.vote
                );
                *seen = m.vote;
                if m.state != ServerState::Leader || !self.leaders.insert((g, m.current_term, m.id))
                {
                    continue;
                }
                if let Some((index, holder)) = applied {
                    assert!(
                        m.last_log_index >= Some(index),
                        "seed {seed}: group {g}: n{} leads {} with its last log index at \
                         {:?}, but n{holder} applied index {index}",
                        m.id,
                        m.vote,
                        m.last_log_index
                    );
                }
            }
        }
    }
}

/// Steps for `d`; a host or the client failing (a violated check) fails the run.
pub fn run_for<R: Replicated>(sim: &mut turmoil::Sim<'_>, watch: &mut Watch<R>, d: Duration) {
    let end = sim.elapsed() + d;
    while sim.elapsed() < end {
        if let Err(e) = sim.step() {
            panic!("seed {}: {e}", watch.seed);
        }
        watch.check();
    }
}

/// Steps until `check` answers (checked every 10 ms of simulated time) or `limit` passes.
pub fn run_until<R: Replicated, T>(
    sim: &mut turmoil::Sim<'_>,
    watch: &mut Watch<R>,
    limit: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let end = sim.elapsed() + limit;
    while sim.elapsed() < end {
        if let Some(t) = check() {
            return Some(t);
        }
        run_for(sim, watch, Duration::from_millis(10));
    }
    check()
}
