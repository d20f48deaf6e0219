//! Unit tests of `CatalogMachine` through `replication::StateMachineStore` (no Raft):
//! the entries' and replies' encoding, determinism (two replicas write the same bytes),
//! refusals, the effects hook, and the move to new spaces after a snapshot install.

use parking_lot::Mutex;
use proto::handshake::ScramCredentials;
use replication::openraft::storage::RaftStateMachine;
use replication::openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use replication::{Command, Durability, Entry, LogId, StateMachineStore};
use reql::error::{internal, op_failed};
use serde_json::json;
use storage::Memory;

use super::*;
use crate::auth::{Perms, Scope};
use crate::catalog::command::{CatalogCommand, IndexDefSpec, TableChanges, TableDef};
use crate::catalog::wire::{decode_command, encode_applied, encode_refusal};
use crate::catalog::{decode_reply, encode_command};
use crate::{Cluster, ClusterOptions};
use reql::TableAccess;

const PREFIX: &str = "raft.g0";

/// Records what the machine reports.
#[derive(Default)]
struct Seen {
    applied: Mutex<Vec<Vec<String>>>,
    reloaded: Mutex<u32>,
}

impl CatalogEffects for Seen {
    fn applied(&self, outcome: &Outcome) {
        self.applied.lock().push(outcome.table_ids());
    }

    fn reloaded(&self) {
        *self.reloaded.lock() += 1;
    }
}

fn open(engine: &Arc<dyn Engine>, seen: Arc<Seen>) -> StateMachineStore<CatalogMachine> {
    let machine = CatalogMachine::open(engine.clone(), PREFIX, seen).unwrap();
    StateMachineStore::open(engine.clone(), PREFIX, machine, Durability::Inline).unwrap()
}

fn entry(index: u64, command: Vec<u8>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Command(command)),
    }
}

async fn apply(
    sm: &mut StateMachineStore<CatalogMachine>,
    first: u64,
    commands: &[CatalogCommand],
) -> Vec<Result<Outcome, reql::ReqlError>> {
    let entries: Vec<Entry> = (first..)
        .zip(commands)
        .map(|(i, c)| entry(i, encode_command(c)))
        .collect();
    let replies = sm.apply(entries).await.unwrap();
    replies.iter().map(|r| decode_reply(&r.0)).collect()
}

fn table(id: &str, db_id: &str, name: &str) -> TableDef {
    TableDef::new(id, db_id, name)
}

/// Fixed SCRAM material (a proposer's choice).
fn creds() -> crate::catalog::Credentials {
    let c = ScramCredentials {
        salt: vec![7; 16],
        iterations: 4096,
        stored_key: [1; 32],
        server_key: [2; 32],
    };
    (&c).into()
}

/// A catalog's first entries and one of every kind after them.
fn commands() -> Vec<CatalogCommand> {
    use CatalogCommand as C;
    vec![
        C::CreateDb {
            id: "d0".into(),
            name: "test".into(),
        },
        C::PutUser {
            name: "admin".into(),
            credentials: creds(),
            has_password: false,
        },
        C::CreateDb {
            id: "d1".into(),
            name: "d".into(),
        },
        C::CreateTable {
            table: table("t1", "d1", "t"),
        },
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
                shards: Some(2),
                split_points: Some(vec![json!("m")]),
                ..Default::default()
            },
        },
        C::SetWriteHook {
            table: "t1".into(),
            function: Some(json!([69, [[2, [1, 2, 3]], [10, [3]]]])),
        },
        C::PutUser {
            name: "bob".into(),
            credentials: creds(),
            has_password: true,
        },
        C::SetPermissions {
            user: "bob".into(),
            scope: Scope::Table("t1".into()),
            perms: Perms {
                read: Some(true),
                ..Default::default()
            },
        },
        C::CreateTable {
            table: table("t2", "d1", "x"),
        },
        C::DropTable { id: "t2".into() },
    ]
}

#[test]
fn commands_and_replies_round_trip() {
    for cmd in commands() {
        let bytes = encode_command(&cmd);
        assert!(
            bytes.starts_with(br#"{"v":1,"command":{"op":"#),
            "{bytes:?}"
        );
        assert_eq!(decode_command(&bytes).unwrap(), cmd);
    }
    let bad = |b: &[u8]| decode_command(b).unwrap_err();
    assert!(bad(b"nope")
        .message
        .starts_with("Malformed catalog command: "));
    let e = bad(br#"{"v":2,"command":{"op":"create_db","id":"a","name":"b"}}"#);
    assert_eq!(
        e.message,
        "Catalog command of version 2 (this server reads version 1)."
    );
    assert!(bad(br#"{"v":1,"command":{"op":"drop_everything"}}"#)
        .message
        .starts_with("Malformed catalog command: "));

    // Refusals keep RethinkDB's error.
    for e in [op_failed("Database `d` already exists."), internal("x")] {
        let back = decode_reply(&encode_refusal(&e)).unwrap_err();
        assert_eq!((back.kind, back.message), (e.kind, e.message));
    }
    assert!(decode_reply(b"{}").is_err());
    assert!(decode_reply(br#"{"v":9,"applied":{}}"#).is_err());
}

#[test]
fn outcomes_round_trip_through_replies() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let catalog = Catalog::open(engine, "").unwrap();
    for cmd in commands().into_iter().skip(2) {
        let out = catalog.apply(cmd.clone()).unwrap();
        assert_eq!(decode_reply(&encode_applied(&out)).unwrap(), out, "{cmd:?}");
    }
}

/// The same entries on two fresh replicas write the same records, byte for byte, and
/// the same replies; the hook hears of every applied entry, in order.
#[tokio::test]
async fn two_replicas_write_identical_records() {
    let mut records = Vec::new();
    let mut replies = Vec::new();
    for _ in 0..2 {
        let engine: Arc<dyn Engine> = Arc::new(Memory::new());
        let seen = Arc::new(Seen::default());
        let mut sm = open(&engine, seen.clone());
        let r: Vec<_> = apply(&mut sm, 1, &commands()).await;
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        assert_eq!(seen.applied.lock().len(), commands().len());
        assert_eq!(seen.applied.lock()[3], vec!["t1".to_string()]);
        records.push(sm.machine().records().unwrap());
        replies.push(format!("{r:?}"));
        let (dbs, tables) = sm.machine().names();
        assert_eq!(
            (dbs, tables),
            (vec!["d".into(), "test".into()], vec!["d.u".into()])
        );
    }
    assert_eq!(records[0], records[1]);
    assert_eq!(replies[0], replies[1]);
    // The records are a single server's, plus the format record.
    let keys: Vec<String> = records[0]
        .iter()
        .map(|(k, key, _)| format!("{k}:{}", String::from_utf8_lossy(key)))
        .collect();
    // Byte for byte those a single server writes for the same commands (its own `test`
    // and `admin` have ids and salts of their own: the rest are compared).
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let single = Catalog::open(engine.clone(), "").unwrap();
    for cmd in commands().into_iter().skip(2) {
        single.apply(cmd).unwrap();
    }
    let mut compared = 0;
    for (kind, key, value) in &records[0] {
        if [&b"db/d0"[..], b"format", b"admin"].contains(&key.as_slice()) {
            continue;
        }
        let local = engine.get(kind, key).unwrap();
        assert_eq!(local.as_deref(), Some(value.as_slice()), "{kind}");
        compared += 1;
    }
    assert_eq!(compared, 3);
    assert_eq!(
        keys,
        [
            "catalog:db/d0",
            "catalog:db/d1",
            "catalog:format",
            "catalog:table/t1",
            "users:admin",
            "users:bob"
        ]
    );
}

/// A command that fails validation is refused with a single server's error and
/// writes nothing; so is one that does not decode. Neither reaches the hook.
#[tokio::test]
async fn refusals_are_a_single_servers_errors() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let seen = Arc::new(Seen::default());
    let mut sm = open(&engine, seen.clone());
    apply(&mut sm, 1, &commands()).await;
    let before = sm.machine().records().unwrap();
    let single = Catalog::open(Arc::new(Memory::new()), "").unwrap();
    let dup = CatalogCommand::CreateDb {
        id: "d9".into(),
        name: "test".into(),
    };
    let expected = single.apply(dup.clone()).unwrap_err();
    let r = apply(&mut sm, 20, &[dup]).await.remove(0).unwrap_err();
    assert_eq!((r.kind, r.message), (expected.kind, expected.message));

    let long = CatalogCommand::CreateDb {
        id: "i".repeat(70_000),
        name: "long".into(),
    };
    let r = apply(&mut sm, 21, &[long]).await.remove(0).unwrap_err();
    assert!(
        r.message.starts_with("Could not write the catalog: "),
        "{r:?}"
    );

    let replies = sm
        .apply(vec![entry(22, b"garbage".to_vec())])
        .await
        .unwrap();
    let r = decode_reply(&replies[0].0).unwrap_err();
    assert!(r.message.starts_with("Malformed catalog command"), "{r:?}");

    assert_eq!(sm.machine().records().unwrap(), before);
    assert_eq!(seen.applied.lock().len(), commands().len());
    let (applied, _) = sm.applied_state().await.unwrap();
    assert_eq!(applied.map(|l| l.index), Some(22));
}

/// The catalog under a replicated machine takes no local command.
#[tokio::test]
async fn a_replicated_catalog_refuses_local_commands() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let sm = open(&engine, Arc::new(Seen::default()));
    let e = sm
        .machine()
        .catalog
        .apply(commands().remove(0))
        .unwrap_err();
    assert!(e.message.contains("replicated"), "{}", e.message);
    assert!(sm.machine().records().unwrap().is_empty());
    drop(sm);
    // Nor does a Cluster on it, which creates no storage for a refused table.
    let opts = ClusterOptions::new("s");
    let (c, machine) = Cluster::open_replicated(engine.clone(), opts, PREFIX).unwrap();
    let mut sm = StateMachineStore::open(engine.clone(), PREFIX, machine, Durability::Inline);
    let sm = sm.as_mut().unwrap();
    apply(sm, 1, &commands()[..1]).await;
    let spaces = engine.space_names().unwrap();
    let e = c.db_create("d").unwrap_err();
    assert!(e.message.contains("replicated"), "{}", e.message);
    let opts = reql::TableOptions {
        primary_key: "id".into(),
        durability: reql::Durability::Soft,
        shards: 1,
        replicas: reql::Replicas::count(1),
    };
    let e = c.table_create("test", "t", opts).unwrap_err();
    assert!(e.message.contains("replicated"), "{}", e.message);
    assert_eq!(engine.space_names().unwrap(), spaces);
    c.shutdown();
}

/// A snapshot of one replica installed on another moves its catalog to the new spaces,
/// reads it from them, and tells the hook; reopened, it is where the install left it.
#[tokio::test]
async fn a_snapshot_install_moves_and_reloads_the_catalog() {
    let (e1, e2): (Arc<dyn Engine>, Arc<dyn Engine>) =
        (Arc::new(Memory::new()), Arc::new(Memory::new()));
    let mut a = open(&e1, Arc::new(Seen::default()));
    apply(&mut a, 1, &commands()).await;
    let seen = Arc::new(Seen::default());
    let mut b = open(&e2, seen.clone());
    apply(&mut b, 1, &commands()[..3]).await;
    let before = b.spaces().to_vec();

    let snap = a
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    b.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
    assert_ne!(b.spaces(), before.as_slice());
    assert_eq!(*seen.reloaded.lock(), 1);
    assert_eq!(
        b.machine().records().unwrap(),
        a.machine().records().unwrap()
    );
    assert_eq!(b.machine().names(), a.machine().names());
    // It goes on from there like the other.
    let more = [CatalogCommand::DropDb { id: "d1".into() }];
    apply(&mut a, 12, &more).await;
    apply(&mut b, 12, &more).await;
    assert_eq!(
        b.machine().records().unwrap(),
        a.machine().records().unwrap()
    );
    drop(b);
    let b = open(&e2, Arc::new(Seen::default()));
    assert_eq!(
        b.machine().records().unwrap(),
        a.machine().records().unwrap()
    );
}
