//! The catalog group grows as servers join (`replication::grow`): a server alone
//! initialises it; two more open empty members; the leader adds them as learners, then
//! voters; they receive the catalog and change it through `TableAccess`; losing any one
//! of the three then leaves a quorum.

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_join_are_added_as_learners_then_voters() {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id).await);
    }
    let alone = BTreeMap::from([(1, Node::new(nodes[0].addr.clone()))]);
    nodes[0]
        .raft
        .as_ref()
        .unwrap()
        .initialize(alone)
        .await
        .unwrap();
    let c = nodes[0].cluster().clone();
    let first = &nodes[..1];
    write_first_entries(first).await;
    blocking(move || c.db_create("d").unwrap()).await;

    let wanted: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    let raft = nodes[0].raft.clone().unwrap();
    let grown = grow(&raft, &wanted, 5).await.unwrap();
    assert_eq!(grown.learners, vec![2, 3]);
    assert!(grown.voters_changed);
    // A follower does nothing; the leader, nothing more.
    let follower = nodes[1].raft.clone().unwrap();
    assert_eq!(grow(&follower, &wanted, 5).await.unwrap(), Grown::default());
    assert_eq!(grow(&raft, &wanted, 5).await.unwrap(), Grown::default());
    let voters: Vec<NodeId> = raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert_eq!(voters, vec![1, 2, 3]);

    // format, test, d, admin on every node; a change through a new member.
    converge(&nodes, 4).await;
    let c = nodes[2].cluster().clone();
    blocking(move || c.db_create("e").unwrap()).await;
    converge(&nodes, 5).await;

    // With three voters, one can go.
    let n = &mut nodes[0];
    n.router.remove_group(GROUP);
    n.raft.take().unwrap().shutdown().await.unwrap();
    n.cluster.take().unwrap().shutdown();
    let c = nodes[1].cluster().clone();
    blocking(move || c.db_create("f").unwrap()).await;
    let rest = &nodes[1..];
    converge(rest, 6).await;
}
