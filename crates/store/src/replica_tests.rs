//! Unit tests of `ShardMachine` through `replication::StateMachineStore` (no Raft):
//! replies, refusals, and the move to new spaces after a snapshot install.

use std::ops::Bound;

use datum::{Datum, Version};
use replication::openraft::storage::RaftStateMachine;
use replication::openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use replication::{Command, Durability, Entry, LogId, StateMachineStore};
use storage::Memory;

use super::*;
use crate::unkeyed::{NoKeys, Unkeyed};
use crate::{decode_reply, encode_command, Applied, ReplyError};

const PREFIX: &str = "raft.g1";

/// Indexes field `v`.
struct Field;

impl IndexFn for Field {
    fn keys(&self, doc: &datum::Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
        let v = doc.get("v").ok_or(NoKeys::Failed("no field".into()))?;
        datum::keys::encode_secondary(v)
            .map(|k| vec![k])
            .map_err(|_| NoKeys::Unkeyable(Unkeyed::of(v)))
    }
}

fn open(engine: &Arc<dyn Engine>, range: KeyRange) -> StateMachineStore<ShardMachine> {
    let opts = ReplicaOptions {
        prefix: PREFIX.into(),
        commit: GroupCommit::start(engine.clone()),
        cache: CacheBudget::default(),
        feeds: changefeed::Hub::new(),
        range,
        indexes: vec![ReplicaIndex {
            id: "v".into(),
            func: Arc::new(Field),
            multi: false,
        }],
    };
    let machine = ShardMachine::open(engine.clone(), opts).unwrap();
    StateMachineStore::open(engine.clone(), PREFIX, machine, Durability::Inline).unwrap()
}

fn doc(id: u32, v: u32) -> Datum {
    datum::from_json_slice(format!("{{\"id\":{id},\"v\":{v}}}").as_bytes()).unwrap()
}

fn entry(index: u64, command: Vec<u8>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Command(command)),
    }
}

fn put(id: u32, v: u32, expect: Option<Version>) -> Vec<u8> {
    let key = Datum::Number(f64::from(id));
    encode_command(&key, expect, &StoreChange::Put(doc(id, v))).unwrap()
}

/// Applies `commands` as entries `first..`, returning the decoded replies.
async fn apply(
    sm: &mut StateMachineStore<ShardMachine>,
    first: u64,
    commands: Vec<Vec<u8>>,
) -> Vec<Result<Applied, ReplyError>> {
    let entries = (first..)
        .zip(commands)
        .map(|(i, c)| entry(i, c))
        .collect::<Vec<_>>();
    let replies = sm.apply(entries).await.unwrap();
    replies.iter().map(|r| decode_reply(&r.0)).collect()
}

/// The values of index `v`, in index order.
/// Installs a snapshot of `from`'s state on `to`.
async fn install(
    from: &mut StateMachineStore<ShardMachine>,
    to: &mut StateMachineStore<ShardMachine>,
) {
    let snapshot = from
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    to.install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
}

fn index_values(m: &ShardMachine) -> Vec<f64> {
    let idx = m.index("v").unwrap();
    m.shard()
        .index_docs(idx, &Bound::Unbounded, &Bound::Unbounded, false)
        .unwrap()
        .map(|d| d.unwrap().get("v").and_then(Datum::as_f64).unwrap())
        .collect()
}

#[tokio::test]
async fn entries_apply_conditionally_and_answer_like_a_local_write() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open(&engine, KeyRange::all());
    let absent = Some(Version::ABSENT);
    let stale = Some(Version::of(Some(&doc(1, 9))));
    let current = Some(Version::of(Some(&doc(1, 5))));
    let replies = apply(
        &mut sm,
        1,
        vec![
            put(1, 5, absent),
            put(2, 3, None),
            put(1, 6, absent),
            put(1, 7, stale),
            put(1, 8, current),
        ],
    )
    .await;
    assert!(matches!(&replies[0], Ok(Applied::Done((None, Some(n), None))) if *n == doc(1, 5)));
    assert!(matches!(
        &replies[1],
        Ok(Applied::Done((None, Some(_), None)))
    ));
    assert!(matches!(&replies[2], Ok(Applied::Conflict(Some(c))) if *c == doc(1, 5)));
    assert!(matches!(&replies[3], Ok(Applied::Conflict(Some(c))) if *c == doc(1, 5)));
    assert!(
        matches!(&replies[4], Ok(Applied::Done((Some(o), Some(n), None))) if *o == doc(1, 5) && *n == doc(1, 8))
    );
    let m = sm.machine();
    assert_eq!(m.shard().count(), 2);
    assert_eq!(m.shard().get(&Datum::Number(1.0)).unwrap(), Some(doc(1, 8)));
    assert_eq!(index_values(m), [3.0, 8.0]);
    let key = Datum::Number(2.0);
    let del = encode_command(&key, None, &StoreChange::Delete).unwrap();
    let replies = apply(&mut sm, 6, vec![del]).await;
    assert!(matches!(
        &replies[0],
        Ok(Applied::Done((Some(_), None, None)))
    ));
    assert_eq!(
        (sm.machine().shard().count(), index_values(sm.machine())),
        (1, vec![8.0])
    );
}

/// A command whose key is a 200-character string, encoded as a short one would be.
fn encode_long_key() -> Vec<u8> {
    let short = datum::keys::encode_primary(&Datum::str("k")).unwrap();
    let long = [&short[..1], "k".repeat(200).as_bytes(), &short[2..]].concat();
    assert!(datum::keys::decode(&long).is_some());
    let command = encode_command(&Datum::str("k"), None, &StoreChange::Delete).unwrap();
    // The version byte, then the key's length (one byte: under 128) and bytes.
    assert_eq!(command[1] as usize, short.len());
    let mut out = vec![command[0]];
    out.extend(postcard_varint(long.len()));
    out.extend_from_slice(&long);
    out.extend_from_slice(&command[2 + short.len()..]);
    out
}

/// postcard's unsigned varint.
fn postcard_varint(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

#[tokio::test]
async fn malformed_and_foreign_commands_are_refused_and_write_nothing() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let upper = datum::keys::encode_primary(&Datum::Number(10.0)).unwrap();
    let mut sm = open(
        &engine,
        KeyRange {
            lower: None,
            upper: Some(upper),
        },
    );
    let refusals = apply(
        &mut sm,
        1,
        vec![
            b"garbage".to_vec(),
            Vec::new(),
            // A record of an empty key, and of a key that is no primary key.
            vec![1, 0, 0, 0],
            vec![1, 1, 0xee, 0, 0],
            // A string key longer than a primary key may be.
            encode_long_key(),
            put(11, 1, None),
        ],
    )
    .await;
    for (i, r) in refusals.iter().enumerate() {
        assert!(matches!(r, Err(ReplyError::Refused(_))), "{i}: {r:?}");
    }
    assert!(matches!(&refusals[4], Err(ReplyError::Refused(m)) if m.contains("malformed")));
    assert!(matches!(&refusals[5], Err(ReplyError::Refused(m)) if m.contains("range")));
    assert_eq!(sm.machine().shard().count(), 0);
    assert_eq!(
        replication::applied_log_id(&*engine, PREFIX)
            .unwrap()
            .map(|l| l.index),
        Some(6)
    );
    // The machine goes on.
    let ok = apply(&mut sm, 7, vec![put(1, 1, None)]).await;
    assert!(ok[0].is_ok());
}

#[tokio::test]
async fn an_installed_snapshot_moves_readers_and_rebuilds_derived_state() {
    let (le, fe): (Arc<dyn Engine>, Arc<dyn Engine>) =
        (Arc::new(Memory::new()), Arc::new(Memory::new()));
    let mut leader = open(&le, KeyRange::all());
    apply(
        &mut leader,
        1,
        (0..600).map(|i| put(i, i % 7, None)).collect(),
    )
    .await;
    let mut follower = open(&fe, KeyRange::all());
    apply(
        &mut follower,
        1,
        vec![put(1, 100, None), put(5000, 1, None)],
    )
    .await;
    let (fm, lm) = (follower.machine(), leader.machine());
    for m in [fm, lm] {
        crate::track_entries(&[m.shard().clone()], m.index("v").unwrap()).unwrap();
    }
    // An index added while the groups run, built by each replica.
    let added: Vec<_> = [fm, lm]
        .iter()
        .map(|m| {
            let space = format!("{PREFIX}.idx.w");
            let idx = m.shard().open_replica_index(&space, Arc::new(Field), false);
            let idx = idx.unwrap();
            assert!(m.shard().build_replica_index(&idx).unwrap());
            idx
        })
        .collect();
    let values = |m: &ShardMachine, idx: &crate::SecondaryIndex| -> Vec<f64> {
        let all = (Bound::Unbounded, Bound::Unbounded);
        let docs = m.shard().index_docs(idx, &all.0, &all.1, false).unwrap();
        docs.map(|d| d.unwrap().get("v").and_then(Datum::as_f64).unwrap())
            .collect()
    };
    assert_eq!(values(fm, &added[0]), vec![1.0, 100.0]);
    // Built, each copy has its own replica's statistics.
    assert_eq!(added[0].entry_count(), Some(2));
    assert_eq!(added[1].entry_count(), Some(600));
    assert_eq!(added[1].unkeyed_counts(), Some([0, 0, 0]));
    // Cached on the follower before the install.
    assert_eq!(
        fm.shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 100))
    );
    let before = fm.shard().space();
    install(&mut leader, &mut follower).await;
    let (fm, lm) = (follower.machine(), leader.machine());
    assert_ne!(fm.shard().space(), before);
    assert_eq!(fm.shard().count(), 600);
    assert_eq!(
        fm.shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 1))
    );
    assert!(fm.shard().get(&Datum::Number(5000.0)).unwrap().is_none());
    assert_eq!(fm.shard().sampled_keys(), lm.shard().sampled_keys());
    assert!(!lm.shard().sampled_keys().is_empty());
    assert_eq!(index_values(fm), index_values(lm));
    assert_eq!(fm.index("v").unwrap().entry_count(), Some(600));
    // The added index was emptied and rebuilt from the installed documents.
    assert!(added[0].is_ready());
    assert_eq!(values(fm, &added[0]), values(lm, &added[1]));
    assert_eq!(values(fm, &added[0]).len(), 600);
    // Counted again for the installed documents before it was ready again.
    assert_eq!(added[0].entry_count(), Some(600));
    // Writes go on in the new spaces.
    let replies = apply(&mut follower, 601, vec![put(700, 3, Some(Version::ABSENT))]).await;
    assert!(replies[0].is_ok());
    assert_eq!(follower.machine().shard().count(), 601);
    assert_eq!(
        follower.machine().index("v").unwrap().entry_count(),
        Some(601)
    );
    assert_eq!(values(follower.machine(), &added[0]).len(), 601);
    assert_eq!(added[0].entry_count(), Some(601));
    assert_eq!(added[0].unkeyed_counts(), Some([0, 0, 0]));
    // Reopened on the installed documents, it is complete: kept as it is.
    let shard = follower.machine().shard();
    let again = Shard::open(fe.clone(), &shard.space(), GroupCommit::start(fe.clone())).unwrap();
    let idx = again.open_replica_index(&added[0].space(), Arc::new(Field), false);
    let idx = idx.unwrap();
    assert!(idx.is_ready());
    assert_eq!(idx.entry_count(), Some(601));
}

fn op(id: u32, v: u32, expect: Option<Version>) -> Vec<u8> {
    crate::encode_op(
        &Datum::Number(f64::from(id)),
        expect,
        &StoreChange::Put(doc(id, v)),
    )
    .unwrap()
}

/// Applies one chunk of `ops` as entry `index`, returning its decoded reply.
async fn apply_chunk(
    sm: &mut StateMachineStore<ShardMachine>,
    index: u64,
    ops: Vec<Vec<u8>>,
) -> Result<Vec<Result<Applied, ReplyError>>, ReplyError> {
    let count = ops.len();
    let replies = sm
        .apply(vec![entry(index, crate::encode_chunk(&ops).unwrap())])
        .await
        .unwrap();
    crate::decode_chunk_reply(&replies[0].0, count)
}

#[tokio::test]
async fn a_chunk_entry_answers_each_write_and_refuses_bad_ones_alone() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let upper = datum::keys::encode_primary(&Datum::Number(10.0)).unwrap();
    let range = KeyRange {
        lower: None,
        upper: Some(upper),
    };
    let mut sm = open(&engine, range.clone());
    apply(&mut sm, 1, vec![put(3, 1, None)]).await;
    let absent = Some(Version::ABSENT);
    let replies = apply_chunk(
        &mut sm,
        2,
        vec![
            op(1, 5, absent),
            op(2, 6, None),
            b"garbage".to_vec(),
            op(11, 1, None),
            op(3, 9, absent),
        ],
    )
    .await
    .unwrap();
    assert!(matches!(&replies[0], Ok(Applied::Done((None, Some(n), None))) if *n == doc(1, 5)));
    assert!(matches!(&replies[1], Ok(Applied::Done((None, Some(n), None))) if *n == doc(2, 6)));
    assert!(matches!(&replies[2], Err(ReplyError::Refused(m)) if m.contains("malformed")));
    assert!(matches!(&replies[3], Err(ReplyError::Refused(m)) if m.contains("range")));
    assert!(matches!(&replies[4], Ok(Applied::Conflict(Some(c))) if *c == doc(3, 1)));
    let m = sm.machine();
    assert_eq!(m.shard().count(), 3);
    assert_eq!(index_values(m), [1.0, 5.0, 6.0]);
    assert_eq!(
        replication::applied_log_id(&*engine, PREFIX)
            .unwrap()
            .map(|l| l.index),
        Some(2)
    );

    // A chunk repeating a key is refused whole; a malformed chunk too.
    let repeated = apply_chunk(&mut sm, 3, vec![op(4, 1, None), op(4, 2, None)]).await;
    assert!(matches!(repeated, Err(ReplyError::Refused(m)) if m.contains("repeats")));
    let replies = sm
        .apply(vec![entry(4, vec![crate::CHUNK_FORMAT, 0xff, 0xff])])
        .await
        .unwrap();
    assert!(matches!(
        crate::decode_chunk_reply(&replies[0].0, 1),
        Err(ReplyError::Refused(m)) if m.contains("malformed chunk")
    ));
    assert_eq!(sm.machine().shard().count(), 3);

    // The same writes as entries of their own leave the same state.
    let other: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut single = open(&other, range);
    let commands = vec![
        put(3, 1, None),
        put(1, 5, absent),
        put(2, 6, None),
        put(3, 9, absent),
    ];
    apply(&mut single, 1, commands).await;
    for id in 0..12 {
        let key = Datum::Number(f64::from(id));
        assert_eq!(
            single.machine().shard().get(&key).unwrap(),
            sm.machine().shard().get(&key).unwrap()
        );
    }
    assert_eq!(index_values(single.machine()), index_values(sm.machine()));

    // A shard frozen by a resharding answers every operation of a chunk `Frozen`.
    let freeze = crate::encode_freeze(7).unwrap();
    apply(&mut sm, 5, vec![freeze]).await;
    let replies = apply_chunk(&mut sm, 6, vec![op(5, 1, None), op(6, 1, None)])
        .await
        .unwrap();
    assert!(
        replies
            .iter()
            .all(|r| matches!(r, Err(ReplyError::Frozen(7)))),
        "{replies:?}"
    );
    assert_eq!(sm.machine().shard().count(), 3);
}

#[tokio::test]
async fn a_frozen_shard_refuses_every_later_write_even_after_a_reopen() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open(&engine, KeyRange::all());
    let freeze = crate::encode_freeze(2).unwrap();
    let replies = apply(
        &mut sm,
        1,
        vec![put(1, 1, None), freeze.clone(), put(2, 2, None)],
    )
    .await;
    assert!(replies[0].is_ok() && replies[1].is_ok());
    assert_eq!(replies[2].as_ref().unwrap_err(), &ReplyError::Frozen(2));
    assert_eq!(sm.machine().frozen(), 2);
    assert_eq!(sm.machine().shard().count(), 1);
    // A second freeze (a retried one) keeps the first generation.
    let again = apply(&mut sm, 4, vec![crate::encode_freeze(5).unwrap()]).await;
    assert!(again[0].is_ok());
    drop(sm);
    // The freeze is state: a replica reopened on it still refuses.
    let mut sm = open(&engine, KeyRange::all());
    assert_eq!(sm.machine().frozen(), 2);
    let replies = apply(&mut sm, 5, vec![put(3, 3, None)]).await;
    assert_eq!(replies[0].as_ref().unwrap_err(), &ReplyError::Frozen(2));
    assert_eq!(
        sm.machine().shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 1))
    );
}

#[tokio::test]
async fn loads_apply_until_the_shard_is_opened_then_change_nothing() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open(&engine, KeyRange::all());
    let load =
        |id: u32, v: u32| crate::encode_load(&Datum::Number(f64::from(id)), &doc(id, v)).unwrap();
    let replies = apply(
        &mut sm,
        1,
        vec![load(1, 1), load(1, 2), crate::encode_open(1).unwrap()],
    )
    .await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(index_values(sm.machine()), [2.0]);
    // After the open, a late load is answered as done and changes nothing; clients'
    // writes go on.
    let replies = apply(&mut sm, 4, vec![load(1, 9), put(2, 3, None)]).await;
    assert!(
        matches!(&replies[0], Ok(Applied::Done((None, None, None)))),
        "{replies:?}"
    );
    assert!(replies[1].is_ok());
    drop(sm);
    let mut sm = open(&engine, KeyRange::all());
    let replies = apply(&mut sm, 6, vec![load(3, 3)]).await;
    assert!(
        matches!(&replies[0], Ok(Applied::Done((None, None, None)))),
        "{replies:?}"
    );
    assert_eq!(
        sm.machine().shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 2))
    );
    assert!(sm
        .machine()
        .shard()
        .get(&Datum::Number(3.0))
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_chunk_of_loads_applies_until_the_shard_is_opened_then_each_changes_nothing() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open(&engine, KeyRange::all());
    let load = |id: u32, v: u32| {
        crate::encode_load_op(&Datum::Number(f64::from(id)), &doc(id, v)).unwrap()
    };
    // A load replaces whatever is there (a resumed copy rewrites the same documents).
    apply(&mut sm, 1, vec![put(1, 0, None)]).await;
    let replies = apply_chunk(&mut sm, 2, vec![load(1, 1), load(2, 2), load(3, 3)])
        .await
        .unwrap();
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(sm.machine().shard().count(), 3);
    assert_eq!(index_values(sm.machine()), [1.0, 2.0, 3.0]);
    // After the open, each load of a chunk is answered as done and writes nothing; a
    // client's write in the same chunk goes on.
    apply(&mut sm, 3, vec![crate::encode_open(1).unwrap()]).await;
    let replies = apply_chunk(&mut sm, 4, vec![load(1, 9), op(4, 4, None)])
        .await
        .unwrap();
    assert!(
        matches!(&replies[0], Ok(Applied::Done((None, None, None)))),
        "{replies:?}"
    );
    assert!(replies[1].is_ok(), "{replies:?}");
    assert_eq!(
        sm.machine().shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 1))
    );
    // A load that is no document is refused alone.
    let bad = crate::encode_load_op(&Datum::Number(5.0), &Datum::Number(5.0)).unwrap();
    let other: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut fresh = open(&other, KeyRange::all());
    let replies = apply_chunk(&mut fresh, 1, vec![bad, load(6, 6)])
        .await
        .unwrap();
    assert!(
        matches!(&replies[0], Err(ReplyError::Refused(_))),
        "{replies:?}"
    );
    assert!(replies[1].is_ok(), "{replies:?}");
}

#[tokio::test]
async fn an_unfreeze_lifts_the_freeze_and_retirement_for_good_and_travels_in_snapshots() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open(&engine, KeyRange::all());
    let (freeze, retire) = (crate::encode_freeze, crate::encode_retire);
    let unfreeze = crate::encode_unfreeze;
    let replies = apply(
        &mut sm,
        1,
        vec![put(1, 1, None), freeze(2).unwrap(), put(2, 2, None)],
    )
    .await;
    assert_eq!(replies[2].as_ref().unwrap_err(), &ReplyError::Frozen(2));
    apply(&mut sm, 4, vec![retire(2).unwrap()]).await;
    assert_eq!(sm.machine().shard().retired(), 2);
    // The abandoned resharding's unfreeze: a write is accepted again; a second unfreeze
    // (a retry) and a late freeze or retirement of that resharding (a copier's) change
    // nothing.
    let replies = apply(
        &mut sm,
        5,
        vec![
            unfreeze(2).unwrap(),
            put(2, 2, None),
            unfreeze(2).unwrap(),
            freeze(2).unwrap(),
            retire(2).unwrap(),
            freeze(1).unwrap(),
            put(3, 3, None),
        ],
    )
    .await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(sm.machine().frozen(), 0);
    assert_eq!(sm.machine().shard().retired(), 0);
    assert_eq!(sm.machine().shard().count(), 3);
    let chunk = apply_chunk(&mut sm, 12, vec![op(4, 4, None)])
        .await
        .unwrap();
    assert!(chunk[0].is_ok(), "{chunk:?}");
    // An unfreeze of an older generation does not lift a newer resharding's freeze.
    let replies = apply(
        &mut sm,
        13,
        vec![freeze(3).unwrap(), unfreeze(2).unwrap(), put(5, 5, None)],
    )
    .await;
    assert_eq!(replies[2].as_ref().unwrap_err(), &ReplyError::Frozen(3));
    // Unfrozen from 3 on, as state: a snapshot of it installed elsewhere, and a reopen.
    apply(&mut sm, 16, vec![unfreeze(3).unwrap()]).await;
    let other: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut follower = open(&other, KeyRange::all());
    apply(
        &mut follower,
        1,
        vec![freeze(3).unwrap(), retire(3).unwrap()],
    )
    .await;
    assert_eq!(follower.machine().frozen(), 3);
    install(&mut sm, &mut follower).await;
    drop(sm);
    let mut reopened = open(&engine, KeyRange::all());
    for m in [&mut follower, &mut reopened] {
        assert_eq!(
            (m.machine().frozen(), m.machine().shard().retired()),
            (0, 0)
        );
        let replies = apply(m, 17, vec![freeze(3).unwrap(), put(6, 6, None)]).await;
        assert!(replies.iter().all(Result::is_ok), "{replies:?}");
        assert_eq!(m.machine().shard().count(), 5);
        // A newer resharding freezes it again.
        let replies = apply(m, 19, vec![freeze(4).unwrap(), put(7, 7, None)]).await;
        assert_eq!(replies[1].as_ref().unwrap_err(), &ReplyError::Frozen(4));
    }
}

#[tokio::test]
async fn a_retired_shard_says_so_refuses_writes_and_keeps_it_in_snapshots() {
    let (le, fe): (Arc<dyn Engine>, Arc<dyn Engine>) =
        (Arc::new(Memory::new()), Arc::new(Memory::new()));
    let mut sm = open(&le, KeyRange::all());
    let (freeze, retire) = (
        crate::encode_freeze(3).unwrap(),
        crate::encode_retire(3).unwrap(),
    );
    let replies = apply(&mut sm, 1, vec![put(1, 1, None), freeze]).await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(sm.machine().shard().retired(), 0);
    let replies = apply(&mut sm, 3, vec![retire, crate::encode_retire(9).unwrap()]).await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    // The first retirement wins; writes stay refused.
    assert_eq!(sm.machine().shard().retired(), 3);
    let replies = apply(&mut sm, 5, vec![put(2, 2, None)]).await;
    assert_eq!(replies[0].as_ref().unwrap_err(), &ReplyError::Frozen(3));
    let chunk = apply_chunk(&mut sm, 6, vec![op(4, 4, None)]).await.unwrap();
    assert!(matches!(&chunk[0], Err(ReplyError::Frozen(3))), "{chunk:?}");
    // A replica reopened on that state, and one installing its snapshot, are retired.
    drop(sm);
    let mut sm = open(&le, KeyRange::all());
    assert_eq!(sm.machine().shard().retired(), 3);
    let mut follower = open(&fe, KeyRange::all());
    assert_eq!(follower.machine().shard().retired(), 0);
    install(&mut sm, &mut follower).await;
    assert_eq!(follower.machine().shard().retired(), 3);
    assert_eq!(follower.machine().frozen(), 3);
    // Its documents stay readable by the resharding (`cluster::replica` decides who).
    assert_eq!(
        follower.machine().shard().get(&Datum::Number(1.0)).unwrap(),
        Some(doc(1, 1))
    );
}
