//! Tests of leader transfer on in-process groups ([`harness::Group`]): each follower in
//! turn, under writes, to a cut-off or stopped node, refusals, five voters.

mod harness;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::*;
use harness::{term, Group, G};

const TIMEOUT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_to_each_follower_in_turn_and_back() {
    let group = Group::start(3).await;
    let mut leader = group.wait_for_leader(None).await;
    group.put(leader, "before").await.unwrap();
    // Led longer than the lease (election_timeout_max): the leader grants at once.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut times = Vec::new();
    // To each other voter in turn, then back to node 1 (the configured primary).
    let mut order: Vec<NodeId> = (1..=3).filter(|id| *id != leader).collect();
    order.push(1);
    for target in order {
        if target == leader {
            continue;
        }
        let before = term(group.raft(leader));
        let done = group.transfer(leader, target, TIMEOUT).await.unwrap();
        assert!(!done.quiet, "three voters take the direct path");
        assert!(done.term > before);
        // The old leader saw the new one lead; the new one's metrics may lag a moment.
        assert_eq!(group.wait_for_leader(Some(leader)).await, target);
        times.push(done.elapsed);
        // The new leader serves writes; the old one sends proposers there.
        group.put(target, &format!("at-{target}")).await.unwrap();
        assert!(matches!(
            group.put(leader, "stale").await,
            Err(ProposeError::NotLeader { leader: Some(l) }) if l == target
        ));
        leader = target;
    }
    assert_eq!(leader, 1);
    // The first transfer did not wait for the leader's lease; the others (from leaders
    // elected just before) did.
    eprintln!("in-process transfers (3 voters, direct path): {times:?}");
    assert!(times[0] < Duration::from_millis(300), "{times:?}");
    let map = group.converged(&[1, 2, 3]).await;
    assert!(map.contains_key("before") && map.contains_key("at-2") && map.contains_key("at-3"));
    assert!(!map.contains_key("stale"));
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_under_a_write_load_lose_no_acknowledged_write() {
    let group = Arc::new(Group::start(3).await);
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let fenced = Arc::new(Mutex::new(0usize));
    let mut writers = Vec::new();
    for w in 0..3 {
        let (group, acked, stop, fenced) =
            (group.clone(), acked.clone(), stop.clone(), fenced.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w{w}-{i:05}");
                let Some(at) = group.leader() else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                match group.put(at, &key).await {
                    Ok(_) => {
                        acked.lock().push(key);
                        i += 1;
                    }
                    Err(ProposeError::Transferring { .. }) => {
                        *fenced.lock() += 1;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    // Not acknowledged: it may or may not be applied; the key is retried.
                    Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                }
            }
        }));
    }
    let mut times = Vec::new();
    for round in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let leader = group.wait_for_leader(None).await;
        let target = leader % 3 + 1;
        let done = group.transfer(leader, target, TIMEOUT).await;
        let done = done.unwrap_or_else(|e| panic!("round {round}: n{leader} -> n{target}: {e}"));
        times.push(done.elapsed);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let map = group.converged(&[1, 2, 3]).await;
    let acked = acked.lock().clone();
    assert!(acked.len() > 50, "only {} writes acknowledged", acked.len());
    let missing: Vec<_> = acked.iter().filter(|k| !map.contains_key(*k)).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    assert!(*fenced.lock() > 0, "no proposal met the fence");
    eprintln!(
        "in-process transfers under load: {} writes acknowledged, {} fenced, transfers {times:?}",
        acked.len(),
        fenced.lock()
    );
    let Ok(group) = Arc::try_unwrap(group) else {
        panic!("the writers still hold the group");
    };
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_to_a_partitioned_or_stopped_node_times_out_and_the_leader_keeps_serving() {
    let group = Group::start(3).await;
    let leader = group.wait_for_leader(None).await;
    group.put(leader, "a").await.unwrap();
    let cut = leader % 3 + 1;
    let before = term(group.raft(leader));

    // Caught up, then cut off: the hand-off cannot reach it.
    group.converged(&[1, 2, 3]).await;
    group.net.cut.write().insert(cut);
    let t = std::time::Instant::now();
    let err = group
        .transfer(leader, cut, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            TransferError::TimedOut {
                stage: Stage::HandOff,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(group.leader(), Some(leader));
    assert_eq!(term(group.raft(leader)), before);
    group.put(leader, "b").await.unwrap();
    // Healed: the cut node's own elections (it heard no leader) may depose the leader
    // once (openraft has no pre-vote); that is not the transfer's doing.
    group.net.cut.write().remove(&cut);
    group.put(group.wait_for_leader(None).await, "c").await.ok();
    group.converged(&[1, 2, 3]).await;

    // Stopped: its router is gone and its node shut down.
    let leader = group.wait_for_leader(None).await;
    let stopped = leader % 3 + 1;
    let before = term(group.raft(leader));
    group.net.routers.write().remove(&stopped);
    group.raft(stopped).shutdown().await.unwrap();
    group.put(leader, "d").await.unwrap();
    let err = group
        .transfer(leader, stopped, Duration::from_secs(1))
        .await
        .unwrap_err();
    let m = group.raft(leader).metrics().borrow().clone();
    assert!(
        matches!(
            err,
            TransferError::TimedOut {
                stage: Stage::CatchUp,
                ..
            }
        ),
        "{err}; the leader's metrics: {m:?}"
    );
    assert_eq!(group.leader(), Some(leader));
    assert_eq!(term(group.raft(leader)), before);
    group.put(leader, "e").await.unwrap();
    let live: Vec<NodeId> = (1..=3).filter(|id| *id != stopped).collect();
    let map = group.converged(&live).await;
    for key in ["a", "b", "d", "e"] {
        assert!(map.contains_key(key), "{key} lost");
    }
    for id in live {
        group.raft(id).shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_strangers_followers_and_a_second_transfer_are_refused() {
    let mut group = Group::start(3).await;
    let leader = group.wait_for_leader(None).await;
    group.add_node(4).await;
    group
        .raft(leader)
        .add_learner(4, Node::new("n4"), true)
        .await
        .unwrap();
    let follower = leader % 3 + 1;
    let err = group.transfer(leader, 4, TIMEOUT).await.unwrap_err();
    assert!(matches!(err, TransferError::TargetIsLearner(4)), "{err}");
    assert!(err.to_string().contains("learner"));
    let err = group.transfer(leader, 9, TIMEOUT).await.unwrap_err();
    assert!(matches!(err, TransferError::NotAMember(9)), "{err}");
    let err = group.transfer(leader, leader, TIMEOUT).await.unwrap_err();
    assert!(matches!(err, TransferError::TargetIsSelf(_)), "{err}");
    let err = group.transfer(follower, leader, TIMEOUT).await.unwrap_err();
    assert!(
        matches!(err, TransferError::NotLeader { leader: Some(l) } if l == leader),
        "{err}"
    );
    // A second transfer while one holds the fence; proposals meet the fence meanwhile.
    let _held = group.members[&leader]
        .proposer
        .fence
        .raise(follower)
        .unwrap();
    let err = group.transfer(leader, follower, TIMEOUT).await.unwrap_err();
    assert!(
        matches!(err, TransferError::AlreadyTransferring(f) if f == follower),
        "{err}"
    );
    assert!(matches!(
        group.put(leader, "x").await,
        Err(ProposeError::Transferring { target }) if target == follower
    ));
    drop(_held);
    group.put(leader, "x").await.unwrap();
    assert_eq!(group.leader(), Some(leader));
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_or_early_timeout_now_is_refused_and_a_repeated_one_starts_no_second_election() {
    let group = Group::start(3).await;
    let leader = group.wait_for_leader(None).await;
    group.put(leader, "a").await.unwrap();
    group.converged(&[1, 2, 3]).await;
    let follower = leader % 3 + 1;
    let m = group.raft(leader).metrics().borrow().clone();
    let router = group.net.routers.read()[&follower].clone();
    let last = m.last_applied;
    // A vote of an earlier term: a delayed TimeoutNow starts no election.
    let old = Vote::new_committed(m.current_term - 1, leader);
    let answer = router
        .handle(
            G,
            RaftRequest::TimeoutNow {
                vote: old,
                last_log_id: last,
            },
        )
        .await;
    assert!(
        matches!(answer, RaftResponse::Refused(ref w) if w.contains("does not follow")),
        "{answer:?}"
    );
    // A log the follower does not hold yet.
    let ahead = last.map(|mut l| {
        l.index += 10;
        l
    });
    let answer = router
        .handle(
            G,
            RaftRequest::TimeoutNow {
                vote: m.vote,
                last_log_id: ahead,
            },
        )
        .await;
    assert!(
        matches!(answer, RaftResponse::Refused(ref w) if w.contains("caught up")),
        "{answer:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(group.leader(), Some(leader));
    assert_eq!(term(group.raft(leader)), m.current_term);

    // The real one (the leader has led longer than its lease, so it grants at once);
    // repeated after the follower won (an answer lost), it starts no second election.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let now = RaftRequest::TimeoutNow {
        vote: m.vote,
        last_log_id: last,
    };
    let answer = router.handle(G, now).await;
    assert!(
        matches!(answer, RaftResponse::ElectionStarted),
        "{answer:?}"
    );
    assert_eq!(group.wait_for_leader(Some(leader)).await, follower);
    let won = term(group.raft(follower));
    assert_eq!(won, m.current_term + 1);
    let again = RaftRequest::TimeoutNow {
        vote: m.vote,
        last_log_id: last,
    };
    let answer = router.handle(G, again).await;
    assert!(
        matches!(answer, RaftResponse::ElectionStarted),
        "{answer:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(term(group.raft(follower)), won);
    assert_eq!(group.leader(), Some(follower));
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_take_the_quiet_path_and_a_failed_one_leaves_the_leader_in_charge() {
    let group = Group::start(5).await;
    let leader = group.wait_for_leader(None).await;
    group.put(leader, "a").await.unwrap();
    let target = leader % 5 + 1;
    let done = group.transfer(leader, target, TIMEOUT).await.unwrap();
    assert!(done.quiet);
    assert_eq!(group.wait_for_leader(Some(leader)).await, target);
    eprintln!(
        "in-process transfer (5 voters, quiet path): {:?}",
        done.elapsed
    );
    group.put(target, "b").await.unwrap();

    // And back: the first transfer resumed the old leader's heartbeats (paused, they
    // would let the followers' timers fire within lease + election timeout).
    let back = group.transfer(target, leader, TIMEOUT).await.unwrap();
    assert!(back.quiet);
    assert_eq!(group.wait_for_leader(Some(target)).await, leader);
    let led = term(group.raft(leader));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(group.leader(), Some(leader));
    assert_eq!(term(group.raft(leader)), led);

    // A node cut off after catching up: heartbeats resume in time, no election.
    let (target, next) = (leader, target % 5 + 1);
    group.converged(&[1, 2, 3, 4, 5]).await;
    let before = term(group.raft(target));
    group.net.cut.write().insert(next);
    let err = group.transfer(target, next, TIMEOUT).await.unwrap_err();
    assert!(
        matches!(
            err,
            TransferError::TimedOut {
                stage: Stage::HandOff,
                ..
            }
        ),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(group.leader(), Some(target));
    assert_eq!(term(group.raft(target)), before);
    group.put(target, "c").await.unwrap();
    group.net.cut.write().remove(&next);
    assert_eq!(group.converged(&[1, 2, 3, 4, 5]).await.len(), 3);
    group.shutdown().await;
}

/// A target that stopped answering holds writes up for one lease at most: the fenced
/// catch-up gives up then, not at the transfer's timeout. (Fenced for the whole timeout,
/// a new leader trying to hand the lead back to a primary just cut off refused writes
/// for 5 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_to_a_target_that_fell_behind_holds_writes_one_lease_at_most() {
    let group = Group::start(3).await;
    let leader = group.wait_for_leader(None).await;
    group.put(leader, "a").await.unwrap();
    let stopped = leader % 3 + 1;
    group.net.routers.write().remove(&stopped);
    group.raft(stopped).shutdown().await.unwrap();
    group.put(leader, "b").await.unwrap();
    let t = std::time::Instant::now();
    let transfer = group
        .transfer(leader, stopped, Duration::from_secs(5))
        .await;
    assert!(
        matches!(
            transfer,
            Err(TransferError::TimedOut {
                stage: Stage::CatchUp,
                ..
            })
        ),
        "{transfer:?}"
    );
    // The lease is 500 ms here.
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    group.put(leader, "c").await.unwrap();
    assert_eq!(group.leader(), Some(leader));
    for id in (1..=3).filter(|id| *id != stopped) {
        group.raft(id).shutdown().await.unwrap();
    }
}
