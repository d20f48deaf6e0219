//! Catalog changes through `TableAccess` on any node (the catalog's `RaftProposer`).

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_access_on_any_node_changes_every_nodes_catalog() {
    let nodes = three_nodes().await;
    write_first_entries(&nodes).await;
    let leader_id = leader(&nodes).await.current_leader().await.unwrap();
    let follower = (1..=3u64).find(|&id| id != leader_id).unwrap() as usize - 1;
    let on = |i: usize| nodes[i].cluster().clone();
    let single = Cluster::open(Arc::new(Memory::new()), "single").unwrap();

    // Through a follower: forwarded to the leader, and applied here before the answer.
    let c = on(follower);
    let (created, listed) = blocking(move || {
        let created = c.db_create("d").unwrap();
        (created, c.db_list().unwrap())
    })
    .await;
    assert_eq!(count(&created, "dbs_created"), Some(1.0));
    assert!(listed.contains(&"d".to_string()), "{listed:?}");
    let c = on(follower);
    let t = blocking(move || {
        c.table_create("d", "t", opts(1, 1))
            .map(|_| c.table("d", "t").is_ok())
    })
    .await;
    assert_eq!(t, Ok(true));

    // Errors are a single server's, through any node.
    single.db_create("d").unwrap();
    single.table_create("d", "t", opts(1, 1)).unwrap();
    let expected = single.table_create("d", "t", opts(1, 1)).unwrap_err();
    for i in 0..3 {
        let c = on(i);
        let err = blocking(move || c.table_create("d", "t", opts(1, 1)).unwrap_err()).await;
        assert_eq!(
            (&err.kind, &err.message),
            (&expected.kind, &expected.message)
        );
    }
    let expected = single.db_create("d").unwrap_err();
    let c = on(2);
    let err = blocking(move || c.db_create("d").unwrap_err()).await;
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    single.shutdown();

    // An index created through one node, renamed through another: on every node.
    let c = on(0);
    blocking(move || c.table("d", "t").unwrap().index_create("v", v_index()))
        .await
        .unwrap();
    let c = on(1);
    blocking(move || c.table("d", "t").unwrap().index_rename("v", "w", false))
        .await
        .unwrap();
    let c = on(2);
    blocking(move || c.table_create("d", "gone", opts(1, 1)).map(|_| ()))
        .await
        .unwrap();
    let serve = converge(&nodes, 6).await;
    assert_eq!(serve, ["d.gone[]", "d.t[\"w\"]", "d", "rethinkdb", "test"]);

    let c = on(follower);
    let dropped = blocking(move || c.table_drop("d", "gone")).await.unwrap();
    assert_eq!(count(&dropped, "tables_dropped"), Some(1.0));
    let serve = converge(&nodes, 5).await;
    assert_eq!(serve, ["d.t[\"w\"]", "d", "rethinkdb", "test"]);
    let c = on(leader_id as usize - 1);
    blocking(move || c.db_drop("d")).await.unwrap();
    let serve = converge(&nodes, 3).await;
    assert_eq!(serve, ["rethinkdb", "test"]);
    for n in &nodes {
        assert_eq!(n.cluster().follow_failures(), 0);
    }
}
