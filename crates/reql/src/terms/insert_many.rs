//! `insert` of many documents (an array or a stream) without a write hook: the
//! documents are validated in order and their first writes applied a chunk at a time
//! (`Table::apply_all`), so that a replicated table proposes a chunk's writes together
//! instead of waiting for each commit before proposing the next, and a local one commits
//! them as one storage batch per shard (`store::Shard::apply_many`); each document's
//! outcome is then recorded in order, as inserting one by one records it.
//!
//! Invariants: a chunk holds at most `CHUNK` documents and distinct primary keys (a
//! repeated key closes the chunk, so the later document sees the earlier one's write,
//! as one by one); a document whose first write found a stored document goes on as
//! `write_doc` goes on after a conflict (the conflict option decides); every document is
//! checked exactly as `insert`'s one-by-one path checks it (`insert_doc`,
//! `check_storable`), with the same errors; the interruption flag is read before each
//! chunk is written.

use std::collections::HashSet;

use datum::{Datum, Version};

use crate::access::{Change, Durability, Table};
use crate::error::{ErrorKind, ReqlError, Result};
use crate::eval::Ev;
use crate::terms::write::{
    check_storable, insert_change, insert_doc, member, Conflict, ReturnChanges, Stats,
};
use crate::write_op::{write_doc, Applied, WriteOp};

/// The most documents written together.
pub const CHUNK: usize = 256;

/// The documents of one `insert` waiting to be written.
pub(super) struct Chunks<'a> {
    ev: &'a Ev<'a>,
    t: &'a dyn Table,
    rc: ReturnChanges,
    dur: Durability,
    conflict: &'a Conflict,
    /// Each document with its member under the primary key (`member`).
    pending: Vec<(Datum, Option<Datum>)>,
    /// The primary keys given in `pending` (`KeyId`).
    keys: HashSet<KeyId>,
}

/// A primary key as the chunk's duplicate check compares it: a string key by its own
/// text (shared, not copied: the common key of a bulk load, which printing as JSON
/// text cost 2k instructions a document), any other key by its JSON text. Two keys are
/// the same key exactly when their `KeyId`s are equal: a string never equals a
/// non-string key, and non-string keys print equal exactly when they are equal.
#[derive(PartialEq, Eq, Hash)]
enum KeyId {
    Str(datum::Str),
    Text(String),
}

impl KeyId {
    fn of(key: &Datum) -> KeyId {
        match key {
            Datum::String(s) => KeyId::Str(s.clone()),
            other => KeyId::Text(other.to_json_string()),
        }
    }
}

/// One document of a chunk, after validation.
enum Slot {
    /// Refused before any write (`Stats::invalid`), with its given key.
    Invalid(ReqlError, Option<Datum>),
    /// Not storable (`Stats::error`), under its key.
    Failed(ReqlError, Datum),
    /// The chunk's write number `usize`: the document under its key.
    Written(usize, Datum, Datum),
}

impl<'a> Chunks<'a> {
    pub(super) fn new(
        ev: &'a Ev<'a>,
        t: &'a dyn Table,
        rc: ReturnChanges,
        dur: Durability,
        conflict: &'a Conflict,
    ) -> Self {
        Chunks {
            ev,
            t,
            rc,
            dur,
            conflict,
            pending: Vec::new(),
            keys: HashSet::with_capacity(CHUNK),
        }
    }

    /// Adds `d`, writing the chunk first when `d` repeats one of its keys, and after
    /// when it is full.
    pub(super) fn push(&mut self, d: Datum, stats: &mut Stats) -> Result<()> {
        let given = member(&d, self.t.primary_key());
        if let Some(key) = &given {
            let id = KeyId::of(key);
            if self.keys.contains(&id) {
                self.flush(stats)?;
            }
            self.keys.insert(id);
        }
        self.pending.push((d, given));
        if self.pending.len() >= CHUNK {
            self.flush(stats)?;
        }
        Ok(())
    }

    /// Writes the pending documents and records their outcomes in order.
    pub(super) fn flush(&mut self, stats: &mut Stats) -> Result<()> {
        self.keys.clear();
        let docs = std::mem::take(&mut self.pending);
        if docs.is_empty() {
            return Ok(());
        }
        let (slots, ops) = self.validate(docs, stats);
        if self
            .ev
            .ctx
            .cancel
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(crate::interrupt::error());
        }
        let mut answers: Vec<Option<Result<Applied>>> = if ops.is_empty() {
            Vec::new()
        } else {
            self.t.apply_all(ops).into_iter().map(Some).collect()
        };
        for slot in slots {
            match slot {
                Slot::Invalid(e, key) => stats.invalid(&e, self.rc, self.old(&key).as_ref()),
                Slot::Failed(e, key) => stats.error(&e, self.rc, self.old(&Some(key)).as_ref()),
                Slot::Written(i, doc, key) => {
                    let answer = answers.get_mut(i).and_then(Option::take);
                    let answer = answer.unwrap_or_else(|| {
                        Err(crate::error::internal("A write was not answered."))
                    });
                    match self.finish(answer, &doc, &key) {
                        Ok((old, new)) => stats.record(old, new, self.rc),
                        // As one by one: the table out of reach ends the query.
                        Err(e) if e.kind == ErrorKind::Permission || e.unavailable => {
                            return Err(e)
                        }
                        Err(e) => stats.error(&e, self.rc, self.old(&Some(key)).as_ref()),
                    }
                }
            }
        }
        Ok(())
    }

    /// Each document's checks, in order, and the first write of those that pass: the
    /// document itself, on the condition that its key holds none.
    fn validate(
        &self,
        docs: Vec<(Datum, Option<Datum>)>,
        stats: &mut Stats,
    ) -> (Vec<Slot>, Vec<WriteOp>) {
        let mut slots = Vec::with_capacity(docs.len());
        let mut ops = Vec::with_capacity(docs.len());
        for (d, given) in docs {
            match insert_doc(self.t, d, given.clone(), stats) {
                Err(e) => slots.push(Slot::Invalid(e, given)),
                Ok((doc, key)) => match check_storable(&doc) {
                    Err(e) => slots.push(Slot::Failed(e, key)),
                    Ok(()) => {
                        slots.push(Slot::Written(ops.len(), doc.clone(), key.clone()));
                        ops.push(WriteOp {
                            key,
                            expect: Some(Version::of(None)),
                            change: Change::Put(doc),
                        });
                    }
                },
            }
        }
        (slots, ops)
    }

    /// A document's outcome from its first write's answer: done, or, when the key held
    /// a document, evaluated again against it as `write_doc` does.
    fn finish(
        &self,
        answer: Result<Applied>,
        doc: &Datum,
        key: &Datum,
    ) -> Result<(Option<Datum>, Option<Datum>)> {
        let (old, new, ticket) = match answer? {
            Applied::Done(old, new, ticket) => (old, new, ticket),
            Applied::Conflict(now) => {
                let ctx = self.ev.ctx.clone();
                let pk = self.t.primary_key();
                write_doc(self.ev.ctx, self.t, key, now, &mut |old| {
                    insert_change(&ctx, pk, key, doc, self.conflict, old)
                })?
            }
        };
        self.ev.ctx.note_write(ticket, self.dur);
        Ok((old, new))
    }

    /// The stored document under `key`, for an error's change with `return_changes:
    /// "always"` (as the one-by-one path reads it).
    fn old(&self, key: &Option<Datum>) -> Option<Datum> {
        match (key, self.rc) {
            (Some(k), ReturnChanges::Always) => self.t.get(k).ok().flatten(),
            _ => None,
        }
    }
}
