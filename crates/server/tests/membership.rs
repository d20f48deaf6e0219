//! Three servers in one process joined through their cluster ports (`Server::start_full`
//! with a `ClusterSetup`): the third learns of the second through the first, every
//! server lists all three, a server's new name reaches the others, and a stopped server
//! is marked disconnected within the heartbeat timeout (renames through another server's
//! `server_config`: tests/test_cluster_join.py).

use std::path::Path;
use std::time::{Duration, Instant};

use server::{ClusterSetup, Config, Server};
use tokio::net::TcpListener;

async fn start(dir: &Path, name: &str, joins: Vec<String>) -> (Server, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cluster = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = cluster.local_addr().unwrap().to_string();
    let mut config = Config::new(dir);
    config.server_name = name.into();
    config.eval_threads = 1;
    config.cache_size_mb = 16;
    config.log_file = Some(dir.join("log"));
    config.cluster = Some(ClusterSetup {
        joins,
        tags: vec!["default".into()],
        ..ClusterSetup::default()
    });
    let server = Server::start_full(listener, None, Some(cluster), config)
        .await
        .unwrap();
    (server, addr)
}

fn names(s: &Server) -> Vec<String> {
    let mut n: Vec<String> = s
        .cluster()
        .server_records()
        .into_iter()
        .map(|r| r.name)
        .collect();
    n.sort();
    n
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_join_learn_each_other_rename_and_notice_a_loss() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (a, a_addr) = start(dirs[0].path(), "a", vec![]).await;
    let (b, _) = start(dirs[1].path(), "b", vec![a_addr.clone()]).await;
    let (c, _) = start(dirs[2].path(), "c", vec![a_addr]).await;
    let all = vec!["a".to_string(), "b".into(), "c".into()];
    for s in [&a, &b, &c] {
        until("all three", || names(s) == all).await;
    }
    // One cluster id: A created it, B and C (fresh directories) adopted it.
    let ids: Vec<_> = [&a, &b, &c]
        .iter()
        .map(|s| s.membership().and_then(|m| m.cluster_id()))
        .collect();
    assert!(
        ids[0].is_some() && ids.iter().all(|i| *i == ids[0]),
        "{ids:?}"
    );
    assert!(a.membership().is_some_and(|m| m.transport().is_some()));
    // B never named C: it learned C's address from A.
    let b_view = b.cluster().local_record().connected_to;
    assert_eq!(b_view.get("c"), Some(&true), "{b_view:?}");

    // A server's new name reaches the others with its next pings.
    c.cluster()
        .set_server_identity("c2", &["default".to_string()]);
    until("the new name on A", || {
        names(&a).contains(&"c2".to_string())
    })
    .await;

    // Heartbeat 2 s; stopping C is noticed by A and B within it (plus a round).
    a.cluster().set_heartbeat_secs(2.0);
    b.cluster().set_heartbeat_secs(2.0);
    c.shutdown().await.unwrap();
    let stopped = Instant::now();
    for s in [&a, &b] {
        until("C disconnected", || {
            names(s) == vec!["a".to_string(), "b".into()]
        })
        .await;
    }
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(
        a.cluster().local_record().connected_to.get("c2"),
        Some(&false)
    );
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
