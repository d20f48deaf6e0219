//! Unit tests of `Catalog`: each command applied, persisted and reloaded; refusals
//! and unwritten commands change nothing; commands round-trip through JSON; records of
//! earlier builds move to their id keys.

use super::*;
use crate::auth::Scope;
use crate::catalog::command::{TableChanges, TableDef};
use proto::handshake::{OsRandom, ScramCredentials};
use serde_json::json;

type Records = Vec<(&'static str, Vec<u8>, Vec<u8>)>;

/// Every record of the `catalog` and `users` spaces.
fn dump(e: &Arc<dyn Engine>) -> Records {
    let snap = e.snapshot();
    let mut out = Vec::new();
    for space in [CATALOG, USERS] {
        for kv in snap
            .range(space, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
        {
            let (k, v) = kv.unwrap();
            out.push((space, k, v.to_vec()));
        }
    }
    out
}

fn open() -> (Arc<dyn Engine>, Catalog) {
    let e: Arc<dyn Engine> = Arc::new(storage::Memory::new());
    let c = Catalog::open(e.clone(), "").unwrap();
    (e, c)
}

fn table(id: &str, db_id: &str, name: &str) -> TableDef {
    TableDef::new(id, db_id, name)
}

fn spec() -> IndexDefSpec {
    IndexDefSpec {
        function: json!([69, [[2, [1]], [31, [[10, [1]], "v"]]]]),
        multi: false,
        geo: false,
    }
}

/// One command of each kind, valid when applied in this order.
fn commands() -> Vec<CatalogCommand> {
    use CatalogCommand as C;
    let creds = (&ScramCredentials::generate("pw", &mut OsRandom)).into();
    vec![
        C::CreateDb {
            id: "d1".into(),
            name: "d".into(),
        },
        C::RenameDb {
            id: "d1".into(),
            name: "e".into(),
        },
        C::CreateTable {
            table: table("t1", "d1", "t"),
        },
        C::AlterTable {
            id: "t1".into(),
            changes: TableChanges {
                name: Some("u".into()),
                durability: Some("soft".into()),
                write_acks: Some("single".into()),
                shards: Some(2),
                split_points: Some(vec![json!("80")]),
                ..Default::default()
            },
        },
        C::CreateIndex {
            table: "t1".into(),
            index: "i1".into(),
            name: "v".into(),
            spec: spec(),
        },
        C::RenameIndex {
            table: "t1".into(),
            old: "v".into(),
            new: "w".into(),
            overwrite: false,
        },
        C::IndexReady {
            table: "t1".into(),
            index: "i1".into(),
        },
        C::SetWriteHook {
            table: "t1".into(),
            function: Some(json!([69, [[2, [1, 2, 3]], [10, [3]]]])),
        },
        C::PutUser {
            name: "bob".into(),
            credentials: creds,
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
        C::DropIndex {
            table: "t1".into(),
            name: "w".into(),
        },
        C::DeleteUser { name: "bob".into() },
        C::DropTable { id: "t1".into() },
        C::DropDb { id: "d1".into() },
    ]
}

#[test]
fn each_command_applies_persists_and_reloads() {
    let (e, c) = open();
    let table_of = |c: &Catalog| c.read_state().tables.values().next().cloned();
    for cmd in commands() {
        let out = c
            .apply(cmd.clone())
            .unwrap_or_else(|err| panic!("{cmd:?}: {err:?}"));
        // What is on disk reads back as the state in memory.
        let again = Catalog::open(e.clone(), "").unwrap();
        assert_eq!(*again.read_state(), *c.read_state(), "after {cmd:?}");
        let st = c.read_state();
        match cmd {
            CatalogCommand::CreateDb { .. } => assert!(st.dbs.contains_key("d")),
            CatalogCommand::RenameDb { .. } => {
                assert!(!st.dbs.contains_key("d") && st.dbs["e"].id == "d1")
            }
            CatalogCommand::CreateTable { .. } => {
                assert!(st.tables.contains_key(&("e".into(), "t".into())));
                assert_eq!(out.tables.len(), 1);
            }
            CatalogCommand::AlterTable { .. } => {
                let t = &st.tables[&("e".into(), "u".into())];
                assert_eq!(t.durability, Durability::Soft);
                assert!(t.single_ack);
                assert_eq!((t.shards, t.splits.clone()), (2, vec![Datum::str("80")]));
                assert_eq!(st.tables.len(), 1);
            }
            CatalogCommand::CreateIndex { .. } => {
                assert!(!table_of(&c).unwrap().indexes["v"].ready)
            }
            CatalogCommand::RenameIndex { .. } => {
                assert_eq!(
                    table_of(&c).unwrap().indexes.keys().collect::<Vec<_>>(),
                    ["w"]
                )
            }
            CatalogCommand::IndexReady { .. } => {
                assert!(table_of(&c).unwrap().indexes["w"].ready)
            }
            CatalogCommand::SetWriteHook { .. } => {
                assert!(table_of(&c).unwrap().hook.is_some())
            }
            CatalogCommand::PutUser { .. } => assert!(st.users["bob"].has_password),
            CatalogCommand::SetPermissions { .. } => {
                assert_eq!(st.users["bob"].tables["t1"].read, Some(true));
                assert_eq!(out.perms.unwrap().0, Perms::default());
            }
            CatalogCommand::DropIndex { .. } => {
                assert!(table_of(&c).unwrap().indexes.is_empty())
            }
            CatalogCommand::DeleteUser { .. } => assert!(!st.users.contains_key("bob")),
            CatalogCommand::DropTable { .. } => assert!(st.tables.is_empty()),
            CatalogCommand::DropDb { .. } => assert!(!st.dbs.contains_key("e")),
            // A placed table's: `a_resharding_begins_once_and_finishes_once` and
            // `an_abandoned_resharding_never_finishes_and_a_finished_one_is_never_abandoned`.
            CatalogCommand::BeginReshard { .. }
            | CatalogCommand::FinishReshard { .. }
            | CatalogCommand::AbortReshard { .. }
            | CatalogCommand::FinishAbort { .. } => unreachable!("not among commands()"),
        }
    }
    // Only `test`'s record and `admin`'s are left, keyed by id and name.
    let keys: Vec<String> = dump(&e)
        .into_iter()
        .map(|(s, k, _)| format!("{s}:{}", String::from_utf8_lossy(&k)))
        .collect();
    let test_id = c.read_state().dbs["test"].id.clone();
    assert_eq!(
        keys,
        vec![
            format!("catalog:db/{test_id}"),
            "catalog:format".to_string(),
            "users:admin".to_string()
        ]
    );
}

#[test]
fn a_renamed_table_has_one_record_under_its_id() {
    let (e, c) = open();
    let test_id = c.read_state().dbs["test"].id.clone();
    c.apply(CatalogCommand::CreateTable {
        table: table("t1", &test_id, "t"),
    })
    .unwrap();
    c.apply(CatalogCommand::AlterTable {
        id: "t1".into(),
        changes: TableChanges {
            name: Some("u".into()),
            ..Default::default()
        },
    })
    .unwrap();
    let tables: Vec<_> = dump(&e)
        .into_iter()
        .filter(|(_, k, _)| k.starts_with(b"table/"))
        .collect();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].1, b"table/t1".to_vec());
    let d = datum::from_json_slice(&tables[0].2).unwrap();
    assert_eq!(d.get("name"), Some(&Datum::str("u")));
}

#[test]
fn rejected_commands_change_nothing() {
    use CatalogCommand as C;
    let (e, c) = open();
    for cmd in commands().into_iter().take(10) {
        c.apply(cmd).unwrap();
    }
    c.apply(C::CreateTable {
        table: table("t2", "d1", "x"),
    })
    .unwrap();
    let bad_creds = crate::catalog::Credentials {
        salt: "!".into(),
        iterations: 1,
        stored_key: "".into(),
        server_key: "".into(),
    };
    let rejected = vec![
        (
            C::CreateDb {
                id: "d9".into(),
                name: "e".into(),
            },
            "Database `e` already exists.",
        ),
        (
            C::CreateDb {
                id: "d9".into(),
                name: "rethinkdb".into(),
            },
            "Database `rethinkdb` already exists.",
        ),
        (
            C::DropDb { id: "nope".into() },
            "Database with id `nope` does not exist.",
        ),
        (
            C::RenameDb {
                id: "d1".into(),
                name: "test".into(),
            },
            "Database `test` already exists.",
        ),
        (
            C::CreateTable {
                table: table("t3", "d1", "u"),
            },
            "Table `e.u` already exists.",
        ),
        (
            C::CreateTable {
                table: table("t3", "nope", "z"),
            },
            "Database with id `nope` does not exist.",
        ),
        (
            C::CreateTable {
                table: table("t1", "d1", "z"),
            },
            "Table with id `t1` already exists.",
        ),
        (
            C::DropTable { id: "nope".into() },
            "Table with id `nope` does not exist.",
        ),
        (
            C::AlterTable {
                id: "t1".into(),
                changes: TableChanges {
                    name: Some("x".into()),
                    ..Default::default()
                },
            },
            "Can't rename table `e.u` to `e.x` because table `e.x` already exists.",
        ),
        (
            C::AlterTable {
                id: "t1".into(),
                changes: TableChanges {
                    shards: Some(3),
                    ..Default::default()
                },
            },
            "1 split points do not cut 3 shards.",
        ),
        (
            C::CreateIndex {
                table: "t1".into(),
                index: "i2".into(),
                name: "w".into(),
                spec: spec(),
            },
            "Index `w` already exists on table `e.u`.",
        ),
        (
            C::DropIndex {
                table: "t1".into(),
                name: "nope".into(),
            },
            "Index `nope` does not exist on table `e.u`.",
        ),
        (
            C::RenameIndex {
                table: "t2".into(),
                old: "a".into(),
                new: "b".into(),
                overwrite: false,
            },
            "Index `a` does not exist or index `b` already exists on table `e.x`.",
        ),
        (
            C::IndexReady {
                table: "t1".into(),
                index: "nope".into(),
            },
            "Index with id `nope` does not exist on table `e.u`.",
        ),
        (
            C::SetWriteHook {
                table: "nope".into(),
                function: None,
            },
            "Table with id `nope` does not exist.",
        ),
        (
            C::PutUser {
                name: "eve".into(),
                credentials: bad_creds,
                has_password: true,
            },
            "Invalid credentials for user `eve`.",
        ),
        (
            C::DeleteUser { name: ADMIN.into() },
            "The user `admin` can't be deleted",
        ),
        (C::DeleteUser { name: "eve".into() }, "User `eve` not found"),
        (
            C::SetPermissions {
                user: ADMIN.into(),
                scope: Scope::Global,
                perms: Perms::default(),
            },
            "The permissions of the user `admin` can't be modified.",
        ),
        (
            C::SetPermissions {
                user: "eve".into(),
                scope: Scope::Global,
                perms: Perms::default(),
            },
            "User `eve` not found.",
        ),
    ];
    for (cmd, msg) in rejected {
        let before = (dump(&e), c.read_state().clone());
        let err = c.apply(cmd.clone()).unwrap_err();
        assert_eq!(err.message, msg, "{cmd:?}");
        assert!(
            before == (dump(&e), c.read_state().clone()),
            "{cmd:?} changed something"
        );
    }
}

#[test]
fn an_unwritten_command_changes_nothing_in_memory() {
    let faulty = Arc::new(storage::Faulty::new(storage::Memory::new()));
    let e: Arc<dyn Engine> = faulty.clone();
    let c = Catalog::open(e, "").unwrap();
    let before = c.read_state().clone();
    faulty.fail_next_applies(1);
    let err = c
        .apply(CatalogCommand::CreateDb {
            id: "d1".into(),
            name: "d".into(),
        })
        .unwrap_err();
    assert!(
        err.message.starts_with("Could not write the catalog: "),
        "{}",
        err.message
    );
    assert_eq!(*c.read_state(), before);
}

#[test]
fn commands_round_trip_through_json() {
    for cmd in commands() {
        let s = cmd.to_json();
        assert_eq!(CatalogCommand::from_json(&s).unwrap(), cmd, "{s}");
    }
    let s = commands()[0].to_json();
    assert_eq!(s, r#"{"op":"create_db","id":"d1","name":"d"}"#);
    assert!(CatalogCommand::from_json(r#"{"op":"drop_everything"}"#).is_err());
}

#[test]
fn records_of_earlier_builds_move_to_id_keys() {
    let e: Arc<dyn Engine> = Arc::new(storage::Memory::new());
    e.create_space(CATALOG).unwrap();
    let mut b = WriteBatch::new();
    b.put(CATALOG, FORMAT_KEY.to_vec(), b"1".to_vec());
    b.put(
        CATALOG,
        b"db/d".to_vec(),
        br#"{"id":"d1","name":"d"}"#.to_vec(),
    );
    b.put(
        CATALOG,
        b"table/d/t".to_vec(),
        br#"{"id":"t1","db":"d","name":"t","primary_key":"k","durability":"soft","shards":1,"replicas":1,"indexes":[{"id":"i1","name":"v","function":[69,[[2,[1]],[10,[1]]]],"multi":false,"geo":false,"ready":true}]}"#
            .to_vec(),
    );
    e.apply(b).unwrap();
    let c = Catalog::open(e.clone(), "").unwrap();
    let t = c.read_state().tables[&("d".into(), "t".into())].clone();
    assert_eq!((t.id.as_str(), t.primary_key.as_str()), ("t1", "k"));
    assert!(t.indexes["v"].ready);
    let keys: Vec<Vec<u8>> = dump(&e).into_iter().map(|(_, k, _)| k).collect();
    assert!(keys.contains(&b"db/d1".to_vec()) && keys.contains(&b"table/t1".to_vec()));
    assert!(!keys.contains(&b"db/d".to_vec()) && !keys.contains(&b"table/d/t".to_vec()));
    // Opening again reads the same catalog and moves nothing.
    let again = Catalog::open(e.clone(), "").unwrap();
    assert_eq!(*again.read_state(), *c.read_state());
}

#[test]
fn a_repaired_placement_survives_its_record() {
    use crate::placement::{Lineage, ShardPlacement};
    let a = "00000000-0000-4000-8000-00000000000a".to_string();
    let e = TableEntry {
        id: "t1".into(),
        db: "d".into(),
        name: "t".into(),
        primary_key: "id".into(),
        durability: Durability::Hard,
        single_ack: false,
        shards: 1,
        replicas: 1,
        splits: vec![],
        indexes: Default::default(),
        hook: None,
        placement: vec![ShardPlacement {
            primary: a.clone(),
            voting: vec![a.clone()],
            nonvoting: vec![],
            incarnations: [(a.clone(), 9)].into(),
            // Node ids use all 64 bits: they must come back exactly.
            lineage: Lineage {
                epoch: 2,
                seed: Some(u64::MAX - 1),
                abandoned: vec![1, 0xFFFF_FFFF_0000_0003],
            },
        }],
        generation: 0,
        resharding: None,
        abandoned: Default::default(),
    };
    assert_eq!(parse_table(&table_record(&e)).placement, e.placement);
}

#[test]
fn a_resharding_survives_its_record() {
    use crate::placement::ShardPlacement;
    let a = "00000000-0000-4000-8000-00000000000a".to_string();
    let place = ShardPlacement {
        primary: a.clone(),
        voting: vec![a.clone()],
        ..Default::default()
    };
    let e = TableEntry {
        id: "t1".into(),
        db: "d".into(),
        name: "t".into(),
        primary_key: "id".into(),
        durability: Durability::Hard,
        single_ack: false,
        shards: 1,
        replicas: 1,
        splits: vec![],
        indexes: Default::default(),
        hook: None,
        placement: vec![place.clone()],
        generation: 3,
        resharding: Some(super::Reshard {
            generation: 4,
            replicas: 1,
            splits: vec![Datum::str("m")],
            placement: vec![place.clone(), place],
        }),
        abandoned: super::Abandoned {
            generation: 2,
            unfreezing: false,
        },
    };
    let back = parse_table(&table_record(&e));
    assert_eq!(back, e);
    let after = back.resharded().unwrap();
    assert_eq!(
        (after.shards, after.generation, after.resharding),
        (2, 4, None)
    );
}

/// Creates database `d1` and its table `t1` of one shard on one server; that placement.
fn placed_table(c: &Catalog) -> crate::placement::ShardPlacement {
    let a = "00000000-0000-4000-8000-00000000000a".to_string();
    let place = crate::placement::ShardPlacement {
        primary: a.clone(),
        voting: vec![a.clone()],
        ..Default::default()
    };
    let mut def = table("t1", "d1", "t");
    def.placement = vec![place.clone()];
    c.apply(CatalogCommand::CreateDb {
        id: "d1".into(),
        name: "d".into(),
    })
    .unwrap();
    c.apply(CatalogCommand::CreateTable { table: def }).unwrap();
    place
}

#[test]
fn a_resharding_begins_once_and_finishes_once() {
    use crate::catalog::command::ReshardDef;
    use CatalogCommand as C;
    let (e, c) = open();
    let place = placed_table(&c);
    let reshard = |generation| ReshardDef {
        generation,
        replicas: 1,
        split_points: vec![json!("80")],
        placement: vec![place.clone(), place.clone()],
    };
    let begin = |r| C::BeginReshard {
        id: "t1".into(),
        reshard: r,
    };
    let finish = |generation| C::FinishReshard {
        id: "t1".into(),
        generation,
    };
    // Not the next generation; finishing what did not begin.
    assert!(c.apply(begin(reshard(2))).is_err());
    assert!(c.apply(finish(1)).is_err());
    c.apply(begin(reshard(1))).unwrap();
    // The same again (a retry) is accepted; another one while it is under way is not.
    c.apply(begin(reshard(1))).unwrap();
    let mut other = reshard(1);
    other.split_points = vec![json!("40")];
    assert!(c.apply(begin(other)).is_err());
    let t = |c: &Catalog| c.read_state().tables.values().next().cloned().unwrap();
    assert_eq!((t(&c).shards, t(&c).generation), (1, 0));
    assert!(t(&c).resharding.is_some());
    // Persisted: what is on disk reads back as the state in memory.
    let again = Catalog::open(e.clone(), "").unwrap();
    assert_eq!(*again.read_state(), *c.read_state());
    c.apply(finish(1)).unwrap();
    let done = t(&c);
    assert_eq!(
        (done.shards, done.generation, done.resharding),
        (2, 1, None)
    );
    assert_eq!(done.splits, vec![Datum::str("80")]);
    // Finishing again (a retry) changes nothing.
    c.apply(finish(1)).unwrap();
    assert_eq!(t(&c), t(&Catalog::open(e, "").unwrap()));
}

#[test]
fn an_abandoned_resharding_never_finishes_and_a_finished_one_is_never_abandoned() {
    use crate::catalog::command::ReshardDef;
    use CatalogCommand as C;
    let (e, c) = open();
    let place = placed_table(&c);
    let begin = |generation| C::BeginReshard {
        id: "t1".into(),
        reshard: ReshardDef {
            generation,
            replicas: 1,
            split_points: vec![json!("80")],
            placement: vec![place.clone(), place.clone()],
        },
    };
    let id = || "t1".to_string();
    let finish = |generation| C::FinishReshard {
        id: id(),
        generation,
    };
    let abort = |generation| C::AbortReshard {
        id: id(),
        generation,
    };
    let unfrozen = |generation| C::FinishAbort {
        id: id(),
        generation,
    };
    let t = |c: &Catalog| c.read_state().tables.values().next().cloned().unwrap();
    // Nothing under way: nothing to abandon.
    assert!(c.apply(abort(1)).is_err());
    c.apply(begin(1)).unwrap();
    assert!(c.apply(abort(2)).is_err());
    c.apply(abort(1)).unwrap();
    let aborted = t(&c);
    assert_eq!((aborted.shards, aborted.generation), (1, 0));
    assert_eq!(aborted.resharding, None);
    assert_eq!(
        aborted.abandoned,
        super::Abandoned {
            generation: 1,
            unfreezing: true
        }
    );
    // A retry changes nothing; the abandoned resharding never finishes (a late copier,
    // a resumption, a server behind), even after a retry of its beginning.
    c.apply(abort(1)).unwrap();
    assert!(c.apply(begin(1)).is_err());
    let err = c.apply(finish(1)).unwrap_err();
    assert!(err.message.contains("abandoned"), "{}", err.message);
    assert_eq!(t(&c), aborted);
    // No new resharding until the old shards are unfrozen; then past generation 1.
    assert!(c.apply(begin(2)).is_err());
    assert!(c.apply(unfrozen(2)).is_err());
    c.apply(unfrozen(1)).unwrap();
    c.apply(unfrozen(1)).unwrap();
    assert!(!t(&c).abandoned.unfreezing);
    assert!(c.apply(begin(1)).is_err());
    assert_eq!(
        *Catalog::open(e.clone(), "").unwrap().read_state(),
        *c.read_state()
    );
    c.apply(begin(2)).unwrap();
    assert!(c.apply(finish(1)).is_err());
    c.apply(finish(2)).unwrap();
    // Finished: it can no longer be abandoned.
    let done = t(&c);
    assert_eq!((done.shards, done.generation), (2, 2));
    let err = c.apply(abort(2)).unwrap_err();
    assert!(err.message.contains("finished"), "{}", err.message);
    assert_eq!(t(&c), done);
    assert_eq!(*Catalog::open(e, "").unwrap().read_state(), *c.read_state());
}
