//! A single server that has tables becomes the founder of a replicated catalog
//! (`Cluster::replicate_catalog`, docs/clustering.md "Converting a founder that has
//! tables"): its tables are placed on it alone, their documents move into their shards'
//! groups, their indexes are rebuilt there, their changefeeds go on, their local spaces
//! are dropped, and servers that join read them. Cut short before it is recorded, the
//! conversion leaves the single server as it was; recorded, it resumes at the restart.

use super::harness::*;
use super::tables::{host_tables_of, put};
use datum::Datum;
use reql::Applied;

/// Documents per table.
const DOCS: u32 = 300;
const SERVER: &str = "00000000-0000-4000-8000-0000000000f1";

/// Distinct ids spread over the whole key space (both shards of a 2-shard table).
fn key(i: u32) -> String {
    format!("{:04x}", i * 211 % 65536)
}

fn options() -> ClusterOptions {
    ClusterOptions {
        server_id: Some(SERVER.into()),
        ..ClusterOptions::new("s1")
    }
}

/// A single server with `test.a` (2 shards) and `test.b` (index `v`), `DOCS` documents
/// each.
fn single_with_tables(engine: Arc<dyn Engine>) -> Arc<Cluster> {
    let c = Cluster::open_with_options(engine, options()).unwrap();
    c.table_create("test", "a", opts(2, 1)).unwrap();
    c.table_create("test", "b", opts(1, 1)).unwrap();
    c.table("test", "b")
        .unwrap()
        .index_create("v", v_index())
        .unwrap();
    for t in ["a", "b"] {
        let h = c.table("test", t).unwrap();
        for i in 0..DOCS {
            let r = h.apply(put(&key(i), &format!("v{}", i % 4))).unwrap();
            assert!(matches!(r, Applied::Done(..)), "{r:?}");
        }
    }
    c
}

/// The catalog group's side of the conversion, as the server does it: the group opened
/// on the machine, bootstrapped alone, sealed, its proposer set. The host and member.
async fn found(
    c: &Arc<Cluster>,
    engine: &Arc<dyn Engine>,
    port: &testkit::Port,
) -> (Host<TcpTransport>, Raft) {
    let machine = c.replicate_catalog(PREFIX).unwrap();
    let host = catalog_host(engine, port);
    let member = host.open(GROUP, PREFIX, machine).await.unwrap();
    let alone = BTreeMap::from([(1, Node::new(port.addr.clone()))]);
    assert!(host.bootstrap(GROUP, alone).await.unwrap());
    host.seal_seed(GROUP, Duration::from_secs(10))
        .await
        .unwrap();
    propose_through(c, &member.raft, port);
    (host, member.raft)
}

fn catalog_host(engine: &Arc<dyn Engine>, port: &testkit::Port) -> Host<TcpTransport> {
    Host::new(
        1,
        engine.clone(),
        port.router.clone(),
        testkit::transport(peers()),
        testkit::config(Some(10)),
        Durability::Inline,
    )
}

fn propose_through(c: &Arc<Cluster>, raft: &Raft, port: &testkit::Port) {
    let client = ClientPolicy::for_config(&testkit::config(None), Duration::from_secs(5));
    let route = catalog_route(
        GROUP,
        raft.clone(),
        testkit::transport(peers()),
        RoutePolicy::default(),
        client,
    );
    route.register(&port.router);
    let runtime = tokio::runtime::Handle::current();
    assert!(c.set_catalog_proposer(Arc::new(RaftProposer::new(Arc::new(route), runtime))));
}

/// How many documents `test.<table>` has through `c`, once its groups answer.
async fn count_of(c: &Arc<Cluster>, table: &'static str) -> u64 {
    for _ in 0..200 {
        let c = c.clone();
        let n = blocking(move || c.table("test", table).and_then(|t| t.count())).await;
        if let Ok(n) = n {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("test.{table} never answered a count");
}

/// Writes `id` into `test.<table>` through `c`, retried while its groups start.
async fn write(c: &Arc<Cluster>, table: &'static str, id: &'static str) {
    for _ in 0..200 {
        let c = c.clone();
        let r =
            blocking(move || c.table("test", table).and_then(|t| t.apply(put(id, "new")))).await;
        if matches!(r, Ok(Applied::Done(..))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no write reached test.{table}");
}

/// The ids of index `v`'s documents of value `value` in `test.b`, once it is ready.
async fn by_index(c: &Arc<Cluster>, value: &'static str) -> usize {
    for _ in 0..400 {
        let c = c.clone();
        let got = blocking(move || -> reql::Result<Option<usize>> {
            let t = c.table("test", "b")?;
            if !t.index_status()?.iter().all(|s| s.ready) {
                return Ok(None);
            }
            let b = Bound::Included(Datum::from(value));
            Ok(Some(t.index_scan("v", b.clone(), b, false)?.count()))
        })
        .await;
        if let Ok(Some(n)) = got {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("index v of test.b never ready");
}

/// The local single-server spaces (documents `t_<id>`, index entries `i_<id>_<index>`).
fn local_spaces(engine: &Arc<dyn Engine>) -> Vec<String> {
    let names = engine.space_names().unwrap();
    let local = |s: &&String| s.starts_with("t_") || s.starts_with("i_");
    names.iter().filter(local).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_servers_tables_move_into_their_groups_and_others_read_them() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let single = single_with_tables(engine.clone());
    assert!(!local_spaces(&engine).is_empty());
    let feed_on = single.clone();
    let mut feed = blocking(move || {
        let req = changefeed::Request::whole_table(changefeed::Options::default());
        feed_on.table("test", "a").unwrap().subscribe(req).unwrap()
    })
    .await;
    let port = testkit::listen(peers()).await;
    let (_catalog_host, raft) = found(&single, &engine, &port).await;
    let mut nodes = vec![TestNode {
        engine: engine.clone(),
        router: port.router.clone(),
        addr: port.addr.clone(),
        raft: Some(raft.clone()),
        cluster: Some(single.clone()),
    }];
    let _hosts = host_tables_of(&nodes, &[0]);

    // Every document, read from the groups; the index rebuilt; writes go on, and the
    // feed opened before the conversion sees them.
    assert_eq!(count_of(&single, "a").await, DOCS as u64);
    assert_eq!(count_of(&single, "b").await, DOCS as u64);
    assert_eq!(by_index(&single, "v1").await, DOCS as usize / 4);
    write(&single, "a", "zz-after").await;
    let mut seen = None;
    for _ in 0..200 {
        if let Some(change) = feed.next_doc() {
            seen = Some(change.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let new_id = seen
        .as_ref()
        .and_then(|c| c.get("new_val")?.get("id").cloned());
    assert_eq!(new_id, Some(Datum::from("zz-after")));
    let placed = single.placements();
    assert_eq!(placed.len(), 2);
    assert!(placed
        .iter()
        .flat_map(|(_, _, p)| p)
        .all(|s| s.voting == [SERVER.to_string()] && s.primary == SERVER));
    // Its data is in its groups only.
    assert_eq!(local_spaces(&engine), Vec::<String>::new());

    // Two servers join: they receive the catalog and read every table through the
    // founder's groups.
    for id in 2..=3 {
        nodes.push(start_node(id).await);
    }
    let wanted: BTreeMap<NodeId, Node> = (1..=3u64)
        .map(|id| (id, Node::new(nodes[id as usize - 1].addr.clone())))
        .collect();
    grow(&raft, &wanted, 5).await.unwrap();
    let n = records(&nodes[0]).len();
    converge(&nodes, n).await;
    introduce(&nodes);
    let _more = host_tables_of(&nodes, &[1, 2]);
    for (node, id) in nodes[1..].iter().zip(["zz-two", "zz-three"]) {
        assert_eq!(count_of(node.cluster(), "a").await, DOCS as u64 + 1);
        assert_eq!(by_index(node.cluster(), "v2").await, DOCS as usize / 4);
        write(node.cluster(), "b", id).await;
    }
    assert_eq!(count_of(&single, "b").await, DOCS as u64 + 2);
    for node in &nodes {
        assert_eq!(node.cluster().follow_failures(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_cut_short_before_it_is_recorded_leaves_the_single_server() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let single = single_with_tables(engine.clone());
    // Seeded, never bootstrapped nor recorded: the server stops there.
    let _machine = single.replicate_catalog(PREFIX).unwrap();
    // Its local tables refuse writes meanwhile (they would not reach the groups).
    let s = single.clone();
    let refused = blocking(move || s.table("test", "a").unwrap().apply(put("late", "x"))).await;
    assert!(refused.is_err(), "{refused:?}");
    single.shutdown();
    drop(single);

    // Restarted as the single server it still is: every table as it was.
    let again = Cluster::open_with_options(engine.clone(), options()).unwrap();
    assert!(!again.is_replicated());
    assert_eq!(count_of(&again, "a").await, DOCS as u64);
    assert_eq!(by_index(&again, "v3").await, DOCS as usize / 4);
    write(&again, "a", "zz-before").await;
    // The next conversion starts over (the half-made groups dropped first) and keeps
    // that write too.
    drop_group_storage(&*engine, PREFIX).unwrap();
    let port = testkit::listen(peers()).await;
    let (_catalog_host, raft) = found(&again, &engine, &port).await;
    let nodes = vec![TestNode {
        engine: engine.clone(),
        router: port.router.clone(),
        addr: port.addr.clone(),
        raft: Some(raft),
        cluster: Some(again.clone()),
    }];
    let _hosts = host_tables_of(&nodes, &[0]);
    assert_eq!(count_of(&again, "a").await, DOCS as u64 + 1);
    assert_eq!(by_index(&again, "v3").await, DOCS as usize / 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_conversion_resumes_at_the_restart() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let single = single_with_tables(engine.clone());
    let port = testkit::listen(peers()).await;
    // The catalog group holds the placed tables (the commit point): the server stops
    // before its tables opened on their groups (their local copies still there).
    let (stopped, _raft) = found(&single, &engine, &port).await;
    stopped.shutdown().await;
    single.shutdown();
    drop(single);
    assert!(!local_spaces(&engine).is_empty());

    // Restarted replicated: the tables' groups start from the seeded documents and the
    // local copies go.
    let (c, machine) = Cluster::open_replicated(engine.clone(), options(), PREFIX).unwrap();
    let host = catalog_host(&engine, &port);
    let member = host.open(GROUP, PREFIX, machine).await.unwrap();
    propose_through(&c, &member.raft, &port);
    let nodes = vec![TestNode {
        engine: engine.clone(),
        router: port.router.clone(),
        addr: port.addr.clone(),
        raft: Some(member.raft.clone()),
        cluster: Some(c.clone()),
    }];
    let _hosts = host_tables_of(&nodes, &[0]);
    assert_eq!(count_of(&c, "a").await, DOCS as u64);
    assert_eq!(count_of(&c, "b").await, DOCS as u64);
    assert_eq!(by_index(&c, "v0").await, DOCS as usize / 4);
    write(&c, "a", "zz-restarted").await;
    assert_eq!(count_of(&c, "a").await, DOCS as u64 + 1);
    assert_eq!(local_spaces(&engine), Vec::<String>::new());
}
