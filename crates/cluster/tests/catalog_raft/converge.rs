//! Entries proposed to the leader converge; a stopped node catches up by snapshot.

use super::harness::*;
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_catalog_converges_and_a_stopped_node_catches_up_by_snapshot() {
    use CatalogCommand as C;
    let mut nodes = three_nodes().await;

    let first = first_entries();
    let commands = [
        C::CreateDb {
            id: "d1".into(),
            name: "d".into(),
        },
        table("t1", "d1", "t"),
        table("t2", "d1", "gone"),
        C::CreateIndex {
            table: "t1".into(),
            index: "i1".into(),
            name: "v".into(),
            spec: IndexDefSpec {
                function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
                multi: false,
                geo: false,
            },
        },
        C::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("u".into()),
                ..Default::default()
            },
        },
        C::RenameIndex {
            table: "t1".into(),
            old: "v".into(),
            new: "w".into(),
            overwrite: false,
        },
        C::DropTable { id: "t2".into() },
        C::PutUser {
            name: "bob".into(),
            credentials: creds("pw"),
            has_password: true,
        },
        C::SetPermissions {
            user: "bob".into(),
            scope: cluster::auth::Scope::Table("t1".into()),
            perms: cluster::auth::Perms {
                read: Some(true),
                ..Default::default()
            },
        },
    ];
    for cmd in first.iter().chain(&commands) {
        let r = propose(&nodes, cmd).await;
        assert!(r.is_ok(), "{cmd:?}: {r:?}");
    }
    // A duplicate name: the error a single server gives, and nothing changes.
    let single = Cluster::open(Arc::new(Memory::new()), "single").unwrap();
    single.db_create("d").unwrap();
    let expected = single.db_create("d").unwrap_err();
    let dup = C::CreateDb {
        id: "d2".into(),
        name: "d".into(),
    };
    let err = propose(&nodes, &dup).await.unwrap_err();
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    single.table_create("d", "u", opts(1, 1)).unwrap();
    let expected = single.table_create("d", "u", opts(1, 1)).unwrap_err();
    let err = propose(&nodes, &table("t9", "d1", "u")).await.unwrap_err();
    assert_eq!((err.kind, err.message), (expected.kind, expected.message));
    single.shutdown();

    // db d and test, table u, the format record; users admin and bob.
    let serve = converge(&nodes, 6).await;
    assert_eq!(serve, ["d.u[\"w\"]", "d", "rethinkdb", "test"]);
    for n in &nodes {
        let c = n.cluster();
        assert!(c.table("d", "gone").is_err());
        assert_eq!(c.follow_failures(), 0);
    }

    // Stop a follower (its Cluster too, as a process would); the others go on past a
    // snapshot that purges their logs.
    let leader_id = leader(&nodes).await.current_leader().await.unwrap();
    let stopped = (1..=3u64).find(|&id| id != leader_id).unwrap();
    let n = &mut nodes[stopped as usize - 1];
    n.router.remove_group(GROUP);
    n.raft.take().unwrap().shutdown().await.unwrap();
    n.cluster.take().unwrap().shutdown();
    let spaces_before = state_spaces(&*n.engine, PREFIX, &space_kinds()).unwrap();
    for i in 0..15 {
        let r = propose(&nodes, &table(&format!("x{i}"), "d1", &format!("x{i}"))).await;
        assert!(r.is_ok(), "{r:?}");
    }
    for i in 0..10 {
        assert!(propose(
            &nodes,
            &C::DropTable {
                id: format!("x{i}")
            }
        )
        .await
        .is_ok());
    }
    let more = [
        C::RenameDb {
            id: "d1".into(),
            name: "e".into(),
        },
        C::DeleteUser { name: "bob".into() },
        C::SetWriteHook {
            table: "t1".into(),
            function: Some(json!([69, [[2, [1, 2, 3]], [10, [3]]]])),
        },
    ];
    for cmd in &more {
        assert!(propose(&nodes, cmd).await.is_ok(), "{cmd:?}");
    }
    let raft = leader(&nodes).await;
    let wait = raft.wait(Some(Duration::from_secs(10)));
    let purged = |m: &RaftMetrics| m.purged.is_some_and(|p| p.index > 20);
    wait.metrics(purged, "the log purged").await.unwrap();

    // Restarted on its engine (its log ends before the purge): sent the snapshot. Its
    // Cluster opened the stale catalog; the install moves it and reconciles its tables.
    start_group(stopped, &mut nodes[stopped as usize - 1]).await;
    let serve = converge(&nodes, 10).await;
    let mut expected: Vec<String> = (10..15).map(|i| format!("e.x{i}[]")).collect();
    expected.insert(0, "e.u[\"w\"]".into());
    expected.extend(["e", "rethinkdb", "test"].map(String::from));
    let mut serve_sorted = serve.clone();
    serve_sorted.sort();
    expected.sort();
    assert_eq!(serve_sorted, expected);
    let n = &nodes[stopped as usize - 1];
    let spaces_after = state_spaces(&*n.engine, PREFIX, &space_kinds()).unwrap();
    assert_ne!(spaces_after, spaces_before, "not caught up by a snapshot");
    let restarted = n.cluster();
    assert_eq!(restarted.follow_failures(), 0);
    assert!(restarted.table("d", "u").is_err());
    for n in &nodes {
        let hook = n.cluster().table("e", "u").unwrap().write_hook().unwrap();
        assert!(hook.is_some(), "the write hook is not followed");
    }

    for n in &nodes {
        n.raft.as_ref().unwrap().shutdown().await.unwrap();
        n.cluster().shutdown();
    }
}
