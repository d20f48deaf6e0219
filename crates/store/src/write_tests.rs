//! Unit tests of `write::plan`, the pure part of a write: the conflict decision, the
//! staged document and index writes, and the deltas, without an engine.

use super::*;
use crate::index::IndexFn;
use crate::unkeyed::{NoKeys, Unkeyed};
use storage::BatchOp;

/// Indexes field `v` (also `crate::write_many`'s tests').
pub(crate) struct Field;

impl IndexFn for Field {
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
        let v = doc.get("v").ok_or(NoKeys::Failed("no field".into()))?;
        datum::keys::encode_secondary(v)
            .map(|k| vec![k])
            .map_err(|_| NoKeys::Unkeyable(Unkeyed::of(v)))
    }
}

pub(crate) fn doc(id: u32, v: u32) -> Datum {
    datum::from_json_slice(format!("{{\"id\":{id},\"v\":{v}}}").as_bytes()).unwrap()
}

fn index() -> Vec<Arc<SecondaryIndex>> {
    vec![SecondaryIndex::new("i", Arc::new(Field), false, true)]
}

fn pk(id: u32) -> Vec<u8> {
    datum::keys::encode_primary(&Datum::Number(f64::from(id))).unwrap()
}

/// (space, is a put) of every staged op, in batch order.
fn ops(batch: &WriteBatch) -> Vec<(String, bool)> {
    batch
        .iter()
        .map(|op| match op {
            BatchOp::Put { space, .. } => (space.to_owned(), true),
            BatchOp::Delete { space, .. } => (space.to_owned(), false),
        })
        .collect()
}

#[test]
fn a_moved_version_is_a_conflict_and_stages_nothing() {
    let (idx, old) = (index(), doc(1, 5));
    let mut batch = WriteBatch::new();
    let stale = Some(Version::of(Some(&doc(1, 4))));
    let change = StoreChange::Put(doc(1, 6));
    let p = plan(&idx, "d", &pk(1), Some(&old), stale, change, &mut batch);
    assert!(matches!(p, Plan::Conflict));
    // An insert expects an absent key.
    let absent = Some(Version::ABSENT);
    let p = plan(
        &idx,
        "d",
        &pk(1),
        Some(&old),
        absent,
        StoreChange::Delete,
        &mut batch,
    );
    assert!(matches!(p, Plan::Conflict));
    assert!(batch.is_empty());
}

#[test]
fn keep_and_deleting_nothing_stage_nothing() {
    let idx = index();
    let mut batch = WriteBatch::new();
    let p = plan(
        &idx,
        "d",
        &pk(1),
        None,
        None,
        StoreChange::Delete,
        &mut batch,
    );
    assert!(matches!(p, Plan::Nothing));
    let old = doc(1, 5);
    let seen = Some(Version::of(Some(&old)));
    let p = plan(
        &idx,
        "d",
        &pk(1),
        Some(&old),
        seen,
        StoreChange::Keep,
        &mut batch,
    );
    assert!(matches!(p, Plan::Nothing));
    assert!(batch.is_empty());
}

#[test]
fn a_put_stages_the_document_and_its_entries() {
    let idx = index();
    let mut batch = WriteBatch::new();
    // Not shared with the caller, so the document can keep its stored text.
    let put = StoreChange::Put(doc(1, 5));
    let p = plan(
        &idx,
        "d",
        &pk(1),
        None,
        Some(Version::ABSENT),
        put,
        &mut batch,
    );
    let Plan::Write(s) = p else {
        panic!("not a write: {p:?}")
    };
    assert_eq!(s.new, Some(doc(1, 5)));
    assert_eq!(s.deltas[0].entries, 1);
    assert_eq!(ops(&batch), [("i".into(), true), ("d".into(), true)]);
    // The stored document is its canonical text, and the cache may keep it.
    let stored = batch.iter().find_map(|op| match op {
        BatchOp::Put {
            space: "d", value, ..
        } => Some(value.to_vec()),
        _ => None,
    });
    assert_eq!(stored.as_deref(), Some(&br#"{"id":1,"v":5}"#[..]));
    assert!(s.cached.is_some());
}

#[test]
fn a_changed_value_moves_the_entry_and_a_delete_removes_it() {
    let idx = index();
    let old = doc(1, 5);
    let mut batch = WriteBatch::new();
    let p = plan(
        &idx,
        "d",
        &pk(1),
        Some(&old),
        None,
        StoreChange::Put(doc(1, 6)),
        &mut batch,
    );
    let Plan::Write(s) = p else {
        panic!("not a write: {p:?}")
    };
    assert_eq!(s.deltas[0].entries, 0);
    // The old entry deleted and the new one put (index keys sort by value), then the doc.
    assert_eq!(
        ops(&batch),
        [("i".into(), false), ("i".into(), true), ("d".into(), true)]
    );
    let mut batch = WriteBatch::new();
    let p = plan(
        &idx,
        "d",
        &pk(1),
        Some(&old),
        None,
        StoreChange::Delete,
        &mut batch,
    );
    let Plan::Write(s) = p else {
        panic!("not a write: {p:?}")
    };
    assert_eq!((s.new.is_none(), s.deltas[0].entries), (true, -1));
    assert_eq!(ops(&batch), [("i".into(), false), ("d".into(), false)]);
}

#[test]
fn the_same_inputs_stage_the_same_writes() {
    let idx = index();
    let old = doc(1, 5);
    let run = || {
        let mut batch = WriteBatch::new();
        let change = StoreChange::Put(doc(1, 7));
        let p = plan(&idx, "d", &pk(1), Some(&old), None, change, &mut batch);
        (batch, matches!(p, Plan::Write(_)))
    };
    assert_eq!(run(), run());
}
