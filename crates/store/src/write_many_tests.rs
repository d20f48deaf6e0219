//! Unit tests of `Shard::apply_many`: a mixed chunk answers each operation as
//! `Shard::apply` would, maintains indexes, cache, count and feeds, and commits once.

use std::ops::Bound;
use std::sync::Arc;

use changefeed::{Options, Request};
use storage::{Engine, Faulty, Memory};

use super::*;
use crate::write::tests::{doc, Field};
use crate::{GroupCommit, SecondaryIndex};

fn key(id: u32) -> Datum {
    Datum::Number(f64::from(id))
}

/// An insert's first write: the document, if the key holds none.
fn insert(id: u32, v: u32) -> ChunkOp {
    (key(id), Some(Version::ABSENT), StoreChange::Put(doc(id, v)))
}

fn shard_on(e: Arc<dyn Engine>) -> (Shard, Arc<SecondaryIndex>) {
    let s = Shard::open(e.clone(), "t", GroupCommit::start(e)).unwrap();
    let idx = SecondaryIndex::new("i", Arc::new(Field), false, true);
    s.add_index(idx.clone()).unwrap();
    (s, idx)
}

/// The ids the index holds for `v` values in `lo..hi`, in index order.
fn indexed(s: &Shard, idx: &SecondaryIndex, lo: u32, hi: u32) -> Vec<f64> {
    let (lo, hi) = (Bound::Included(key(lo)), Bound::Excluded(key(hi)));
    s.index_docs(idx, &lo, &hi, false)
        .unwrap()
        .map(|d| d.unwrap().get("id").unwrap().as_f64().unwrap())
        .collect()
}

#[test]
fn a_mixed_chunk_answers_each_operation_as_apply_would() {
    let e: Arc<dyn Engine> = Arc::new(Memory::new());
    let (s, idx) = shard_on(e);
    s.write(&key(2), StoreChange::Put(doc(2, 20))).unwrap();
    s.write(&key(4), StoreChange::Put(doc(4, 40))).unwrap();
    let mut sub = s
        .feeds()
        .subscribe(Request::whole_table(Options::default()))
        .unwrap();
    let stale = Some(Version::of(Some(&doc(4, 41))));
    let answers = s.apply_many(vec![
        insert(3, 30),
        // Taken: a conflict carrying the stored document, nothing written.
        insert(2, 21),
        // A replace of a stored document on its current version (conflict=replace's
        // second write).
        (
            key(4),
            Some(Version::of(Some(&doc(4, 40)))),
            StoreChange::Put(doc(4, 42)),
        ),
        insert(1, 10),
        // A stale version: a conflict.
        (key(5), stale, StoreChange::Put(doc(5, 50))),
        // A key that cannot be encoded fails alone.
        (Datum::Null, None, StoreChange::Put(doc(6, 60))),
        (key(7), None, StoreChange::Delete),
    ]);
    assert_eq!(answers.len(), 7);
    let ticket = match &answers[0] {
        Ok(Applied::Done((None, Some(d), Some(t)))) if *d == doc(3, 30) => *t,
        a => panic!("{a:?}"),
    };
    assert!(matches!(&answers[1], Ok(Applied::Conflict(Some(d))) if *d == doc(2, 20)));
    assert!(matches!(&answers[2],
        Ok(Applied::Done((Some(o), Some(n), Some(t)))) if *o == doc(4, 40) && *n == doc(4, 42) && *t == ticket));
    assert!(matches!(&answers[3], Ok(Applied::Done((None, Some(_), Some(t)))) if *t == ticket));
    assert!(matches!(&answers[4], Ok(Applied::Conflict(None))));
    assert!(matches!(&answers[5], Err(StoreError::Key(_))));
    assert!(matches!(&answers[6], Ok(Applied::Done((None, None, None)))));
    // One ticket for the chunk, and it was the commit's only one.
    assert_eq!(s.commit.last_ticket(), ticket);
    assert_eq!(s.count(), 4);
    for (id, v) in [(1, 10), (2, 20), (3, 30), (4, 42)] {
        assert_eq!(s.get(&key(id)).unwrap(), Some(doc(id, v)), "{id}");
    }
    assert!(s.get(&key(5)).unwrap().is_none());
    assert_eq!(indexed(&s, &idx, 0, 100), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(indexed(&s, &idx, 40, 41), Vec::<f64>::new());
    // Feed events in the operations' order, the replaced document's old value with it.
    let mut events = Vec::new();
    while let Some(d) = sub.next_doc() {
        events.push(d.unwrap().to_json_string());
    }
    assert_eq!(
        events,
        vec![
            r#"{"new_val":{"id":3,"v":30},"old_val":null}"#,
            r#"{"new_val":{"id":4,"v":42},"old_val":{"id":4,"v":40}}"#,
            r#"{"new_val":{"id":1,"v":10},"old_val":null}"#,
        ]
    );
}

#[test]
fn a_repeated_key_is_applied_in_order() {
    let e: Arc<dyn Engine> = Arc::new(Memory::new());
    let (s, _) = shard_on(e);
    let answers = s.apply_many(vec![
        insert(1, 1),
        insert(1, 2),
        (key(1), None, StoreChange::Delete),
    ]);
    assert!(matches!(
        &answers[0],
        Ok(Applied::Done((None, Some(_), Some(_))))
    ));
    assert!(matches!(&answers[1], Ok(Applied::Conflict(Some(d))) if *d == doc(1, 1)));
    assert!(matches!(
        &answers[2],
        Ok(Applied::Done((Some(_), None, Some(_))))
    ));
    assert_eq!(s.count(), 0);
}

#[test]
fn a_failed_commit_fails_every_write_of_the_chunk_and_nothing_else() {
    let f = Arc::new(Faulty::new(Memory::new()));
    let e: Arc<dyn Engine> = f.clone();
    let (s, idx) = shard_on(e);
    s.write(&key(2), StoreChange::Put(doc(2, 20))).unwrap();
    f.fail_next_applies(1);
    let answers = s.apply_many(vec![insert(1, 10), insert(2, 21), insert(3, 30)]);
    let texts: Vec<String> = [&answers[0], &answers[2]]
        .iter()
        .map(|a| match a {
            Err(e) => e.to_string(),
            a => panic!("{a:?}"),
        })
        .collect();
    assert_eq!(texts[0], texts[1]);
    assert!(matches!(&answers[1], Ok(Applied::Conflict(Some(_)))));
    // Nothing of the chunk is visible: not in the engine, the cache, the count or
    // the index; the next chunk (one apply) goes through.
    assert_eq!(s.count(), 1);
    assert!(s.get(&key(1)).unwrap().is_none());
    assert_eq!(indexed(&s, &idx, 0, 100), vec![2.0]);
    let again = s.apply_many(vec![insert(1, 10), insert(3, 30)]);
    assert!(again.iter().all(|a| matches!(a, Ok(Applied::Done(_)))));
    assert_eq!(indexed(&s, &idx, 0, 100), vec![1.0, 2.0, 3.0]);
}

/// What the cache holds for `id`, without reading the engine.
fn cached(s: &Shard, id: u32) -> Option<Datum> {
    let k = datum::keys::encode_primary(&key(id)).unwrap();
    match s.cache.get(Shard::stripe_index(&k), &k) {
        Lookup::Hit(d) => Some(d),
        Lookup::Miss(_) => None,
    }
}

#[test]
fn a_chunk_caches_only_keys_the_cache_held_and_never_an_old_version() {
    let e: Arc<dyn Engine> = Arc::new(Memory::new());
    let (s, _) = shard_on(e);
    // Key 1 cached, then deleted; keys 2 and 4 stored and read (cached).
    s.write(&key(1), StoreChange::Put(doc(1, 10))).unwrap();
    assert!(s.get(&key(1)).unwrap().is_some());
    s.write(&key(1), StoreChange::Delete).unwrap();
    for id in [2, 4] {
        s.write(&key(id), StoreChange::Put(doc(id, id * 10)))
            .unwrap();
        assert_eq!(s.get(&key(id)).unwrap(), Some(doc(id, id * 10)));
    }
    assert_eq!(cached(&s, 2), Some(doc(2, 20)));
    let answers = s.apply_many(vec![
        // Over the deleted key, and a key never written: not cached.
        insert(1, 11),
        insert(3, 30),
        // A cached key replaced: its new document replaces the cached one.
        (
            key(2),
            Some(Version::of(Some(&doc(2, 20)))),
            StoreChange::Put(doc(2, 22)),
        ),
        // A cached key deleted: dropped.
        (key(4), None, StoreChange::Delete),
    ]);
    assert!(answers.iter().all(|a| matches!(a, Ok(Applied::Done(_)))));
    assert_eq!(cached(&s, 1), None);
    assert_eq!(cached(&s, 3), None);
    assert_eq!(cached(&s, 2), Some(doc(2, 22)));
    assert_eq!(cached(&s, 4), None);
    // Reads find the new documents in the engine, and cache them then.
    assert_eq!(s.get(&key(1)).unwrap(), Some(doc(1, 11)));
    assert_eq!(cached(&s, 1), Some(doc(1, 11)));
    assert_eq!(s.get(&key(3)).unwrap(), Some(doc(3, 30)));
    assert_eq!(s.get(&key(4)).unwrap(), None);
    // A second chunk over a key now cached keeps it cached, at its new version.
    let again = s.apply_many(vec![(
        key(1),
        Some(Version::of(Some(&doc(1, 11)))),
        StoreChange::Put(doc(1, 12)),
    )]);
    assert!(matches!(&again[0], Ok(Applied::Done(_))));
    assert_eq!(cached(&s, 1), Some(doc(1, 12)));
    assert_eq!(s.get(&key(1)).unwrap(), Some(doc(1, 12)));
}
