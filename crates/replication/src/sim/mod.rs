//! Deterministic simulation of a 3-node Raft group (turmoil: simulated hosts, network
//! and time) under random faults, generic over what the group replicates
//! ([`Replicated`]: the state machine, a generator of writes, how to read a replica's
//! state and how to check it). Behind the `sim` feature; used by this crate's
//! `tests/sim` (the test double `kv::KvMachine`) and by `store`'s `tests/sim.rs` (a
//! replicated table shard). Every simulated node runs [`Plan::groups`] groups on one
//! engine behind one router and transport, as a server runs the catalog's group and
//! its shards' groups; with a [`Mover`] (the cluster's `moves::change_once`, from
//! `cluster`'s `tests/sim.rs`), groups' placements are moved while the faults run.
//!
//! Faults: partitions, crash and restart of a node, power loss (a crash that also loses
//! every write not yet fsynced), message loss (links that break connections), held
//! (delayed) links, and leader transfers ([`crate::Proposer::transfer_leader`]): to a
//! random node, sometimes with a node crashing while it runs; and once the first
//! leader, partitioned away and replaced, is back, leadership is handed back to it (the
//! configured primary returning), which must succeed.
//!
//! Checks: every node's persisted vote only moves forward and every new leader holds
//! every applied entry (`steps::Watch`: openraft's leader ids are (term, node id), so
//! two nodes may lead one term one after the other); a new leader is elected after the
//! leader is partitioned away; the hand-back succeeds; every reply to an acknowledged
//! write is the one the client's model expects ([`Replicated::acknowledged`]); after
//! healing, the replicas converge to identical state and applied position, and that
//! state holds every acknowledged write ([`Replicated::check`]). A host that panics
//! fails the run.
//!
//! The client retries a write only when it certainly was not appended (a refusal
//! before the log, or no connection); any other failure leaves its outcome unknown
//! ([`Replicated::unknown`]): the model must then accept either outcome.
//!
//! Reproducing: each run prints its seed; `PONDER_SIM_SEED=<seed>` runs that seed
//! alone. The seed fixes the fault schedule, the client's writes, the network's
//! latencies and losses (turmoil's RNG) and openraft's election timeouts
//! ([`crate::seed_thread_rng`]: every host runs on the test's thread). One source of
//! randomness stays unseeded: tokio's `select!` picks at random among branches that are
//! ready together, and openraft's replication back-off has such a `select!` (ours are
//! `biased`). A run is identical until the first such tie: 55 of 60 seeds replayed
//! identically when tried with the key-value machine (the others differed by a write or
//! a snapshot, and still passed); with three groups and membership moves, fewer (5 of
//! 20 with 30 s of faults): every group's back-offs can tie.

mod disk;
pub mod kv;
mod node;
mod run;
mod steps;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use storage::Engine;

pub use disk::Disk;
pub use run::simulate;
pub use turmoil;

use crate::{LogId, Node, NodeId, Raft, StateMachine};

/// What a simulated group replicates, and how the client writes and checks it.
pub trait Replicated: Send + Sync + 'static {
    /// The state machine every node runs.
    type Machine: StateMachine;
    /// What the client knows of the writes it made.
    type Model: Default + Send + 'static;
    /// One write: what is proposed, and what its reply must be.
    type Write: Debug + Send + 'static;
    /// A replica's state, compared across replicas.
    type State: PartialEq + Debug;

    /// Opens node `id`'s machine on its engine, at its start and at every restart
    /// (`prefix`: the group's state-machine prefix).
    fn open(
        &self,
        id: NodeId,
        engine: Arc<dyn Engine>,
        prefix: &str,
    ) -> Result<Self::Machine, Box<dyn std::error::Error>>;
    /// The client's next write, drawn from the seeded `rng`.
    fn next_write(&self, model: &Self::Model, rng: &mut StdRng) -> Self::Write;
    /// The command's bytes to propose.
    fn command(&self, write: &Self::Write) -> Vec<u8>;
    /// `write` was committed with `reply`: checks the reply (an error is a violation)
    /// and records the write.
    fn acknowledged(
        &self,
        model: &mut Self::Model,
        write: Self::Write,
        reply: &[u8],
    ) -> Result<(), String>;
    /// `write` got no answer: it may or may not have been applied.
    fn unknown(&self, model: &mut Self::Model, write: Self::Write);
    /// How many writes were acknowledged.
    fn acked(&self, model: &Self::Model) -> usize;
    /// Replica `id`'s state (its node running), read from its engine or its machine.
    fn state(&self, id: NodeId, engine: &dyn Engine, prefix: &str) -> Result<Self::State, String>;
    /// Whether `state` holds every acknowledged write (and is consistent in itself);
    /// an error says what is wrong.
    fn check(&self, model: &Self::Model, state: &Self::State) -> Result<(), String>;
}

/// A group's wanted membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The voters.
    pub voters: BTreeSet<NodeId>,
    /// The non-voting members.
    pub learners: BTreeSet<NodeId>,
}

/// Makes the next membership change of the group `raft` belongs to towards a placement
/// (`nodes`: every host's address), if it leads and one is due: `None` if nothing was
/// done, else what was done or why it failed. The cluster's controller is one
/// (`cluster::moves::change_once`); the harness has none of its own, so that the code
/// under test is the real one.
pub type Mover = Arc<
    dyn Fn(
            Raft,
            Placement,
            BTreeMap<NodeId, Node>,
        ) -> Pin<Box<dyn Future<Output = Option<Result<String, String>>> + Send>>
        + Send
        + Sync,
>;

/// What a run does.
#[derive(Clone)]
pub struct Plan {
    /// The random-fault phase's length.
    pub fault_phase: Duration,
    /// Raft groups every node runs (group 0 stands for the catalog), each with its own
    /// client and checks, all sharing each node's engine, router and transport.
    pub groups: usize,
    /// With a mover, a fourth host is a spare, and groups' placements are moved
    /// ({1,2,3} to {1,2,4} and back, a learner added and removed) while faults run.
    pub mover: Option<Mover>,
}

impl Plan {
    /// One group, no membership changes.
    pub fn single(fault_phase: Duration) -> Self {
        Self {
            fault_phase,
            groups: 1,
            mover: None,
        }
    }
}

/// A leader transfer done: from, to, and the time it took or why it failed.
pub type TransferRecord = (NodeId, NodeId, Result<Duration, String>);

/// What one run found (for the summary line, and to compare replays).
#[derive(Debug, PartialEq)]
pub struct Outcome {
    /// Writes acknowledged (every group's).
    pub acked: usize,
    /// Writes whose outcome stayed unknown.
    pub unknown: usize,
    /// Each group's replicas' common applied position at the end (a fingerprint of the
    /// run).
    pub applied: Vec<Option<LogId>>,
    /// The election after the first leader was partitioned away.
    pub election: Duration,
    /// The transfer back to the first leader once it returned (`None`: it already led).
    pub handback: Option<Duration>,
    /// Every transfer (every group's): from, to, time taken or why it failed.
    pub transfers: Vec<TransferRecord>,
    /// Membership changes made, and failed (retried by later rounds).
    pub changes: (u32, u32),
    /// Placement moves asked for (each completed by the end).
    pub moves: u32,
    /// Snapshots installed by their receiver.
    pub snapshots: u64,
    /// The faults injected, by kind.
    pub faults: BTreeMap<&'static str, u32>,
}

/// `PONDER_SIM_SEED` alone if set, else `default`.
pub fn seeds_from_env(default: &[u64]) -> Vec<u64> {
    if let Ok(s) = std::env::var("PONDER_SIM_SEED") {
        return vec![s.trim().parse().expect("PONDER_SIM_SEED is a u64")];
    }
    default.to_vec()
}

/// The long form's seeds: `PONDER_SIM_SEEDS` (default 20) consecutive seeds from a
/// random one, or `PONDER_SIM_SEED` alone.
pub fn long_seeds() -> Vec<u64> {
    let count: u64 = std::env::var("PONDER_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let first: u64 = rand::random();
    let seeds: Vec<u64> = (0..count).map(|i| first.wrapping_add(i)).collect();
    seeds_from_env(&seeds)
}

/// Runs `seed`, printing it first (a failure then names it) and a summary after.
pub fn run_seed<R: Replicated>(name: &str, sim: Arc<R>, seed: u64, plan: &Plan) -> Outcome {
    eprintln!("{name} sim: seed {seed} (rerun alone with PONDER_SIM_SEED={seed})");
    let started = std::time::Instant::now();
    let outcome = simulate(sim, seed, plan);
    let done: Vec<u128> = outcome
        .transfers
        .iter()
        .filter_map(|(_, _, r)| r.as_ref().ok().map(|d| d.as_millis()))
        .collect();
    eprintln!(
        "{name} sim: seed {seed} passed in {:.1} s: {} groups, {} writes acknowledged ({} \
         unknown), at {}, {} placement moves ({} membership changes, {} failed and \
         retried), new leader {} ms after the leader's partition, leadership handed back \
         {}, transfers {} of {} done (ms: {done:?}), {} snapshots installed, faults {:?}",
        started.elapsed().as_secs_f64(),
        outcome.applied.len(),
        outcome.acked,
        outcome.unknown,
        outcome
            .applied
            .iter()
            .map(|a| a.map_or("-".to_string(), |a| a.to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        outcome.moves,
        outcome.changes.0,
        outcome.changes.1,
        outcome.election.as_millis(),
        outcome
            .handback
            .map_or("- (it led again on its own)".into(), |d| format!(
                "in {} ms",
                d.as_millis()
            )),
        done.len(),
        outcome.transfers.len(),
        outcome.snapshots,
        outcome.faults,
    );
    for (from, to, r) in &outcome.transfers {
        if let Err(why) = r {
            eprintln!("  transfer n{from} -> n{to} failed: {why}");
        }
    }
    outcome
}
