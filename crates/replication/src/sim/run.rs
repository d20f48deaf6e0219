//! One simulated run ([`simulate`]): the group's first election and hand-back, the
//! random-fault phase, then healing and the convergence check; and the client that
//! writes throughout (`client`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::node::{host_name, run_node, write_to, Cluster, WriteAnswer};
use super::steps::{heal, isolate, leader_of, run_for, run_until, settled, term_of, Watch};
use super::{Outcome, Plan, Replicated};
use crate::NodeId;

/// Runs the simulation of `seed`; panics (naming the seed) on a violated check.
pub fn simulate<R: Replicated>(replicated: Arc<R>, seed: u64, plan: &Plan) -> Outcome {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(3600))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(25))
        .build_with_rng(Box::new(StdRng::seed_from_u64(seed)));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_fa17);
    // Every host runs on this thread: openraft's election timeouts follow the seed too.
    crate::seed_thread_rng(seed ^ 0xe1ec_7104);
    let cluster = Cluster::new(replicated, 3);
    for &id in &cluster.ids {
        let c = cluster.clone();
        sim.host(host_name(id), move || run_node(id, c.clone()));
    }

    // The client writes until told to stop; its model records what was acknowledged.
    let model: Arc<Mutex<R::Model>> = Arc::default();
    let unknown = Arc::new(Mutex::new(0usize));
    let stop = Arc::new(AtomicBool::new(false));
    sim.client(
        "client",
        client(
            cluster.clone(),
            model.clone(),
            unknown.clone(),
            stop.clone(),
            StdRng::seed_from_u64(seed ^ 0xc11e_0700),
        ),
    );

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
    let sim_ref = cluster.sim.clone();
    let converged = run_until(&mut sim, &mut watch, Duration::from_secs(30), || {
        let states: Vec<_> = cluster
            .ids
            .iter()
            .map(|id| cluster.replica_state(*id))
            .collect::<Result<_, _>>()
            .ok()?;
        let all_same = states.windows(2).all(|w| w[0] == w[1]);
        let complete = sim_ref.check(&model.lock(), &states[0].1).is_ok();
        (all_same && complete && states[0].0.is_some()).then_some(states[0].0)
    });
    let Some(applied) = converged else {
        let model = model.lock();
        for id in &cluster.ids {
            match cluster.replica_state(*id) {
                Ok((applied, state)) => eprintln!(
                    "n{id}: applied {applied:?}, check: {:?}\n  state: {state:?}",
                    sim_ref.check(&model, &state)
                ),
                Err(e) => eprintln!("n{id}: unreadable: {e}"),
            }
        }
        panic!("seed {seed}: replicas did not converge within 30 s after healing");
    };
    let acked = sim_ref.acked(&model.lock());
    // Not vacuous: writes went through despite the faults.
    assert!(
        acked >= 10,
        "seed {seed}: only {acked} writes were acknowledged"
    );
    let transfers = cluster.transfers.lock().clone();
    let unknown = *unknown.lock();
    Outcome {
        acked,
        unknown,
        applied,
        election,
        handback,
        transfers,
        snapshots: cluster.snapshots_sent.load(Ordering::Relaxed),
        faults,
    }
}

/// The client: writes what the model draws, one at a time, following leader hints; a
/// write is retried (up to 10 times) only while it certainly was not appended.
async fn client<R: Replicated>(
    cluster: Arc<Cluster<R>>,
    model: Arc<Mutex<R::Model>>,
    unknown: Arc<Mutex<usize>>,
    stop: Arc<AtomicBool>,
    mut rng: StdRng,
) -> turmoil::Result {
    let ids = cluster.ids.clone();
    let sim = cluster.sim.clone();
    let mut target = ids[0];
    let next = |t: NodeId| ids[(ids.iter().position(|x| *x == t).unwrap_or(0) + 1) % ids.len()];
    for _ in 0..5_000u32 {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let write = sim.next_write(&model.lock(), &mut rng);
        let command = sim.command(&write);
        let mut reply = None;
        for _ in 0..10 {
            match write_to(target, &command).await {
                Ok(WriteAnswer::Done(r)) => {
                    reply = Some(r);
                    break;
                }
                Ok(WriteAnswer::NotLeader(Some(l))) => target = l,
                Ok(WriteAnswer::Transferring(to)) => {
                    target = to;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Ok(WriteAnswer::NotLeader(None)) => {
                    target = next(target);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) if !e.maybe_sent => {
                    target = next(target);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                // It may have been applied: never retried (a retry could apply it twice).
                Ok(WriteAnswer::Failed(_)) | Err(_) => {
                    target = next(target);
                    break;
                }
            }
        }
        match reply {
            Some(r) => sim.acknowledged(&mut model.lock(), write, &r)?,
            None => {
                *unknown.lock() += 1;
                sim.unknown(&mut model.lock(), write);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Hands leadership back to `primary` once the group has settled, as a controller
/// would: a failed attempt (the returning node may disrupt the group with elections of
/// its own, openraft having no pre-vote) is retried once the group settles again, up to
/// five attempts. Answers the successful transfer's time, or `None` if `primary` won an
/// election of its own first.
fn hand_back<R: Replicated>(
    sim: &mut turmoil::Sim<'_>,
    watch: &mut Watch<R>,
    cluster: &Cluster<R>,
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
