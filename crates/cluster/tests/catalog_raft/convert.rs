//! A single server's catalog becomes a replicated one (`Cluster::replicate_catalog`):
//! its records seed the group, it bootstraps alone and seals the seed, and two servers
//! that join receive its databases and users by snapshot and change the catalog through
//! it. A server with tables: `founder.rs`.

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_servers_catalog_seeds_the_group_that_others_join() {
    // A single server as it runs today: its own catalog, a database and a user.
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let single = Cluster::open(engine.clone(), "s1").unwrap();
    single.db_create("d").unwrap();
    let bob = datum::from_json_value(&json!({"id": "bob", "password": "pw"})).unwrap();
    single.users().write_row("bob", Some(&bob)).unwrap();

    let machine = single.replicate_catalog(PREFIX).unwrap();
    // Once is enough.
    assert!(single.replicate_catalog(PREFIX).is_err());
    let testkit::Port { router, addr } = testkit::listen(peers()).await;
    let transport = testkit::transport(peers());
    let host = Host::new(
        1,
        engine.clone(),
        router.clone(),
        transport.clone(),
        testkit::config(Some(10)),
        Durability::Inline,
    );
    let member = host.open(GROUP, PREFIX, machine).await.unwrap();
    let alone = BTreeMap::from([(1, Node::new(addr.clone()))]);
    assert!(host.bootstrap(GROUP, alone).await.unwrap());
    host.seal_seed(GROUP, Duration::from_secs(10))
        .await
        .unwrap();
    let client = ClientPolicy::for_config(&testkit::config(None), Duration::from_secs(5));
    let route = catalog_route(
        GROUP,
        member.raft.clone(),
        transport,
        RoutePolicy::default(),
        client,
    );
    route.register(&router);
    let runtime = tokio::runtime::Handle::current();
    assert!(single.set_catalog_proposer(Arc::new(RaftProposer::new(Arc::new(route), runtime))));
    // Its catalog now changes through the group.
    let c = single.clone();
    blocking(move || c.db_create("e").unwrap()).await;

    let mut nodes = vec![TestNode {
        engine,
        router,
        addr,
        raft: Some(member.raft.clone()),
        cluster: Some(single),
    }];
    for id in 2..=3 {
        nodes.push(start_node(id).await);
    }
    let wanted: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    grow(&member.raft, &wanted, 5).await.unwrap();
    // format, test, d, e; admin, bob — on every server, byte for byte.
    let serve = converge(&nodes, 6).await;
    assert_eq!(serve, ["d", "e", "rethinkdb", "test"]);
    for n in &nodes[1..] {
        assert!(n.cluster().users().exists("bob"));
    }
    let c = nodes[2].cluster().clone();
    blocking(move || c.db_create("f").unwrap()).await;
    converge(&nodes, 7).await;
}
