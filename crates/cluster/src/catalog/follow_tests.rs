//! Unit tests of a `Cluster` following its replicated catalog (entries applied through
//! `replication::StateMachineStore`, no Raft): tables opened, renamed, re-cut and
//! retired, indexes registered, built, renamed and unregistered, write hooks copied;
//! and the reconciliation after a snapshot install.

use std::ops::Bound;

use datum::Datum;
use proto::handshake::{OsRandom, ScramCredentials};
use replication::openraft::storage::RaftStateMachine;
use replication::openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use replication::{Command, Durability, Entry, LogId, StateMachineStore};
use reql::{Change, TableAccess};
use serde_json::json;
use storage::Memory;

use super::*;
use crate::catalog::{
    decode_reply, encode_command, CatalogCommand, IndexDefSpec, TableChanges, TableDef,
};

const PREFIX: &str = "raft.g0";

struct Node {
    engine: Arc<dyn Engine>,
    cluster: Arc<Cluster>,
    sm: StateMachineStore<CatalogMachine>,
    next: u64,
}

fn node() -> Node {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let opts = ClusterOptions::new("s1");
    let (cluster, machine) = Cluster::open_replicated(engine.clone(), opts, PREFIX).unwrap();
    let sm = StateMachineStore::open(engine.clone(), PREFIX, machine, Durability::Inline).unwrap();
    Node {
        engine,
        cluster,
        sm,
        next: 1,
    }
}

impl Node {
    async fn apply(&mut self, cmds: &[CatalogCommand]) {
        let entries: Vec<Entry> = cmds
            .iter()
            .map(|c| {
                self.next += 1;
                Entry {
                    log_id: LogId::new(CommittedLeaderId::new(1, 1), self.next - 1),
                    payload: EntryPayload::Normal(Command(encode_command(c))),
                }
            })
            .collect();
        for (r, c) in self.sm.apply(entries).await.unwrap().iter().zip(cmds) {
            assert!(decode_reply(&r.0).is_ok(), "{c:?}");
        }
    }
}

fn first() -> Vec<CatalogCommand> {
    vec![
        CatalogCommand::CreateDb {
            id: "d0".into(),
            name: "test".into(),
        },
        CatalogCommand::PutUser {
            name: "admin".into(),
            credentials: (&ScramCredentials::generate("", &mut OsRandom)).into(),
            has_password: false,
        },
    ]
}

fn create_table(id: &str, name: &str) -> CatalogCommand {
    CatalogCommand::CreateTable {
        table: TableDef {
            durability: "soft".into(),
            ..TableDef::new(id, "d0", name)
        },
    }
}

fn create_index(name: &str, id: &str) -> CatalogCommand {
    CatalogCommand::CreateIndex {
        table: "t1".into(),
        index: id.into(),
        name: name.into(),
        spec: IndexDefSpec {
            function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
            multi: false,
            geo: false,
        },
    }
}

fn wait_ready(t: &Arc<dyn reql::Table>) {
    for _ in 0..500 {
        if t.index_status().unwrap().iter().all(|s| s.ready) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("an index was never ready");
}

fn index_names(t: &Arc<dyn reql::Table>) -> Vec<String> {
    t.index_status()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

#[tokio::test]
async fn a_cluster_performs_each_entrys_side_effects() {
    let mut n = node();
    n.apply(&first()).await;
    n.apply(&[create_table("t1", "t")]).await;
    let c = n.cluster.clone();
    let t = c.table("test", "t").unwrap();
    for i in 0..10 {
        let d = Datum::from_pairs([
            ("id", Datum::from(i as f64)),
            ("v", Datum::from((i % 3) as f64)),
        ]);
        reql::write_op::overwrite(t.as_ref(), &Datum::from(i as f64), Change::Put(d)).unwrap();
    }
    // An index defined by an entry is registered and built here.
    n.apply(&[create_index("v", "i1")]).await;
    wait_ready(&t);
    let one = Bound::Included(Datum::from(1.0));
    let hits = t.index_scan("v", one.clone(), one, false).unwrap().count();
    assert_eq!(hits, 3);

    // Renamed table and index, a hook, a re-cut: the handle follows.
    let hook = json!([69, [[2, [1, 2, 3]], [10, [3]]]]);
    n.apply(&[
        CatalogCommand::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("u".into()),
                shards: Some(2),
                split_points: Some(vec![json!(5)]),
                ..Default::default()
            },
        },
        CatalogCommand::RenameIndex {
            table: "t1".into(),
            old: "v".into(),
            new: "w".into(),
            overwrite: false,
        },
        CatalogCommand::SetWriteHook {
            table: "t1".into(),
            function: Some(hook.clone()),
        },
        create_index("x", "i2"),
    ])
    .await;
    assert!(c.table("test", "t").is_err());
    let u = c.table("test", "u").unwrap();
    wait_ready(&u);
    assert_eq!(index_names(&u), ["w", "x"]);
    let h = c.handle_by_id("t1").unwrap();
    assert_eq!(h.shards.current().shards.len(), 2);
    assert_eq!(u.write_hook().unwrap().map(|w| w.function), Some(hook));
    assert_eq!(u.count().unwrap(), 10);

    // An index dropped, then the table: unregistered, retired, storage gone.
    n.apply(&[CatalogCommand::DropIndex {
        table: "t1".into(),
        name: "x".into(),
    }])
    .await;
    assert_eq!(index_names(&u), ["w"]);
    assert!(!n.engine.space_names().unwrap().contains(&"i_t1_i2".into()));
    n.apply(&[CatalogCommand::DropTable { id: "t1".into() }])
        .await;
    assert!(c.table("test", "u").is_err());
    assert!(!n.engine.space_names().unwrap().contains(&"t_t1".into()));
    assert_eq!(c.follow_failures(), 0);
    c.shutdown();
}

/// A snapshot installed on a node that missed entries: tables it lacks are opened,
/// tables gone from the catalog retired, renamed ones renamed.
#[tokio::test]
async fn a_snapshot_install_reconciles_the_tables() {
    let (mut a, mut b) = (node(), node());
    let base = [
        first(),
        vec![create_table("t1", "t"), create_table("t2", "old")],
    ]
    .concat();
    a.apply(&base).await;
    b.apply(&base).await;
    a.apply(&[
        CatalogCommand::DropTable { id: "t2".into() },
        create_table("t3", "new"),
        CatalogCommand::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("renamed".into()),
                ..Default::default()
            },
        },
        create_index("v", "i1"),
    ])
    .await;
    let snap = a.sm.get_snapshot_builder().await.build_snapshot().await;
    let snap = snap.unwrap();
    b.sm.install_snapshot(&snap.meta, snap.snapshot)
        .await
        .unwrap();
    let c = &b.cluster;
    let mut names = c.table_list("test").unwrap();
    names.sort();
    assert_eq!(names, ["new", "renamed"]);
    assert!(c.table("test", "old").is_err() && c.handle_by_id("t2").is_none());
    assert!(!b.engine.space_names().unwrap().contains(&"t_t2".into()));
    let r = c.table("test", "renamed").unwrap();
    wait_ready(&r);
    assert_eq!(index_names(&r), ["v"]);
    assert!(c.table("test", "new").is_ok());
    assert_eq!(c.follow_failures(), 0);
    a.cluster.shutdown();
    c.shutdown();
}
