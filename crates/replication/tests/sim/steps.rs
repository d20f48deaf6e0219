//! The simulation's steering: stepping the simulation while checking election safety
//! ([`Watch`]), cutting a node off and healing, and reading who leads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use replication::openraft::ServerState;
use replication::NodeId;

use crate::node::{host_name, Cluster};

/// The node that leads in the highest term among live nodes not in `excluded`, if it
/// sees itself as leader.
pub fn leader_of(cluster: &Cluster, excluded: &BTreeSet<NodeId>) -> Option<NodeId> {
    let rafts = cluster.rafts.lock();
    rafts
        .iter()
        .filter(|(id, _)| !excluded.contains(id))
        .map(|(id, r)| (*id, r.metrics().borrow().clone()))
        .filter(|(_, m)| m.state == ServerState::Leader)
        .max_by_key(|(_, m)| m.current_term)
        .map(|(id, _)| id)
}

/// Whether every node follows one leader in one term, and that leader has matched
/// every follower's log.
pub fn settled(cluster: &Cluster) -> bool {
    let rafts = cluster.rafts.lock();
    let metrics: Vec<_> = rafts
        .values()
        .map(|r| r.metrics().borrow().clone())
        .collect();
    let views: BTreeSet<_> = metrics
        .iter()
        .map(|m| (m.current_term, m.current_leader))
        .collect();
    let matched = metrics.iter().any(|m| {
        m.state == ServerState::Leader
            && m.replication.as_ref().is_some_and(|r| {
                cluster
                    .ids
                    .iter()
                    .all(|id| r.get(id).is_some_and(|l| l.is_some()))
            })
    });
    rafts.len() == cluster.ids.len()
        && views.len() == 1
        && views.iter().all(|(_, l)| l.is_some())
        && matched
}

pub fn term_of(cluster: &Cluster, id: NodeId) -> u64 {
    cluster.rafts.lock()[&id].metrics().borrow().current_term
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

/// Watches every step for two leaders in one term (Raft's election safety: it rests on
/// votes being durable).
pub struct Watch {
    pub seed: u64,
    pub cluster: Arc<Cluster>,
    pub leaders: BTreeMap<u64, NodeId>,
}

impl Watch {
    pub fn check(&mut self) {
        for (id, raft) in self.cluster.rafts.lock().iter() {
            let m = raft.metrics().borrow().clone();
            if m.state == ServerState::Leader {
                let first = *self.leaders.entry(m.current_term).or_insert(*id);
                assert_eq!(
                    first, *id,
                    "seed {}: n{first} and n{id} both led term {}",
                    self.seed, m.current_term
                );
            }
        }
    }
}

pub fn run_for(sim: &mut turmoil::Sim<'_>, watch: &mut Watch, d: Duration) {
    let end = sim.elapsed() + d;
    while sim.elapsed() < end {
        sim.step().expect("simulation step");
        watch.check();
    }
}

/// Steps until `check` answers (checked every 10 ms of simulated time) or `limit` passes.
pub fn run_until<T>(
    sim: &mut turmoil::Sim<'_>,
    watch: &mut Watch,
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
