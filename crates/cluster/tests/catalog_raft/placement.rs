//! Tables of a replicated catalog are placed on the connected servers (RethinkDB's
//! `table_generate_config`): `table_create` and `reconfigure` through any node record one
//! placement that every node's catalog and `table_config` show, and placements the
//! servers cannot hold get RethinkDB's errors.

use super::harness::*;

/// `table_config(db, name)`'s shards as `(primary, replicas)` by server name.
fn shards_of(c: &Cluster, name: &str) -> Vec<(String, Vec<String>)> {
    let cfg = c.table_config("d", name).unwrap();
    let text = |d: &datum::Datum| d.as_str().unwrap().to_string();
    cfg.get("shards")
        .and_then(|s| s.as_array())
        .unwrap()
        .iter()
        .map(|s| {
            let mut replicas: Vec<String> = s
                .get("replicas")
                .and_then(|r| r.as_array())
                .unwrap()
                .iter()
                .map(text)
                .collect();
            replicas.sort();
            (text(s.get("primary_replica").unwrap()), replicas)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_are_placed_on_the_connected_servers() {
    let nodes = three_nodes().await;
    introduce(&nodes);
    write_first_entries(&nodes).await;
    let c = nodes[1].cluster().clone();
    blocking(move || {
        c.db_create("d").unwrap();
        c.table_create("d", "all", opts(1, 3)).unwrap();
        c.table_create("d", "two", opts(2, 2)).unwrap();
    })
    .await;
    // Same records (so the same placement) everywhere: format, test, d, 2 tables, admin.
    converge(&nodes, 6).await;
    let names = ["s1", "s2", "s3"].map(String::from).to_vec();
    for n in &nodes {
        let all = shards_of(n.cluster(), "all");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1, names);
        assert!(names.contains(&all[0].0));
        let two = shards_of(n.cluster(), "two");
        assert_eq!(two.len(), 2);
        assert!(two.iter().all(|(p, r)| r.len() == 2 && r.contains(p)));
        // Two shards of two replicas on three servers: the primaries differ.
        assert_ne!(two[0].0, two[1].0);
        assert_eq!(two, shards_of(nodes[0].cluster(), "two"));
    }

    // More replicas than servers: RethinkDB's error, from any node, nothing created.
    let c = nodes[2].cluster().clone();
    let err = blocking(move || c.table_create("d", "four", opts(1, 4)).unwrap_err()).await;
    assert_eq!(
        err.message,
        "Can't put 4 replicas on servers with the tag `default` because there are only 3 \
         servers with the tag `default`. It's impossible to have more replicas of the data \
         than there are servers."
    );

    // Reconfigured through another node: the new placement everywhere.
    let c = nodes[0].cluster().clone();
    blocking(move || c.reconfigure("d", "all", 1, &reql::Replicas::count(2), false))
        .await
        .unwrap();
    converge(&nodes, 6).await;
    for n in &nodes {
        let all = shards_of(n.cluster(), "all");
        assert_eq!(all[0].1.len(), 2, "{all:?}");
        assert_eq!(all, shards_of(nodes[0].cluster(), "all"));
    }
}
