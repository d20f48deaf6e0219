//! `cluster::replica::ReplicatedShard` on a 3-node Raft group (in-memory engines,
//! loopback TCP): writes through any node (forwarded by followers) land on every
//! replica, conflicts return the current document, the three read modes return the
//! leader's, the linearizable or the local data, range reads come in bounded batches;
//! after the leader stops, writes through the survivors succeed once another is elected;
//! a node cut off from the others refuses `majority` reads and writes with RethinkDB's
//! errors while `outdated` reads answer; a forwarded write whose answer is lost is
//! indeterminate, and is not retried; one forwarded to a leader that falls silent
//! (paused) is indeterminate as soon as another is elected, and a read is asked of it.
//! A shard retired by a resharding refuses writes and routed reads with RethinkDB's
//! availability error, and still answers its resharding's reads and `outdated` ones.

mod harness;

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cluster::replica::{Mark, Op, ReadMode, RouteError};
use harness::*;
use replication::ClientPolicy;
use reql::error::ErrorKind;
use store::Applied;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_route_to_the_leader_and_reads_follow_their_mode() {
    let nodes = start_group(Duration::from_secs(5), client_policy()).await;
    let l = leader(&nodes).await;
    let (f1, f2) = match l {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    let r = insert(nodes[l].h(), 1, "a").await;
    assert!(
        matches!(r, Ok(Applied::Done((None, Some(_), None)))),
        "{r:?}"
    );
    assert_eq!(nodes[l].transport.client_calls.load(Ordering::SeqCst), 0);

    // A follower forwards its write to the leader.
    let r = insert(nodes[f1].h(), 2, "b").await;
    assert!(
        matches!(r, Ok(Applied::Done((None, Some(_), None)))),
        "{r:?}"
    );
    assert_eq!(nodes[f1].transport.client_calls.load(Ordering::SeqCst), 1);

    // A conflicting insert through the other follower returns the current document.
    let r = insert(nodes[f2].h(), 1, "c").await;
    assert!(
        matches!(&r, Ok(Applied::Conflict(Some(c))) if *c == doc(1, "a")),
        "{r:?}"
    );
    for n in &nodes {
        replicated(n, 1, &doc(1, "a")).await;
        replicated(n, 2, &doc(2, "b")).await;
    }

    // Majority and single reads through a follower see a write the moment it is
    // acknowledged (the leader's state); outdated reads see the local replica.
    insert(nodes[f1].h(), 3, "x").await.unwrap();
    for mode in [ReadMode::Majority, ReadMode::Single] {
        let got = nodes[f2].h().get(&key(3), mode).await.unwrap();
        assert_eq!(got, Some(doc(3, "x")), "{mode:?}");
        assert_eq!(
            nodes[l].h().get(&key(3), mode).await.unwrap(),
            Some(doc(3, "x"))
        );
        assert_eq!(nodes[f2].h().get(&key(99), mode).await.unwrap(), None);
    }
    replicated(&nodes[f2], 3, &doc(3, "x")).await;
    let local = nodes[f2]
        .h()
        .get(&key(3), ReadMode::Outdated)
        .await
        .unwrap();
    assert_eq!(local, Some(doc(3, "x")));

    // Range reads come in batches of at most 7, in order, in every mode.
    for id in 10..35 {
        insert(nodes[id as usize % 3].h(), id, "r").await.unwrap();
    }
    let all: Vec<u32> = (1..=3).chain(10..35).collect();
    for n in &nodes {
        replicated(n, 34, &doc(34, "r")).await;
    }
    for mode in [ReadMode::Majority, ReadMode::Single, ReadMode::Outdated] {
        let got = collect(
            nodes[f1].h(),
            mode,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
        )
        .await;
        assert_eq!(got, all, "{mode:?}");
        let back = collect(
            nodes[f2].h(),
            mode,
            Bound::Unbounded,
            Bound::Unbounded,
            true,
        )
        .await;
        assert_eq!(
            back,
            all.iter().rev().copied().collect::<Vec<_>>(),
            "{mode:?}"
        );
    }
    let part = collect(
        nodes[f1].h(),
        ReadMode::Majority,
        Bound::Included(key(12)),
        Bound::Excluded(key(30)),
        false,
    )
    .await;
    assert_eq!(part, (12..30).collect::<Vec<_>>());

    // A forwarded write whose answer is lost (the leader applied it, then the
    // connection died) is indeterminate, and was sent exactly once.
    let before = nodes[f1].transport.client_calls.load(Ordering::SeqCst);
    nodes[f1]
        .transport
        .drop_answers
        .store(true, Ordering::SeqCst);
    let err = insert(nodes[f1].h(), 50, "lost").await.unwrap_err();
    assert_eq!(err, RouteError::LostContact(Op::Write));
    let e = err.to_reql();
    assert_eq!(e.kind, ErrorKind::OpIndeterminate);
    assert_eq!(
        e.message,
        "Cannot perform write: lost contact with primary replica"
    );
    assert_eq!(
        nodes[f1].transport.client_calls.load(Ordering::SeqCst),
        before + 1
    );
    // It was applied: the error was rightly "may or may not have been performed".
    let got = nodes[l]
        .h()
        .get(&key(50), ReadMode::Majority)
        .await
        .unwrap();
    assert_eq!(got, Some(doc(50, "lost")));
    nodes[f1]
        .transport
        .drop_answers
        .store(false, Ordering::SeqCst);

    for mut n in nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivors_elect_a_leader_and_an_isolated_node_refuses() {
    let mut nodes = start_group(Duration::from_secs(5), client_policy()).await;
    let l = leader(&nodes).await;
    insert(nodes[l].h(), 1, "a").await.unwrap();

    // The leader stops; a write through a survivor waits for the election and lands.
    nodes[l].stop().await;
    let survivor = (l + 1) % 3;
    let started = Instant::now();
    let r = insert(nodes[survivor].h(), 2, "b").await;
    let took = started.elapsed();
    println!("write through a survivor after the leader stopped: {took:?}");
    assert!(matches!(r, Ok(Applied::Done(_))), "{r:?}");
    let l2 = leader(&nodes).await;
    assert_ne!(l2, l);
    for n in nodes.iter().filter(|n| n.handle.is_some()) {
        replicated(n, 2, &doc(2, "b")).await;
    }

    // The new leader's last follower stops: the leader is cut off from its quorum.
    let other = (0..3).find(|&i| i != l && i != l2).unwrap();
    nodes[other].stop().await;
    // Past the quorum lease (the shortest election timeout), it refuses.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let alone = nodes[l2].h();
    let unavailable = "primary replica for shard [\"\", +inf) not available";
    let w = insert(alone, 3, "c").await.unwrap_err().to_reql();
    assert_eq!(w.kind, ErrorKind::OpFailed, "{w:?}");
    assert!(
        w.message
            == "Cannot perform write: The primary replica isn't connected to a quorum of \
                replicas. The write was not performed."
            || w.message == format!("Cannot perform write: {unavailable}"),
        "{w:?}"
    );
    let r = alone
        .get(&key(1), ReadMode::Majority)
        .await
        .unwrap_err()
        .to_reql();
    assert_eq!(r.kind, ErrorKind::OpFailed, "{r:?}");
    assert!(
        r.message
            == "Cannot perform read: The primary replica isn't connected to a quorum of \
                replicas. The read was not performed, you can do an outdated read using \
                `read_mode=\"outdated\"`."
            || r.message == format!("Cannot perform read: {unavailable}"),
        "{r:?}"
    );
    println!("isolated node refuses: {} / {}", w.message, r.message);
    assert_eq!(
        alone.get(&key(1), ReadMode::Outdated).await.unwrap(),
        Some(doc(1, "a"))
    );
    assert_eq!(
        alone.get(&key(3), ReadMode::Outdated).await.unwrap(),
        None,
        "the refused write was not performed"
    );
    nodes[l2].stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_follower_finds_no_primary() {
    let mut nodes = start_group(Duration::from_secs(2), client_policy()).await;
    let l = leader(&nodes).await;
    insert(nodes[l].h(), 1, "a").await.unwrap();
    let alone = (l + 1) % 3;
    replicated(&nodes[alone], 1, &doc(1, "a")).await;
    // The leader and the other follower stop: no leader can be elected.
    for i in (0..3).filter(|&i| i != alone) {
        nodes[i].stop().await;
    }
    let h = nodes[alone].h();
    let started = Instant::now();
    let w = insert(h, 2, "b").await.unwrap_err();
    assert!(
        matches!(w, RouteError::PrimaryUnavailable { op: Op::Write, .. }),
        "{w:?}"
    );
    let w = w.to_reql();
    assert_eq!(w.kind, ErrorKind::OpFailed);
    assert_eq!(
        w.message,
        "Cannot perform write: primary replica for shard [\"\", +inf) not available"
    );
    // Within the deadline (and not much past it).
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    for mode in [ReadMode::Majority, ReadMode::Single] {
        let r = h.get(&key(1), mode).await.unwrap_err().to_reql();
        assert_eq!(r.kind, ErrorKind::OpFailed);
        assert_eq!(
            r.message,
            "Cannot perform read: primary replica for shard [\"\", +inf) not available"
        );
    }
    assert_eq!(
        h.get(&key(1), ReadMode::Outdated).await.unwrap(),
        Some(doc(1, "a"))
    );
    let ids = collect(
        h,
        ReadMode::Outdated,
        Bound::Unbounded,
        Bound::Unbounded,
        false,
    )
    .await;
    assert_eq!(ids, vec![1]);
    nodes[alone].stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_appended_by_a_leader_that_loses_its_quorum_is_indeterminate() {
    // A lease long enough that the leader does not notice it is cut off: the write is
    // appended, never committed, and the commit timeout makes its outcome unknown.
    let client = ClientPolicy {
        quorum_lease: Duration::from_secs(600),
        commit_timeout: Duration::from_secs(1),
    };
    let mut nodes = start_group(Duration::from_secs(5), client).await;
    let l = leader(&nodes).await;
    insert(nodes[l].h(), 1, "a").await.unwrap();
    for i in (0..3).filter(|&i| i != l) {
        nodes[i].stop().await;
    }
    let h = nodes[l].h();
    let err = insert(h, 2, "b").await.unwrap_err();
    assert!(matches!(err, RouteError::CommitUnknown(_)), "{err:?}");
    let e = err.to_reql();
    assert_eq!(e.kind, ErrorKind::OpIndeterminate);
    assert_eq!(
        e.message,
        "Cannot perform write: The primary replica lost contact with the secondary \
         replicas. The write may or may not have been performed."
    );
    // A linearizable read cannot confirm the leadership: refused, not stale.
    let r = h.get(&key(1), ReadMode::Majority).await.unwrap_err();
    assert_eq!(r, RouteError::NoQuorum(Op::Read));
    assert_eq!(
        h.get(&key(1), ReadMode::Outdated).await.unwrap(),
        Some(doc(1, "a"))
    );
    nodes[l].stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_forwarded_to_a_silent_leader_ends_when_another_is_elected() {
    let mut nodes = start_group(Duration::from_secs(10), client_policy()).await;
    let l = leader(&nodes).await;
    insert(nodes[l].h(), 1, "a").await.unwrap();
    let f = (l + 1) % 3;
    replicated(&nodes[f], 1, &doc(1, "a")).await;
    // The leader falls silent (SIGSTOP): nothing it sends arrives, nothing sent to it is
    // answered, and the TCP connections stay open.
    let silent = nodes[l].id;
    nodes[l].transport.silent.store(true, Ordering::SeqCst);
    for n in &nodes {
        n.transport.silent_to.store(silent, Ordering::SeqCst);
    }
    // A write through a follower goes to the silent leader: once the others elect a
    // leader it is indeterminate (it may have reached the old one), long before the
    // 10 s deadline, and it was sent once.
    let before = nodes[f].transport.client_calls.load(Ordering::SeqCst);
    let started = Instant::now();
    let w = insert(nodes[f].h(), 2, "b").await;
    let took = started.elapsed();
    println!("write forwarded to a silent leader: {w:?} after {took:?}");
    assert!(
        matches!(w, Err(RouteError::LostContact(Op::Write))),
        "{w:?}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert_eq!(
        nodes[f].transport.client_calls.load(Ordering::SeqCst),
        before + 1
    );
    // A read is asked of the new leader and answers; so does the next write.
    let r = nodes[f].h().get(&key(1), ReadMode::Majority).await;
    assert_eq!(r, Ok(Some(doc(1, "a"))));
    insert(nodes[f].h(), 3, "c").await.unwrap();
    for n in &mut nodes {
        n.transport.silent.store(false, Ordering::SeqCst);
        n.transport.silent_to.store(0, Ordering::SeqCst);
    }
    for mut n in nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_shard_answers_only_its_reshardings_reads_and_outdated_ones() {
    let nodes = start_group(Duration::from_secs(5), client_policy()).await;
    let l = leader(&nodes).await;
    for id in 1..=20 {
        insert(nodes[id as usize % 3].h(), id, "a").await.unwrap();
    }
    let all: Vec<u32> = (1..=20).collect();
    // Frozen only: every mode still reads the final documents.
    nodes[l].h().mark(Mark::Freeze, 2).await.unwrap();
    for n in &nodes {
        replicated(n, 20, &doc(20, "a")).await;
        for mode in [ReadMode::Majority, ReadMode::Single, ReadMode::Outdated] {
            assert_eq!(n.h().get(&key(3), mode).await.unwrap(), Some(doc(3, "a")));
        }
    }
    // Retired (through a follower): a routed read is refused as the primary's absence,
    // on every node, including the leader's own lease-served `single` read.
    let f = (l + 1) % 3;
    nodes[f].h().mark(Mark::Retire, 2).await.unwrap();
    for n in &nodes {
        for mode in [ReadMode::Majority, ReadMode::Single] {
            let err = n.h().get(&key(3), mode).await.unwrap_err();
            assert!(
                matches!(&err, RouteError::PrimaryUnavailable { op: Op::Read, .. }),
                "{mode:?}: {err:?}"
            );
            assert!(n.h().get_now(&key(3), mode).is_none(), "{mode:?}");
            let e = err.to_reql();
            assert_eq!(e.kind, ErrorKind::OpFailed);
            assert!(
                e.message
                    .starts_with("Cannot perform read: primary replica for shard"),
                "{}",
                e.message
            );
            let count = n
                .h()
                .count(mode, &Bound::Unbounded, &Bound::Unbounded)
                .await;
            assert!(count.is_err(), "{mode:?}: {count:?}");
        }
        // Its resharding still reads every document; `outdated` reads the replica.
        let got = collect(
            n.h(),
            ReadMode::Final,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
        )
        .await;
        assert_eq!(got, all);
        let got = collect(
            n.h(),
            ReadMode::Outdated,
            Bound::Unbounded,
            Bound::Unbounded,
            true,
        )
        .await;
        assert_eq!(got, all.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(
            n.h().get(&key(3), ReadMode::Outdated).await.unwrap(),
            Some(doc(3, "a"))
        );
        // Writes stay refused, as frozen.
        let err = insert(n.h(), 99, "late").await.unwrap_err();
        assert!(
            matches!(&err, RouteError::PrimaryUnavailable { op: Op::Write, .. }),
            "{err:?}"
        );
    }
    for mut n in nodes {
        n.stop().await;
    }
}
