//! Deterministic simulation of a 3-node Raft group (turmoil: simulated hosts, network
//! and time) under random faults: partitions, crash and restart of a node, power loss
//! (a crash that also loses every write not yet fsynced), message loss (links that
//! break connections) and held (delayed) links.
//!
//! Leader transfers ([`replication::Proposer::transfer_leader`]) are among the faults: to
//! a random node, sometimes with a node crashing while it runs; and once the first
//! leader, partitioned away and replaced, is back, leadership is handed back to it (the
//! configured primary returning), which must succeed.
//!
//! Checks: every node's persisted vote only moves forward and every new leader holds
//! every applied entry ([`steps::Watch`]: openraft's leader ids are (term, node id), so
//! two nodes may lead one term one after the other); a new leader is elected after the
//! leader is partitioned away; the hand-back succeeds; after healing, every acknowledged
//! write is present on every replica, and the replicas converge to
//! identical state and applied position.
//!
//! Reproducing: each run prints its seed; `PONDER_SIM_SEED=<seed> cargo test -p
//! replication --test sim` runs that seed alone. The seed fixes the fault schedule, the
//! network's latencies and losses (turmoil's RNG) and openraft's election timeouts
//! ([`replication::seed_thread_rng`]: every host runs on the test's thread).
//! `a_seed_replays_the_same_run` checks that a seed replays identically. One source of
//! randomness stays unseeded: tokio's `select!` picks at random among branches that are
//! ready together, and openraft's replication back-off has such a `select!` (ours are
//! `biased`). A run is identical until the first such tie: 55 of 60 seeds replayed
//! identically when tried (the others differed by a write or a snapshot, and still
//! passed); the CI seeds hit no tie and replay every time.
//!
//! The long form, by hand: `PONDER_SIM_SEEDS=50 cargo test --release -p replication
//! --test sim -- --ignored` (random seeds, longer fault phases).

mod disk;
mod node;
mod steps;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use replication::kv::KvCommand;
use replication::NodeId;

use node::{host_name, run_node, write_to, Cluster, TransferRecord, WriteAnswer};
use steps::{heal, isolate, leader_of, run_for, run_until, settled, term_of, Watch};

/// How long faults are injected, in simulated time.
struct Plan {
    fault_phase: Duration,
}

/// What one run found (for the summary line).
struct Outcome {
    acked: usize,
    /// The replicas' common applied position at the end (a fingerprint of the run).
    applied: Option<replication::LogId>,
    election: Duration,
    /// The transfer back to the first leader once it returned (`None`: it already led).
    handback: Option<Duration>,
    /// Every transfer: from, to, time taken or why it failed.
    transfers: Vec<TransferRecord>,
    snapshots: u64,
    faults: BTreeMap<&'static str, u32>,
}

fn seeds_from_env(default: &[u64]) -> Vec<u64> {
    if let Ok(s) = std::env::var("PONDER_SIM_SEED") {
        return vec![s.trim().parse().expect("PONDER_SIM_SEED is a u64")];
    }
    default.to_vec()
}

#[test]
fn three_nodes_survive_random_faults() {
    let plan = Plan {
        fault_phase: Duration::from_secs(12),
    };
    for seed in seeds_from_env(&[1, 2, 3]) {
        run_seed(seed, &plan);
    }
}

/// A seed replays the same run: same acknowledged writes, same final log position,
/// same election time, same snapshot count.
#[test]
fn a_seed_replays_the_same_run() {
    let plan = Plan {
        fault_phase: Duration::from_secs(6),
    };
    let seed = seeds_from_env(&[5])[0];
    let fingerprint = |o: Outcome| {
        (
            o.acked,
            o.applied,
            o.election,
            o.handback,
            o.transfers,
            o.snapshots,
            o.faults,
        )
    };
    let first = fingerprint(simulate(seed, &plan));
    let second = fingerprint(simulate(seed, &plan));
    assert_eq!(first, second, "seed {seed} did not replay identically");
}

#[test]
#[ignore = "long form, by hand: PONDER_SIM_SEEDS=<count> (random seeds)"]
fn three_nodes_survive_random_faults_long() {
    let plan = Plan {
        fault_phase: Duration::from_secs(60),
    };
    let count: u64 = std::env::var("PONDER_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let first: u64 = rand::random();
    let seeds: Vec<u64> = (0..count).map(|i| first.wrapping_add(i)).collect();
    for seed in seeds_from_env(&seeds) {
        run_seed(seed, &plan);
    }
}

/// Hands leadership back to `primary` once the group has settled, as a controller
/// would: a failed attempt (the returning node may disrupt the group with elections of
/// its own, openraft having no pre-vote) is retried once the group settles again, up to
/// five attempts. Answers the successful transfer's time, or `None` if `primary` won an
/// election of its own first.
fn hand_back(
    sim: &mut turmoil::Sim<'_>,
    watch: &mut Watch,
    cluster: &Cluster,
    primary: NodeId,
) -> Option<Duration> {
    let seed = watch.seed;
    let mut failures = Vec::new();
    for _ in 0..5 {
        run_until(sim, watch, Duration::from_secs(10), || {
            settled(cluster).then_some(())
        })
        .unwrap_or_else(|| panic!("seed {seed}: the group did not settle"));
        run_for(sim, watch, Duration::from_millis(300));
        if leader_of(cluster, &BTreeSet::new()) == Some(primary) {
            return None;
        }
        let before = cluster.transfers.lock().len();
        *cluster.transfer_to.lock() = Some(primary);
        let record = run_until(sim, watch, Duration::from_secs(10), || {
            if let Some(record) = cluster.transfers.lock().get(before).cloned() {
                return Some(Some(record));
            }
            // It won an election of its own while the request was untaken.
            let untaken = cluster.transfer_to.lock().is_some();
            (untaken && leader_of(cluster, &BTreeSet::new()) == Some(primary)).then_some(None)
        })
        .unwrap_or_else(|| panic!("seed {seed}: the transfer back to n{primary} was never taken"));
        match record {
            Some((_, to, Ok(took))) if to == primary => {
                let led = run_until(sim, watch, Duration::from_secs(1), || {
                    leader_of(cluster, &BTreeSet::new()).filter(|l| *l == primary)
                });
                assert_eq!(
                    led,
                    Some(primary),
                    "seed {seed}: n{primary} does not lead after the transfer"
                );
                return Some(took);
            }
            None => {
                cluster.transfer_to.lock().take();
                return None;
            }
            Some(other) => failures.push(other),
        }
    }
    panic!("seed {seed}: five transfers back to n{primary} failed: {failures:?}");
}

fn run_seed(seed: u64, plan: &Plan) {
    eprintln!("replication sim: seed {seed} (rerun alone with PONDER_SIM_SEED={seed})");
    let started = std::time::Instant::now();
    let outcome = simulate(seed, plan);
    let done: Vec<u128> = outcome
        .transfers
        .iter()
        .filter_map(|(_, _, r)| r.as_ref().ok().map(|d| d.as_millis()))
        .collect();
    eprintln!(
        "replication sim: seed {seed} passed in {:.1} s: {} writes acknowledged, all at {}, \
         new leader {} ms after the leader's partition, leadership handed back {}, \
         transfers {} of {} done (ms: {done:?}), {} snapshots installed, faults {:?}",
        started.elapsed().as_secs_f64(),
        outcome.acked,
        outcome.applied.map_or("-".to_string(), |a| a.to_string()),
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
}

fn simulate(seed: u64, plan: &Plan) -> Outcome {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(3600))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(25))
        .build_with_rng(Box::new(StdRng::seed_from_u64(seed)));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_fa17);
    // Every host runs on this thread: openraft's election timeouts follow the seed too.
    replication::seed_thread_rng(seed ^ 0xe1ec_7104);
    let cluster = Cluster::new(3);
    for &id in &cluster.ids {
        let c = cluster.clone();
        sim.host(host_name(id), move || run_node(id, c.clone()));
    }

    // The client writes unique keys until told to stop; it records what was acknowledged.
    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (acked, stop) = (acked.clone(), stop.clone());
        let ids = cluster.ids.clone();
        sim.client("client", async move {
            let mut target = ids[0];
            for i in 0..5_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (key, value) = (format!("k{i:05}"), format!("v{i}"));
                let cmd = KvCommand::Put {
                    key: key.clone(),
                    value: value.clone(),
                };
                // A write that is never acknowledged may or may not be applied.
                for _ in 0..10 {
                    match write_to(target, &cmd).await {
                        Ok(WriteAnswer::Done) => {
                            acked.lock().push((key.clone(), value.clone()));
                            break;
                        }
                        Ok(WriteAnswer::NotLeader(Some(l))) => target = l,
                        Ok(WriteAnswer::Transferring(to)) => {
                            target = to;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        _ => {
                            target = ids[(ids.iter().position(|x| *x == target).unwrap_or(0) + 1)
                                % ids.len()];
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(())
        });
    }

    let mut faults: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut watch = Watch::new(seed, cluster.clone());
    let names: Vec<String> = cluster.ids.iter().map(|id| host_name(*id)).collect();

    // 1. A leader is elected, then partitioned away: another node must take over.
    let leader = run_until(&mut sim, &mut watch, Duration::from_secs(10), || {
        leader_of(&cluster, &BTreeSet::new())
    })
    .unwrap_or_else(|| panic!("seed {seed}: no leader within 10 s"));
    let old_term = term_of(&cluster, leader);
    run_for(&mut sim, &mut watch, Duration::from_secs(1));
    isolate(&sim, &names, leader);
    *faults.entry("leader partition").or_default() += 1;
    let t0 = sim.elapsed();
    let excluded = BTreeSet::from([leader]);
    let new_leader = run_until(&mut sim, &mut watch, Duration::from_secs(10), || {
        leader_of(&cluster, &excluded).filter(|l| term_of(&cluster, *l) > old_term)
    })
    .unwrap_or_else(|| panic!("seed {seed}: no new leader within 10 s of partitioning n{leader}"));
    let election = sim.elapsed() - t0;
    assert_ne!(new_leader, leader);
    heal(&mut sim, &names, &mut BTreeSet::new());

    // 1b. The old leader (the configured primary) is back: leadership is handed to it.
    let handback = hand_back(&mut sim, &mut watch, &cluster, leader);

    // 2. Random faults, one outage at a time (a majority is usually up).
    let mut crashed: BTreeSet<NodeId> = BTreeSet::new();
    let end = sim.elapsed() + plan.fault_phase;
    while sim.elapsed() < end {
        let victim = cluster.ids[rng.gen_range(0..cluster.ids.len())];
        let vname = host_name(victim);
        let length = Duration::from_millis(rng.gen_range(200..3000));
        match rng.gen_range(0..6) {
            0 => {
                *faults.entry("partition").or_default() += 1;
                isolate(&sim, &names, victim);
                run_for(&mut sim, &mut watch, length);
                heal(&mut sim, &names, &mut crashed);
            }
            1 => {
                *faults.entry("crash+restart").or_default() += 1;
                sim.crash(vname.as_str());
                crashed.insert(victim);
                run_for(&mut sim, &mut watch, length);
                heal(&mut sim, &names, &mut crashed);
            }
            4 => {
                *faults.entry("power loss").or_default() += 1;
                sim.crash(vname.as_str());
                cluster.disks[&victim]
                    .lose_power()
                    .expect("power loss on the in-memory disk");
                crashed.insert(victim);
                run_for(&mut sim, &mut watch, length);
                heal(&mut sim, &names, &mut crashed);
            }
            5 => {
                // A transfer to a node that does not lead (the victim if none leads),
                // sometimes with a crash of a node (the target, the leader or the third)
                // while it runs.
                *faults.entry("transfer").or_default() += 1;
                let followers: Vec<NodeId> = match leader_of(&cluster, &BTreeSet::new()) {
                    Some(l) => cluster.ids.iter().copied().filter(|i| *i != l).collect(),
                    None => vec![victim],
                };
                let to = followers[rng.gen_range(0..followers.len())];
                *cluster.transfer_to.lock() = Some(to);
                if rng.gen_bool(0.5) {
                    *faults.entry("crash during transfer").or_default() += 1;
                    run_for(
                        &mut sim,
                        &mut watch,
                        Duration::from_millis(rng.gen_range(0..200)),
                    );
                    let other = cluster.ids[rng.gen_range(0..cluster.ids.len())];
                    sim.crash(host_name(other).as_str());
                    crashed.insert(other);
                }
                run_for(&mut sim, &mut watch, length);
                heal(&mut sim, &names, &mut crashed);
                // A request no leader took is dropped.
                cluster.transfer_to.lock().take();
            }
            2 => {
                *faults.entry("message loss").or_default() += 1;
                sim.set_fail_rate(0.005);
                run_for(&mut sim, &mut watch, length);
                sim.set_fail_rate(0.0);
            }
            _ => {
                *faults.entry("held link").or_default() += 1;
                let other = cluster.ids[rng.gen_range(0..cluster.ids.len())];
                if other != victim {
                    sim.hold(vname.as_str(), host_name(other).as_str());
                    run_for(&mut sim, &mut watch, length.min(Duration::from_millis(800)));
                    sim.release(vname.as_str(), host_name(other).as_str());
                }
            }
        }
        run_for(
            &mut sim,
            &mut watch,
            Duration::from_millis(rng.gen_range(100..1500)),
        );
    }

    // 3. Healed and quiet: every replica converges and holds every acknowledged write.
    heal(&mut sim, &names, &mut crashed);
    stop.store(true, Ordering::Relaxed);
    let converged = run_until(&mut sim, &mut watch, Duration::from_secs(30), || {
        let states: Vec<_> = cluster
            .ids
            .iter()
            .map(|id| cluster.replica_state(*id))
            .collect();
        let acked = acked.lock();
        let all_same = states.windows(2).all(|w| w[0] == w[1]);
        let complete = acked.iter().all(|(k, v)| states[0].1.get(k) == Some(v));
        (all_same && complete && states[0].0.is_some()).then_some(states[0].0)
    });
    let Some(applied) = converged else {
        let acked = acked.lock();
        for id in &cluster.ids {
            let (applied, map) = cluster.replica_state(*id);
            let missing: Vec<_> = acked
                .iter()
                .filter(|(k, v)| map.get(k) != Some(v))
                .take(5)
                .collect();
            eprintln!(
                "n{id}: applied {applied:?}, {} keys, acknowledged but missing: {missing:?}",
                map.len()
            );
        }
        panic!("seed {seed}: replicas did not converge within 30 s after healing");
    };
    let acked = acked.lock().len();
    // Not vacuous: writes went through despite the faults.
    assert!(
        acked >= 10,
        "seed {seed}: only {acked} writes were acknowledged"
    );
    let transfers = cluster.transfers.lock().clone();
    Outcome {
        acked,
        applied,
        election,
        handback,
        transfers,
        snapshots: cluster.snapshots_sent.load(Ordering::Relaxed),
        faults,
    }
}
