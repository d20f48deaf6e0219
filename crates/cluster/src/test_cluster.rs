//! For the crate's tests: a server's `Cluster` on an in-memory engine with one table.

use std::sync::Arc;

use reql::{Durability, TableAccess, TableOptions};

use crate::Cluster;

/// Server `server`'s cluster with table `test.t` of `shards` shards.
pub(crate) fn with_table(server: &str, durability: Durability, shards: u32) -> Arc<Cluster> {
    let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
    let c = Cluster::open(engine, server).unwrap();
    let opts = TableOptions {
        primary_key: "id".into(),
        durability,
        shards,
        replicas: reql::Replicas::count(1),
    };
    c.table_create("test", "t", opts).unwrap();
    c
}
