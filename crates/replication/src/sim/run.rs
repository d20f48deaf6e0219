//! One simulated run ([`simulate`]): group 0's first election and hand-back, the
//! random-fault phase (with placement moves when the plan has a mover), then healing,
//! every group's membership reaching its placement, and the convergence check; and the
//! clients, one per group, that write throughout (`client`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::node::{host_name, run_node, write_to, Cluster, Group, WriteAnswer};
use super::steps::{heal, isolate, leader_of, placed, run_for, run_until, settled, term_of, Watch};
use super::{Outcome, Placement, Plan, Replicated};
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
    let cluster = Cluster::new(replicated, plan.groups.max(1), plan.mover.clone());
    for &id in &cluster.ids {
        let c = cluster.clone();
        sim.host(host_name(id), move || run_node(id, c.clone()));
    }

    // One client per group writes until told to stop; its model records what was
    // acknowledged.
    let models: Vec<Arc<Mutex<R::Model>>> = cluster.groups.iter().map(|_| Arc::default()).collect();
    let unknown = Arc::new(Mutex::new(0usize));
    let stop = Arc::new(AtomicBool::new(false));
    for (g, model) in models.iter().enumerate() {
        sim.client(
            format!("client{g}"),
            client(
                cluster.clone(),
                g,
                model.clone(),
                unknown.clone(),
                stop.clone(),
                StdRng::seed_from_u64(seed ^ 0xc11e_0700 ^ g as u64),
            ),
        );
    }

    let mut faults: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut watch = Watch::new(seed, cluster.clone());
    let names: Vec<String> = cluster.ids.iter().map(|id| host_name(*id)).collect();
    let g0 = &cluster.groups[0];

    // 1. Group 0's leader is elected, then partitioned away: another node must take over.
    let leader = run_until(&mut sim, &mut watch, Duration::from_secs(10), || {
        leader_of(g0, &BTreeSet::new())
    })
    .unwrap_or_else(|| panic!("seed {seed}: no leader within 10 s"));
    let old_term = term_of(g0, leader);
    run_for(&mut sim, &mut watch, Duration::from_secs(1));
    isolate(&sim, &names, leader);
    *faults.entry("leader partition").or_default() += 1;
    let t0 = sim.elapsed();
    let excluded = BTreeSet::from([leader]);
    let new_leader = run_until(&mut sim, &mut watch, Duration::from_secs(10), || {
        leader_of(g0, &excluded).filter(|l| term_of(g0, *l) > old_term)
    })
    .unwrap_or_else(|| panic!("seed {seed}: no new leader within 10 s of partitioning n{leader}"));
    let election = sim.elapsed() - t0;
    assert_ne!(new_leader, leader);
    heal(&mut sim, &names, &mut BTreeSet::new());

    // 1b. The old leader (the configured primary) is back: leadership is handed to it.
    let handback = hand_back(&mut sim, &mut watch, g0, leader);

    // 2. Random faults, one outage at a time (a majority is usually up), and placement
    // moves when there is a mover.
    let mut crashed: BTreeSet<NodeId> = BTreeSet::new();
    let mut moves = 0u32;
    let mut moved = vec![0u32; cluster.groups.len()];
    let end = sim.elapsed() + plan.fault_phase;
    while sim.elapsed() < end {
        let victim = cluster.ids[rng.gen_range(0..cluster.ids.len())];
        let vname = host_name(victim);
        let length = Duration::from_millis(rng.gen_range(200..3000));
        if cluster.mover.is_some() && rng.gen_bool(0.5) {
            // The next placement of a random group's cycle: {1,2,3} -> {1,2,4} ->
            // {1,2,3} -> {1,2,3} with learner 4 -> {1,2,3}; its leader's operator carries
            // it out while the fault below runs.
            let g = rng.gen_range(0..cluster.groups.len());
            moved[g] += 1;
            moves += 1;
            *cluster.groups[g].want.lock() = placement(&cluster.founders, moved[g]);
        }
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
                // A transfer in a random group to a voter that does not lead (the
                // victim if none leads), sometimes with a crash of a node (the target,
                // the leader or another) while it runs.
                *faults.entry("transfer").or_default() += 1;
                let group = &cluster.groups[rng.gen_range(0..cluster.groups.len())];
                let followers: Vec<NodeId> = match leader_of(group, &BTreeSet::new()) {
                    Some(l) => group.rafts.lock()[&l]
                        .metrics()
                        .borrow()
                        .membership_config
                        .membership()
                        .voter_ids()
                        .filter(|i| *i != l)
                        .collect(),
                    None => vec![victim],
                };
                if let Some(&to) = followers.get(rng.gen_range(0..followers.len().max(1))) {
                    *group.transfer_to.lock() = Some(to);
                }
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
                group.transfer_to.lock().take();
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

    // 3. Healed: every group's membership becomes its placement; then, quiet, every
    // member converges and holds every acknowledged write.
    heal(&mut sim, &names, &mut crashed);
    for (g, group) in cluster.groups.iter().enumerate() {
        run_until(&mut sim, &mut watch, Duration::from_secs(30), || {
            placed(group).then_some(())
        })
        .unwrap_or_else(|| {
            for (id, raft) in group.rafts.lock().iter() {
                let m = raft.metrics().borrow().clone();
                eprintln!(
                    "group {g}, n{id}: {:?} {}, membership {:?}, last log {:?}, applied {:?}, \
                     matched {:?}",
                    m.state,
                    m.vote,
                    m.membership_config,
                    m.last_log_index,
                    m.last_applied,
                    m.replication
                );
            }
            panic!(
                "seed {seed}: group {g}'s membership did not become {:?} within 30 s after \
                 healing",
                group.want.lock()
            )
        });
    }
    stop.store(true, Ordering::Relaxed);
    let sim_ref = cluster.sim.clone();
    let mut applied = Vec::new();
    for (g, group) in cluster.groups.iter().enumerate() {
        let want = group.want.lock().clone();
        let members: Vec<NodeId> = want.voters.union(&want.learners).copied().collect();
        let model = &models[g];
        let converged = run_until(&mut sim, &mut watch, Duration::from_secs(30), || {
            let states: Vec<_> = members
                .iter()
                .map(|id| cluster.replica_state(g, *id))
                .collect::<Result<_, _>>()
                .ok()?;
            let all_same = states.windows(2).all(|w| w[0] == w[1]);
            let complete = sim_ref.check(&model.lock(), &states[0].1).is_ok();
            (all_same && complete && states[0].0.is_some()).then_some(states[0].0)
        });
        let Some(at) = converged else {
            let model = model.lock();
            for id in &members {
                match cluster.replica_state(g, *id) {
                    Ok((applied, state)) => eprintln!(
                        "group {g}, n{id}: applied {applied:?}, check: {:?}\n  state: {state:?}",
                        sim_ref.check(&model, &state)
                    ),
                    Err(e) => eprintln!("group {g}, n{id}: unreadable: {e}"),
                }
            }
            panic!("seed {seed}: group {g}'s replicas did not converge within 30 s after healing");
        };
        applied.push(at);
        let acked = sim_ref.acked(&model.lock());
        // Not vacuous: writes went through despite the faults.
        assert!(
            acked >= 10,
            "seed {seed}: group {g}: only {acked} writes were acknowledged"
        );
    }
    let acked = models.iter().map(|m| sim_ref.acked(&m.lock())).sum();
    let mut transfers = Vec::new();
    let mut changes = (0, 0);
    for group in &cluster.groups {
        transfers.extend(group.transfers.lock().iter().cloned());
        let c = *group.changes.lock();
        changes = (changes.0 + c.0, changes.1 + c.1);
    }
    let unknown = *unknown.lock();
    Outcome {
        acked,
        unknown,
        applied,
        election,
        handback,
        transfers,
        changes,
        moves,
        snapshots: cluster.snapshots_sent.load(Ordering::Relaxed),
        faults,
    }
}

/// The `n`th placement of the move cycle, from the founders {1,2,3} and the spare 4.
fn placement(founders: &BTreeSet<NodeId>, n: u32) -> Placement {
    let spare = founders.iter().max().copied().unwrap_or(0) + 1;
    let mut voters = founders.clone();
    let mut learners = BTreeSet::new();
    match n % 4 {
        1 => {
            // The last founder's place goes to the spare.
            voters.pop_last();
            voters.insert(spare);
        }
        3 => {
            learners.insert(spare);
        }
        _ => {}
    }
    Placement { voters, learners }
}

/// The client: writes what the model draws, one at a time, following leader hints; a
/// write is retried (up to 10 times) only while it certainly was not appended.
async fn client<R: Replicated>(
    cluster: Arc<Cluster<R>>,
    g: usize,
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
            match write_to(target, g, &command).await {
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
    group: &Group,
    primary: NodeId,
) -> Option<Duration> {
    let seed = watch.seed;
    let mut failures = Vec::new();
    for _ in 0..5 {
        run_until(sim, watch, Duration::from_secs(10), || {
            settled(group).then_some(())
        })
        .unwrap_or_else(|| panic!("seed {seed}: the group did not settle"));
        run_for(sim, watch, Duration::from_millis(300));
        if leader_of(group, &BTreeSet::new()) == Some(primary) {
            return None;
        }
        let before = group.transfers.lock().len();
        *group.transfer_to.lock() = Some(primary);
        let record = run_until(sim, watch, Duration::from_secs(10), || {
            if let Some(record) = group.transfers.lock().get(before).cloned() {
                return Some(Some(record));
            }
            // It won an election of its own while the request was untaken.
            let untaken = group.transfer_to.lock().is_some();
            (untaken && leader_of(group, &BTreeSet::new()) == Some(primary)).then_some(None)
        })
        .unwrap_or_else(|| panic!("seed {seed}: the transfer back to n{primary} was never taken"));
        match record {
            Some((_, to, Ok(took))) if to == primary => {
                let led = run_until(sim, watch, Duration::from_secs(1), || {
                    leader_of(group, &BTreeSet::new()).filter(|l| *l == primary)
                });
                assert_eq!(
                    led,
                    Some(primary),
                    "seed {seed}: n{primary} does not lead after the transfer"
                );
                return Some(took);
            }
            None => {
                group.transfer_to.lock().take();
                return None;
            }
            Some(other) => failures.push(other),
        }
    }
    panic!("seed {seed}: five transfers back to n{primary} failed: {failures:?}");
}
