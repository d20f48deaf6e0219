//! Unit tests of `index`: entries, markers, truncation, backfill.

use super::*;
use crate::{GroupCommit, Shard, StoreChange};
use storage::{Engine, Memory};

/// Indexes field `v` (numbers and strings), multi over arrays when asked.
struct Field(bool);

impl IndexFn for Field {
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
        let v = doc.get("v").ok_or(NoKeys::Failed("no field".into()))?;
        let vals: Vec<Datum> = match (self.0, v) {
            (true, Datum::Array(a)) => a.to_vec(),
            _ => vec![v.clone()],
        };
        vals.iter()
            .map(|d| keys::encode_secondary(d).map_err(|_| NoKeys::Unkeyable(Unkeyed::of(v))))
            .collect()
    }
}

fn doc(id: f64, v: &str) -> Datum {
    datum::from_json_slice(format!("{{\"id\":{id},\"v\":{v}}}").as_bytes()).unwrap()
}

fn shard() -> Shard {
    let e: Arc<dyn Engine> = Arc::new(Memory::new());
    let gc = GroupCommit::start(e.clone());
    Shard::open(e, "t", gc).unwrap()
}

fn put(s: &Shard, id: f64, v: &str) {
    let d = doc(id, v);
    s.write(&Datum::Number(id), StoreChange::Put(d.clone()))
        .unwrap();
}

fn ids(s: &Shard, idx: &SecondaryIndex, lo: Bound<Datum>, hi: Bound<Datum>, rev: bool) -> Vec<f64> {
    s.index_docs(idx, &lo, &hi, rev)
        .unwrap()
        .map(|d| d.unwrap().get("id").unwrap().as_f64().unwrap())
        .collect()
}

#[test]
fn maintained_in_the_write_batch() {
    let s = shard();
    let idx = SecondaryIndex::new("i", Arc::new(Field(false)), false, true);
    s.add_index(idx.clone()).unwrap();
    put(&s, 1.0, "5");
    put(&s, 2.0, "3");
    put(&s, 3.0, "\"x\"");
    put(&s, 4.0, "null");
    let all = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, false);
    assert_eq!(all, vec![2.0, 1.0, 3.0]);
    put(&s, 1.0, "1");
    s.write(&Datum::Number(2.0), StoreChange::Delete).unwrap();
    let lo = Bound::Included(Datum::Number(0.0));
    let hi = Bound::Excluded(Datum::Number(10.0));
    assert_eq!(ids(&s, &idx, lo.clone(), hi.clone(), false), vec![1.0]);
    assert_eq!(s.index_count(&idx, &lo, &hi).unwrap(), 1);
    assert_eq!(
        ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, true),
        vec![3.0, 1.0]
    );
}

#[test]
fn multi_and_truncated_values() {
    let s = shard();
    let idx = SecondaryIndex::new("m", Arc::new(Field(true)), true, true);
    s.add_index(idx.clone()).unwrap();
    put(&s, 1.0, "[1,2,2]");
    put(&s, 2.0, "[2,3]");
    let two = Bound::Included(Datum::Number(2.0));
    assert_eq!(ids(&s, &idx, two.clone(), two, false), vec![1.0, 1.0, 2.0]);
    // Long strings sharing a prefix longer than the truncation come out in order.
    let s2 = shard();
    let t = SecondaryIndex::new("t", Arc::new(Field(false)), false, true);
    s2.add_index(t.clone()).unwrap();
    let long = |c: &str, n: u32| format!("\"{}{:03}\"", "a".repeat(300) + c, n);
    for (id, n) in [(1.0, 5), (2.0, 1), (3.0, 9), (4.0, 3)] {
        put(&s2, id, &long("", n));
    }
    put(&s2, 5.0, "\"b\"");
    assert_eq!(
        ids(&s2, &t, Bound::Unbounded, Bound::Unbounded, false),
        vec![2.0, 4.0, 1.0, 3.0, 5.0]
    );
    assert_eq!(
        ids(&s2, &t, Bound::Unbounded, Bound::Unbounded, true),
        vec![5.0, 3.0, 1.0, 4.0, 2.0]
    );
    let lo = Bound::Excluded(datum::from_json_slice(long("", 1).as_bytes()).unwrap());
    let hi = Bound::Included(datum::from_json_slice(long("", 5).as_bytes()).unwrap());
    assert_eq!(ids(&s2, &t, lo, hi, false), vec![4.0, 1.0]);
}

#[test]
fn entry_values_round_trip() {
    let doc = br#"{"id":1}"#;
    for whole in [None, Some(&[0x70u8, b'a', 0, 0][..])] {
        let v = EntryValue::encode(whole, doc);
        let p = EntryValue::parse(&v).unwrap();
        assert_eq!(p.whole, whole);
        assert_eq!(p.doc, Some(&doc[..]));
    }
    // Older entries: empty, or just the whole value.
    assert_eq!(EntryValue::parse(&[]).unwrap().doc, None);
    let old = EntryValue::parse(&[0x70, b'a', 0, 0]).unwrap();
    assert_eq!((old.whole, old.doc), (Some(&[0x70, b'a', 0, 0][..]), None));
    // A length past the end is damage, not a panic.
    assert!(EntryValue::parse(&[ENTRY_WITH_DOC, 0, 0, 0, 9, 1]).is_err());
    assert!(EntryValue::parse(&[ENTRY_WITH_DOC, 0]).is_err());
}

#[test]
fn entries_carry_their_documents() {
    let s = shard();
    let idx = SecondaryIndex::new("i", Arc::new(Field(false)), false, true);
    s.add_index(idx.clone()).unwrap();
    put(&s, 1.0, "5");
    put(&s, 2.0, "7");
    // Remove the primary copies behind the index's back: reads still find the
    // documents, so they come from the entries, not from primary-key lookups.
    let mut b = storage::WriteBatch::new();
    for id in [1.0, 2.0] {
        b.delete("t", keys::encode_primary(&Datum::Number(id)).unwrap());
    }
    s.engine.apply(b).unwrap();
    let all = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, false);
    assert_eq!(all, vec![1.0, 2.0]);
    // An update rewrites the copy even when the index value is unchanged.
    let d = datum::from_json_slice(br#"{"id":1,"v":5,"w":true}"#).unwrap();
    s.write(&Datum::Number(1.0), StoreChange::Put(d.clone()))
        .unwrap();
    let five = Bound::Included(Datum::Number(5.0));
    let got: Vec<Datum> = s
        .index_docs(&idx, &five, &five, false)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, vec![d]);
}

#[test]
fn entries_without_documents_are_still_read() {
    // Entries as written before they carried documents: empty values, and the whole
    // value alone for truncated keys.
    let s = shard();
    put(&s, 1.0, "5");
    put(&s, 2.0, "3");
    let long = format!("\"{}\"", "a".repeat(300));
    put(&s, 3.0, &long);
    let idx = SecondaryIndex::new("old", Arc::new(Field(false)), false, true);
    s.engine.create_space("old").unwrap();
    let mut b = storage::WriteBatch::new();
    for (id, v) in [(1.0, "5"), (2.0, "3"), (3.0, long.as_str())] {
        let pk = keys::encode_primary(&Datum::Number(id)).unwrap();
        let d = doc(id, v);
        for (k, whole) in idx.entry_keys(&pk, &d).0 {
            b.put("old", k, whole.unwrap_or_default());
        }
    }
    s.engine.apply(b).unwrap();
    let all = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, false);
    assert_eq!(all, vec![2.0, 1.0, 3.0]);
    let lo = Bound::Included(Datum::Number(4.0));
    assert_eq!(s.index_count(&idx, &lo, &Bound::Unbounded).unwrap(), 2);
    let hi = Bound::Excluded(Datum::str(&"a".repeat(299)));
    assert_eq!(s.index_count(&idx, &lo, &hi).unwrap(), 1);
}

#[test]
fn backfill_sees_current_documents() {
    let s = shard();
    for i in 0..1000 {
        put(&s, f64::from(i), &format!("{}", i % 10));
    }
    let idx = SecondaryIndex::new("b", Arc::new(Field(false)), false, false);
    s.add_index(idx.clone()).unwrap();
    // Writes after registration are maintained; the backfill must not undo them.
    s.write(&Datum::Number(5.0), StoreChange::Delete).unwrap();
    put(&s, 6.0, "100");
    s.build_index(&idx).unwrap();
    idx.set_ready();
    let all = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, false);
    assert_eq!(all.len(), 999);
    let hundred = Bound::Included(Datum::Number(100.0));
    assert_eq!(ids(&s, &idx, hundred.clone(), hundred, false), vec![6.0]);
    let six = Bound::Included(Datum::Number(6.0));
    assert_eq!(s.index_count(&idx, &six, &six).unwrap(), 99);
    assert_eq!(idx.progress(), 1.0);
    s.remove_index(&idx).unwrap();
    assert!(s.indexes.read().is_empty());
}

#[test]
fn unkeyable_values_have_counted_markers() {
    let e: Arc<dyn Engine> = Arc::new(Memory::new());
    let s = Arc::new(Shard::open(e.clone(), "t", GroupCommit::start(e.clone())).unwrap());
    put(&s, 1.0, "null");
    put(&s, 2.0, "{\"a\":1}");
    put(&s, 3.0, "5");
    let idx = SecondaryIndex::new("u", Arc::new(Field(false)), false, false);
    s.add_index(idx.clone()).unwrap();
    s.build_index(&idx).unwrap();
    idx.set_ready();
    let shards = [s.clone()];
    // Without the completion key the counts stay unknown (an older index).
    track_entries(&shards, &idx).unwrap();
    assert_eq!(idx.entry_count(), Some(1));
    assert_eq!(idx.unkeyed_counts(), None);
    assert!(!s.unkeyed_complete(&idx).unwrap());
    s.set_unkeyed_complete(&idx).unwrap();
    track_entries(&shards, &idx).unwrap();
    assert_eq!(idx.unkeyed_counts(), Some([1, 0, 1]));
    // Writes move documents into and out of the classes.
    put(&s, 3.0, "[{\"b\":2}]");
    put(&s, 1.0, "7");
    put(&s, 4.0, "null");
    put(&s, 5.0, "[1, null]");
    s.write(&Datum::Number(2.0), StoreChange::Delete).unwrap();
    let kept = idx.unkeyed_counts();
    assert_eq!(kept, Some([1, 1, 0]));
    assert_eq!(idx.entry_count(), Some(2));
    // A recount (a restart) finds the same, and entry reads never see markers.
    track_entries(&shards, &idx).unwrap();
    assert_eq!(idx.unkeyed_counts(), kept);
    assert_eq!(idx.entry_count(), Some(2));
    let all = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, false);
    assert_eq!(all, vec![5.0, 1.0]);
    let rev = ids(&s, &idx, Bound::Unbounded, Bound::Unbounded, true);
    assert_eq!(rev, vec![1.0, 5.0]);
    let min = Bound::Included(Datum::MinVal);
    assert_eq!(ids(&s, &idx, min, Bound::Unbounded, false), vec![5.0, 1.0]);
}
