//! Write terms: `insert`, `update`, `replace`, `delete`, with RethinkDB's write-result
//! objects (`inserted`, `replaced`, `unchanged`, `skipped`, `deleted`, `errors`,
//! `first_error`, `generated_keys`, `changes`).
//!
//! Each document is changed by one write operation (`write_op::write_doc`: evaluated
//! with no lock held, applied if the document is still the one it was computed from,
//! evaluated again if not); a failure on one document is counted in `errors` and does
//! not stop the others. Functions given to `update`/`replace` must be deterministic
//! unless `non_atomic` is set, as in RethinkDB: a non-deterministic function may run
//! more than once when the document changes under it.

use std::sync::Arc;

use datum::{Datum, Object, Str};
use proto::ql2::TermType as T;

use crate::access::{Change, Durability, Table};
use crate::error::{logic, ErrorKind, ReqlError, Result, WithFrame};
use crate::eval::{call, to_datum, Ev};
use crate::term::Term;
use crate::terms::db::parse_durability;
use crate::terms::insert_many::Chunks;
use crate::terms::object::merge_datum;
use crate::terms::write_hook::Hook;
use crate::value::Val;
use crate::write_op::write_doc;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum ReturnChanges {
    No,
    Yes,
    Always,
}

#[derive(Default)]
pub(super) struct Stats {
    inserted: u64,
    replaced: u64,
    unchanged: u64,
    skipped: u64,
    deleted: u64,
    errors: u64,
    first_error: Option<String>,
    /// The first error of a document rejected before the write (`insert`: not an
    /// object, a bad primary key). RethinkDB validates the whole batch first and merges
    /// those errors ahead of the write's, so this one wins `first_error`.
    first_invalid: Option<String>,
    generated_keys: Vec<Datum>,
    changes: Vec<Datum>,
}

/// Whether a write left the document as it was: equal as values and printed alike
/// (RethinkDB counts it `unchanged` only then). Two objects that both keep their text
/// are that exactly when the texts are the same bytes (the text is what printing
/// gives, and one text decodes to one value), so neither is decoded: the old document
/// a write hands back is the cache's copy re-read under the key's lock, with no map
/// yet, and decoding it only for this compare was about a fifth of a YCSB update's
/// instructions (docs/performance.md, eleventh session).
fn unchanged(old: &Datum, new: &Datum) -> bool {
    fn text(d: &Datum) -> Option<&[u8]> {
        d.as_object().and_then(Object::raw_json)
    }
    if let (Some(a), Some(b)) = (text(old), text(new)) {
        return a == b;
    }
    old == new && old.to_json_string() == new.to_json_string()
}

impl Stats {
    pub(super) fn error(&mut self, e: &ReqlError, rc: ReturnChanges, old: Option<&Datum>) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.message.clone());
        }
        self.push_error_change(e, rc, old);
    }

    /// An error found while validating a document, before any write.
    pub(super) fn invalid(&mut self, e: &ReqlError, rc: ReturnChanges, old: Option<&Datum>) {
        self.errors += 1;
        if self.first_invalid.is_none() {
            self.first_invalid = Some(e.message.clone());
        }
        self.push_error_change(e, rc, old);
    }

    fn push_error_change(&mut self, e: &ReqlError, rc: ReturnChanges, old: Option<&Datum>) {
        if rc == ReturnChanges::Always {
            let old = old.cloned().unwrap_or(Datum::Null);
            self.changes
                .push(change_obj(old.clone(), old, Some(&e.message)));
        }
    }

    pub(super) fn record(&mut self, old: Option<Datum>, new: Option<Datum>, rc: ReturnChanges) {
        let changed = match (&old, &new) {
            (None, Some(_)) => {
                self.inserted += 1;
                true
            }
            (Some(o), Some(n)) if unchanged(o, n) => {
                self.unchanged += 1;
                false
            }
            (Some(_), Some(_)) => {
                self.replaced += 1;
                true
            }
            (Some(_), None) => {
                self.deleted += 1;
                true
            }
            (None, None) => {
                self.skipped += 1;
                false
            }
        };
        if rc == ReturnChanges::Always || (rc == ReturnChanges::Yes && changed) {
            self.changes.push(change_obj(
                old.unwrap_or(Datum::Null),
                new.unwrap_or(Datum::Null),
                None,
            ));
        }
    }

    fn into_datum(self, rc: ReturnChanges) -> Datum {
        let mut m = Object::new();
        let n = |x: u64| Datum::Number(x as f64);
        m.insert(Str::from("inserted"), n(self.inserted));
        m.insert(Str::from("replaced"), n(self.replaced));
        m.insert(Str::from("unchanged"), n(self.unchanged));
        m.insert(Str::from("skipped"), n(self.skipped));
        m.insert(Str::from("deleted"), n(self.deleted));
        m.insert(Str::from("errors"), n(self.errors));
        if let Some(e) = self.first_invalid.or(self.first_error) {
            m.insert(Str::from("first_error"), Datum::from(e));
        }
        if !self.generated_keys.is_empty() {
            m.insert(
                Str::from("generated_keys"),
                Datum::array(self.generated_keys),
            );
        }
        if rc != ReturnChanges::No {
            m.insert(Str::from("changes"), Datum::array(self.changes));
        }
        Datum::object(m)
    }
}

fn change_obj(old: Datum, new: Datum, err: Option<&str>) -> Datum {
    let mut m = Object::new();
    m.insert(Str::from("old_val"), old);
    m.insert(Str::from("new_val"), new);
    if let Some(e) = err {
        m.insert(Str::from("error"), Datum::str(e));
    }
    Datum::object(m)
}

fn return_changes(ev: &Ev) -> Result<ReturnChanges> {
    if ev.term.optarg("return_vals").is_some() {
        return Err(logic(
            "Error: encountered obsolete optarg `return_vals`.  Use `return_changes` instead.",
        ));
    }
    Ok(match ev.opt_datum("return_changes")? {
        None | Some(Datum::Bool(false)) => ReturnChanges::No,
        Some(Datum::Bool(true)) => ReturnChanges::Yes,
        Some(Datum::String(s)) if &*s == "always" => ReturnChanges::Always,
        Some(d) => return Err(crate::eval::type_error("BOOL", &d)).at_opt("return_changes"),
    })
}

fn durability(ev: &Ev, t: &dyn Table) -> Result<Durability> {
    match ev.opt_datum("durability")? {
        Some(d) => parse_durability(&d).at_opt("durability"),
        None => Ok(ev.ctx.durability.unwrap_or(t.durability())),
    }
}

/// Fails when a value cannot be stored (extrema, stray literals).
/// The longest array a stored document may hold, whatever the query's `array_limit`
/// (RethinkDB's fixed limit for disk writes).
const DISK_ARRAY_LIMIT: usize = 100_000;

pub(super) fn check_storable(d: &Datum) -> Result<()> {
    check_storable_at(d, 0)
}

/// `check_storable` of a value inside `depth` arrays and objects: nesting past
/// `MAX_NESTING` fails before it can recurse further.
fn check_storable_at(d: &Datum, depth: usize) -> Result<()> {
    // A document still in its text, with no array or pseudo-type inside and shallow
    // enough, passes every check below: its map is not built to find that out.
    if let Datum::Object(o) = d {
        if o.plain_text_levels()
            .is_some_and(|n| depth + n <= datum::MAX_NESTING)
        {
            return Ok(());
        }
    }
    if depth >= datum::MAX_NESTING && matches!(d, Datum::Array(_) | Datum::Object(_)) {
        return Err(crate::terms::control::nesting_error());
    }
    match d {
        Datum::MinVal | Datum::MaxVal => Err(logic(
            "`r.minval` and `r.maxval` cannot be written to disk.",
        )),
        Datum::Array(a) if a.len() > DISK_ARRAY_LIMIT => Err(crate::error::resource(
            "Array too large for disk writes (limit 100,000 elements).",
        )),
        Datum::Array(a) => a.iter().try_for_each(|x| check_storable_at(x, depth + 1)),
        Datum::Object(o) => {
            if d.reql_type() == Some("LITERAL") {
                return Err(crate::terms::object::stray_literal());
            }
            o.values().try_for_each(|x| check_storable_at(x, depth + 1))
        }
        _ => Ok(()),
    }
}

pub(super) enum Conflict {
    Error,
    Replace,
    Update,
    Func(Val),
}

/// INSERT.
pub fn insert(ev: &Ev) -> Result<Val> {
    let t = ev.table(0)?;
    let rc = return_changes(ev)?;
    let dur = durability(ev, t.as_ref())?;
    let hook = Hook::for_write(ev, t.as_ref())?;
    let conflict = match ev.opt("conflict")? {
        None => Conflict::Error,
        Some(Val::Func(f)) => {
            if f.params.len() != 3 {
                return Err(logic(
                    "The conflict function passed to `insert` should expect 3 arguments.",
                ));
            }
            if !is_deterministic(&f.body) {
                return Err(logic(
                    "The conflict function passed to `insert` must be deterministic.",
                ));
            }
            Conflict::Func(Val::Func(f))
        }
        // RethinkDB's `parse_conflict_optarg`: `as_str`, then `rfail_target` on the
        // optarg, so both failures are charged to it.
        Some(v) => {
            let d = ev.to_datum(v).at_opt("conflict")?;
            match crate::eval::expect_str(&d).at_opt("conflict")? {
                "error" => Conflict::Error,
                "replace" => Conflict::Replace,
                "update" => Conflict::Update,
                other => {
                    return Err(logic(format!(
                        "Conflict option `{other}` unrecognized (options are \"error\", \"replace\" and \"update\")."
                    )))
                    .at_opt("conflict")
                }
            }
        }
    };
    let docs = ev.arg(1)?;
    let mut stats = Stats::default();
    let one = |d: Datum, stats: &mut Stats| -> Result<()> {
        let key = member(&d, t.primary_key());
        let old_of = |key: &Option<Datum>| match (key, rc) {
            (Some(k), ReturnChanges::Always) => t.get(k).ok().flatten(),
            _ => None,
        };
        let (doc, key) = match insert_doc(t.as_ref(), d, key.clone(), stats) {
            Ok(v) => v,
            Err(e) => {
                stats.invalid(&e, rc, old_of(&key).as_ref());
                return Ok(());
            }
        };
        let r = insert_one(ev, t.as_ref(), doc, &key, &conflict, dur, hook.as_ref());
        match r {
            Ok((old, new)) => stats.record(old, new, rc),
            Err(e) if e.kind == ErrorKind::Permission || e.unavailable => return Err(e),
            Err(e) => stats.error(&e, rc, old_of(&Some(key)).as_ref()),
        }
        Ok(())
    };
    // Without a write hook, many documents are written in chunks (`insert_many`).
    let mut many = hook
        .is_none()
        .then(|| Chunks::new(ev, t.as_ref(), rc, dur, &conflict));
    match (docs, &mut many) {
        (Val::Datum(Datum::Array(items)), Some(many)) => {
            for d in items.iter() {
                many.push(d.clone(), &mut stats)?;
            }
            many.flush(&mut stats)?;
        }
        (Val::Datum(Datum::Array(items)), None) => {
            for d in items.iter() {
                one(d.clone(), &mut stats)?;
            }
        }
        (Val::Datum(d), _) => one(d, &mut stats)?,
        (Val::Single(s), _) => one(s.doc, &mut stats)?,
        (other, many) => {
            let seq = ev.to_seq(other).at(1)?;
            for d in seq.stream {
                match (d, &mut *many) {
                    (Ok(d), Some(many)) => many.push(d, &mut stats)?,
                    (Ok(d), None) => one(d, &mut stats)?,
                    // The documents before the stream's error are written first.
                    (Err(e), Some(many)) => {
                        many.flush(&mut stats)?;
                        return Err(e);
                    }
                    (Err(e), None) => return Err(e),
                }
            }
            if let Some(many) = many {
                many.flush(&mut stats)?;
            }
        }
    }
    Ok(Val::Datum(stats.into_datum(rc)))
}

/// Member `key` of an object, read without building a map that is not built yet (a
/// document inserted from the query's text).
pub(super) fn member(d: &Datum, key: &str) -> Option<Datum> {
    d.as_object().and_then(|o| o.field(key))
}

/// Validates one document to insert, before any write (RethinkDB's `batched_insert`
/// checks): an object, its primary key (generated when missing) encodable. `given` is
/// the document's member under the primary key (`member`). Returns the document to
/// store and its key.
pub(super) fn insert_doc(
    t: &dyn Table,
    d: Datum,
    given: Option<Datum>,
    stats: &mut Stats,
) -> Result<(Datum, Datum)> {
    let Datum::Object(o) = &d else {
        return Err(logic(format!(
            "Expected type OBJECT but found {}.",
            d.type_name()
        )));
    };
    let pk = t.primary_key();
    let (doc, key) = match given {
        Some(k) => (d.clone(), k),
        None => {
            let k = Datum::from(uuid::Uuid::new_v4().to_string());
            let mut m = (**o).clone();
            m.insert(Str::from(pk), k.clone());
            stats.generated_keys.push(k.clone());
            (Datum::object(m), k)
        }
    };
    datum::keys::check_primary(&key).map_err(|e| logic(e.message().to_string()))?;
    Ok((doc, key))
}

/// Writes one validated document (`insert_doc`) under `key`.
fn insert_one(
    ev: &Ev,
    t: &dyn Table,
    doc: Datum,
    key: &Datum,
    conflict: &Conflict,
    dur: Durability,
    hook: Option<&Hook>,
) -> Result<(Option<Datum>, Option<Datum>)> {
    check_storable(&doc)?;
    let pk = t.primary_key();
    let ctx = ev.ctx.clone();
    let (old, new, ticket) = write_doc(ev.ctx, t, key, None, &mut |old| {
        let change = insert_change(&ctx, pk, key, &doc, conflict, old)?;
        match hook {
            Some(h) => h.apply(&ctx, key, old, change),
            None => Ok(change),
        }
    })?;
    ev.ctx.note_write(ticket, dur);
    Ok((old, new))
}

/// What an insert of `doc` under `key` does to the stored document `old`.
pub(super) fn insert_change(
    ctx: &Arc<crate::ctx::QueryCtx>,
    pk: &str,
    key: &Datum,
    doc: &Datum,
    conflict: &Conflict,
    old: Option<&Datum>,
) -> Result<Change> {
    match old {
        None => Ok(Change::Put(doc.clone())),
        Some(old) => match conflict {
            Conflict::Error => Err(logic(format!(
                "Duplicate primary key `{}`:\n{}\n{}",
                pk,
                old.to_pretty_string(),
                doc.to_pretty_string()
            ))),
            Conflict::Replace => Ok(Change::Put(doc.clone())),
            Conflict::Update => Ok(Change::Put(merge_datum(old, doc)?)),
            Conflict::Func(f) => {
                let r = call(ctx, f, vec![key.clone(), old.clone(), doc.clone()])?;
                let r = to_datum(ctx, r)?;
                match r {
                    Datum::Null => Ok(Change::Delete),
                    Datum::Object(_) => {
                        check_storable(&r)?;
                        if r.get(pk) != Some(key) {
                            return Err(pk_changed(pk, old, &r));
                        }
                        Ok(Change::Put(r))
                    }
                    other => Err(logic(format!(
                        "Inserted value must be an OBJECT (got {}):\n{}",
                        other.type_name(),
                        other.to_pretty_string()
                    ))),
                }
            }
        },
    }
}

fn pk_changed(pk: &str, old: &Datum, new: &Datum) -> ReqlError {
    logic(format!(
        "Primary key `{}` cannot be changed (`{}` -> `{}`).",
        pk,
        old.to_pretty_string(),
        new.to_pretty_string()
    ))
}

/// RethinkDB's checks of a document about to be stored under `key` (a write hook's
/// result): an object, storable, with the same primary key.
pub(crate) fn check_new_doc(pk: &str, key: &Datum, old: Option<&Datum>, new: &Datum) -> Result<()> {
    if !matches!(new, Datum::Object(_)) {
        return Err(logic(format!(
            "Inserted value must be an OBJECT (got {}):\n{}",
            new.type_name(),
            new.to_pretty_string()
        )));
    }
    check_storable(new)?;
    match new.get(pk) {
        None => Err(logic(format!(
            "Inserted object must have primary key `{}`:\n{}",
            pk,
            new.to_pretty_string()
        ))),
        Some(k) if k != key => Err(pk_changed(pk, old.unwrap_or(&Datum::Null), new)),
        Some(_) => Ok(()),
    }
}

/// The documents a write term applies to: (table, items).
enum Target {
    One(Arc<dyn Table>, Datum, Datum),
    Many(Arc<dyn Table>, crate::value::DatumStream),
}

impl Target {
    fn table(&self) -> &Arc<dyn Table> {
        match self {
            Target::One(t, _, _) | Target::Many(t, _) => t,
        }
    }
}

fn target(ev: &Ev) -> Result<Target> {
    match ev.arg(0)? {
        Val::Single(s) => Ok(Target::One(s.table, s.key, s.doc)),
        Val::Table(t) => {
            let s = crate::eval::to_seq(Val::Table(t.clone()))?;
            Ok(Target::Many(t, s.stream))
        }
        Val::Seq(s) if s.table.is_some() => match s.table.clone() {
            Some(t) => Ok(Target::Many(t, s.stream)),
            None => Err(logic("Expected a selection.")),
        },
        other => Err(logic(format!(
            "Expected type SELECTION but found {}:\n{}",
            other.kind_name(),
            crate::eval::describe(&other)
        )))
        .at(0),
    }
}

/// Collects the documents of a target (keys and current values).
fn for_each_doc(
    ev: &Ev,
    target: Target,
    mut f: impl FnMut(&Arc<dyn Table>, Datum, Option<Datum>) -> Result<()>,
) -> Result<()> {
    match target {
        Target::One(t, key, doc) => {
            let d = if matches!(doc, Datum::Null) {
                None
            } else {
                Some(doc)
            };
            f(&t, key, d)
        }
        Target::Many(t, stream) => {
            let _ = ev;
            for d in stream {
                let d = d?;
                let key = d.get(t.primary_key()).cloned().unwrap_or(Datum::Null);
                f(&t, key, Some(d))?;
            }
            Ok(())
        }
    }
}

/// True when a function body can be re-run with the same result (no reads of tables, no
/// randomness, no JavaScript or HTTP).
pub fn is_deterministic(t: &Term) -> bool {
    let bad = matches!(
        t.tt,
        T::JAVASCRIPT
            | T::HTTP
            | T::RANDOM
            | T::TABLE
            | T::DB
            | T::GET
            | T::GET_ALL
            | T::BETWEEN
            | T::INSERT
            | T::UPDATE
            | T::REPLACE
            | T::DELETE
            | T::SAMPLE
    ) || (t.tt == T::UUID && t.args.is_empty());
    !bad && t.args.iter().all(|a| is_deterministic(a))
        && t.optargs.iter().all(|(_, a)| is_deterministic(a))
}

/// Before `r.args` is expanded in update/replace: its argument must be deterministic
/// unless `non_atomic` is literally true (RethinkDB checks the unexpanded term).
pub fn check_args_deterministic(term: &Term) -> Result<()> {
    let non_atomic = term
        .optarg("non_atomic")
        .is_some_and(|t| matches!(t.datum, Datum::Bool(true)) && t.tt == T::DATUM);
    if non_atomic {
        return Ok(());
    }
    match term.args.iter().skip(1).position(|a| !is_deterministic(a)) {
        Some(i) => Err(logic(
            "Could not prove argument deterministic.  Maybe you want to use the non_atomic flag?",
        ))
        .at(i + 1),
        None => Ok(()),
    }
}

/// The function or value argument of update/replace, checked for determinism.
fn mutation_arg(ev: &Ev) -> Result<Val> {
    let non_atomic = ev.opt_bool("non_atomic", false)?;
    if !non_atomic {
        if let Some(t) = ev.term.args.get(1) {
            if !is_deterministic(t) {
                return Err(logic(
                    "Could not prove argument deterministic.  Maybe you want to use the non_atomic flag?",
                ))
                .at(1);
            }
        }
    }
    match ev.term.args.get(1) {
        Some(t) if t.tt != T::FUNC && t.tt != T::DATUM => Ok(Val::Datum(Datum::Null)),
        _ => ev.arg(1),
    }
}

/// The new value (update patch or replacement) for one document. A non-function,
/// non-literal argument is evaluated per document, so its errors count per document.
/// RethinkDB calls the function with `LITERAL_OK` (update and replace alike); a
/// non-function argument may hold `r.literal` for update only (`literal_ok`: RethinkDB
/// rewrites update into a replace whose function evaluates it with that flag).
fn patch_of(ev: &Ev, f: &Val, old: &Datum, literal_ok: bool) -> Result<Datum> {
    let call_it = |f: &Val| -> Result<Datum> {
        let r = crate::eval::call_literal_ok(ev.ctx, f, vec![old.clone()])?;
        to_datum(ev.ctx, r)
    };
    if let Some(t) = ev.term.args.get(1) {
        if t.tt != T::FUNC && t.tt != T::DATUM {
            let v = if literal_ok {
                crate::eval::eval_literal_ok(ev.ctx, ev.env, t)?
            } else {
                crate::eval::eval(ev.ctx, ev.env, t)?
            };
            return match v {
                Val::Func(_) => call_it(&v),
                other => to_datum(ev.ctx, other),
            };
        }
    }
    match f {
        Val::Func(_) => call_it(f),
        Val::Datum(d) => Ok(d.clone()),
        _ => Err(logic("Expected a function or an object.")),
    }
}

/// Applies the table's write hook (if any) to one document's change.
fn hooked(
    ev: &Ev,
    hook: Option<&Hook>,
    key: &Datum,
    old: Option<&Datum>,
    change: Change,
) -> Result<Change> {
    match hook {
        Some(h) => h.apply(ev.ctx, key, old, change),
        None => Ok(change),
    }
}

/// A single-document update/delete of a missing document: RethinkDB still runs the
/// hook (with `old_val` and `new_val` null), which may fail.
fn missing_doc(ev: &Ev, hook: Option<&Hook>, key: &Datum) -> Result<()> {
    hooked(ev, hook, key, None, Change::Keep).map(|_| ())
}

/// UPDATE.
pub fn update(ev: &Ev) -> Result<Val> {
    let f = mutation_arg(ev)?;
    let rc = return_changes(ev)?;
    let target = target(ev)?;
    let hook = Hook::for_write(ev, target.table().as_ref())?;
    let mut stats = Stats::default();
    for_each_doc(ev, target, |t, key, doc| {
        if doc.is_none() {
            match missing_doc(ev, hook.as_ref(), &key) {
                Ok(()) => stats.record(None, None, rc),
                Err(e) => stats.error(&e, rc, None),
            }
            return Ok(());
        }
        let dur = durability(ev, t.as_ref())?;
        let pk = t.primary_key().to_string();
        let change_of = |old: Option<&Datum>| -> Result<Change> {
            let Some(old) = old else {
                return Ok(Change::Keep);
            };
            let patch = patch_of(ev, &f, old, true)?;
            if matches!(patch, Datum::Null) {
                return Ok(Change::Keep);
            }
            if !matches!(patch, Datum::Object(_)) {
                return Err(logic(format!(
                    "Inserted value must be an OBJECT (got {}):\n{}",
                    patch.type_name(),
                    patch.to_pretty_string()
                )));
            }
            // Plain values merged into the stored text, without decoding it (YCSB's
            // update); anything else by merging the maps.
            let plain = match (old, &patch) {
                (Datum::Object(o), Datum::Object(p)) => o.with_plain_members(p),
                _ => None,
            };
            let new = match plain {
                Some(new) => new,
                None => merge_datum(old, &patch)?,
            };
            check_storable(&new)?;
            // Read from the documents' text when they keep it: `get` would build both
            // maps, which the plain merge above just avoided.
            let key_of = |d: &Datum| d.as_object().and_then(|o| o.field(&pk));
            if key_of(&new) != key_of(old) {
                return Err(pk_changed(&pk, old, &new));
            }
            Ok(Change::Put(new))
        };
        let r = write_doc(ev.ctx, t.as_ref(), &key, doc.clone(), &mut |old| {
            hooked(ev, hook.as_ref(), &key, old, change_of(old)?)
        });
        match r {
            Ok((old, new, ticket)) => {
                ev.ctx.note_write(ticket, dur);
                stats.record(old, new, rc)
            }
            Err(e) if matches!(e.kind, ErrorKind::Internal | ErrorKind::Permission) => {
                return Err(e)
            }
            Err(e) if e.unavailable => return Err(e),
            Err(e) => stats.error(&e, rc, doc.as_ref()),
        }
        Ok(())
    })?;
    Ok(Val::Datum(stats.into_datum(rc)))
}

/// REPLACE.
pub fn replace(ev: &Ev) -> Result<Val> {
    let f = mutation_arg(ev)?;
    let rc = return_changes(ev)?;
    let target = target(ev)?;
    let hook = Hook::for_write(ev, target.table().as_ref())?;
    let mut stats = Stats::default();
    for_each_doc(ev, target, |t, key, doc| {
        let dur = durability(ev, t.as_ref())?;
        let pk = t.primary_key().to_string();
        let change_of = |old: Option<&Datum>| -> Result<Change> {
            let cur = old.cloned().unwrap_or(Datum::Null);
            let new = patch_of(ev, &f, &cur, false)?;
            if matches!(new, Datum::Null) {
                return Ok(if old.is_some() {
                    Change::Delete
                } else {
                    Change::Keep
                });
            }
            if !matches!(new, Datum::Object(_)) {
                return Err(logic(format!(
                    "Inserted value must be an OBJECT (got {}):\n{}",
                    new.type_name(),
                    new.to_pretty_string()
                )));
            }
            let new = crate::terms::object::merge_datum(&Datum::Null, &new)?;
            check_storable(&new)?;
            match new.get(&pk) {
                None => Err(logic(format!(
                    "Inserted object must have primary key `{}`:\n{}",
                    pk,
                    new.to_pretty_string()
                ))),
                Some(k) if *k != key => Err(match old {
                    Some(o) => pk_changed(&pk, o, &new),
                    None => pk_changed(&pk, &Datum::Null, &new),
                }),
                Some(_) => Ok(Change::Put(new)),
            }
        };
        let r = write_doc(ev.ctx, t.as_ref(), &key, doc.clone(), &mut |old| {
            hooked(ev, hook.as_ref(), &key, old, change_of(old)?)
        });
        match r {
            Ok((old, new, ticket)) => {
                ev.ctx.note_write(ticket, dur);
                stats.record(old, new, rc)
            }
            Err(e) if matches!(e.kind, ErrorKind::Internal | ErrorKind::Permission) => {
                return Err(e)
            }
            Err(e) if e.unavailable => return Err(e),
            Err(e) => stats.error(&e, rc, doc.as_ref()),
        }
        Ok(())
    })?;
    Ok(Val::Datum(stats.into_datum(rc)))
}

/// DELETE.
pub fn delete(ev: &Ev) -> Result<Val> {
    let rc = return_changes(ev)?;
    let target = target(ev)?;
    let hook = Hook::for_write(ev, target.table().as_ref())?;
    let mut stats = Stats::default();
    for_each_doc(ev, target, |t, key, doc| {
        if doc.is_none() {
            match missing_doc(ev, hook.as_ref(), &key) {
                Ok(()) => stats.record(None, None, rc),
                Err(e) => stats.error(&e, rc, None),
            }
            return Ok(());
        }
        let dur = durability(ev, t.as_ref())?;
        let r = write_doc(ev.ctx, t.as_ref(), &key, doc.clone(), &mut |old| {
            let change = if old.is_some() {
                Change::Delete
            } else {
                Change::Keep
            };
            hooked(ev, hook.as_ref(), &key, old, change)
        });
        match r {
            Ok((old, new, ticket)) => {
                ev.ctx.note_write(ticket, dur);
                stats.record(old, new, rc);
            }
            // The table out of reach ends the query (see `ReqlError::unavailable`).
            Err(e) if e.unavailable => return Err(e),
            // A refused delete (a system table's rule) is counted, as in RethinkDB.
            Err(e) if e.kind == ErrorKind::OpFailed || Hook::is_hook_error(&e) => {
                stats.error(&e, rc, doc.as_ref())
            }
            Err(e) => return Err(e),
        }
        Ok(())
    })?;
    Ok(Val::Datum(stats.into_datum(rc)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTable;
    use crate::value::Env;

    /// `table.insert(docs)` on `table`.
    fn insert_into(table: &Arc<MemTable>, docs: Datum) -> Result<Datum> {
        let ctx = Arc::new(crate::ctx::QueryCtx::new(
            Arc::new(crate::access::NoTables {
                message: "no tables",
                connect: false,
            }),
            "test".into(),
            0.0,
        ));
        let term = Term {
            tt: T::INSERT,
            args: vec![Term::datum(Datum::Null), Term::datum(docs)],
            optargs: Vec::new(),
            datum: Datum::Null,
            path: Default::default(),
        };
        let env = Env::default();
        let ev = Ev::new(&ctx, &env, &term);
        let t: Arc<dyn Table> = table.clone();
        *ev.arg0.borrow_mut() = Some(Val::Table(t));
        insert(&ev).and_then(|v| ev.to_datum(v))
    }

    /// Documents with text are compared by their text, others as values and printed.
    #[test]
    fn unchanged_by_text_or_by_value() {
        let kept = |s: &str| datum::from_json_owned(s.as_bytes().to_vec()).expect("json");
        let a = kept(r#"{"a":1,"id":"k"}"#);
        assert!(a.as_object().and_then(Object::raw_json).is_some());
        assert!(unchanged(&a, &kept(r#"{"a":1,"id":"k"}"#)));
        assert!(!unchanged(&a, &kept(r#"{"a":2,"id":"k"}"#)));
        // Without text (a built map): equal values that print alike.
        let mut built = datum::from_json_slice(br#"{"a":1,"id":"k"}"#).expect("json");
        if let Datum::Object(o) = &mut built {
            Arc::make_mut(o).insert("a".into(), Datum::Number(1.0));
        }
        assert!(built.as_object().and_then(Object::raw_json).is_none());
        assert!(unchanged(&a, &built));
        let mut other = built.clone();
        if let Datum::Object(o) = &mut other {
            Arc::make_mut(o).insert("a".into(), Datum::Number(2.0));
        }
        assert!(!unchanged(&a, &other));
    }

    #[test]
    fn a_document_rejected_before_the_write_comes_first_in_first_error() {
        let table = Arc::new(MemTable::default());
        let doc = |k: Datum| Datum::from_pairs([("id", k)]);
        let one = insert_into(&table, doc(Datum::Number(1.0)));
        assert_eq!(
            one.ok().and_then(|d| d.get("inserted").cloned()),
            Some(Datum::Number(1.0))
        );
        // A duplicate (a write error) before a key too long (a validation error).
        let docs = Datum::array(vec![
            doc(Datum::Number(1.0)),
            doc(Datum::from("a".repeat(200))),
            doc(Datum::Number(2.0)),
        ]);
        let stats = insert_into(&table, docs).unwrap_or(Datum::Null);
        assert_eq!(stats.get("errors"), Some(&Datum::Number(2.0)));
        assert_eq!(stats.get("inserted"), Some(&Datum::Number(1.0)));
        let first = stats
            .get("first_error")
            .and_then(|e| e.as_str())
            .unwrap_or("");
        assert!(first.starts_with("Primary key too long"), "{first}");
    }

    #[test]
    fn a_table_out_of_reach_fails_the_whole_write_as_rethinkdb_does() {
        use crate::error::ErrorKind;
        let table = Arc::new(MemTable::default());
        let doc = Datum::from_pairs([("id", Datum::Number(1.0))]);
        // Out of reach: the query fails with the error's class (an unknown outcome stays
        // a ReqlOpIndeterminateError), rather than `errors: 1`.
        let lost = ReqlError::new(ErrorKind::OpIndeterminate, "Cannot perform write: lost")
            .table_unavailable();
        table.refuse_writes(lost.clone());
        let e = insert_into(&table, doc.clone()).err();
        assert_eq!(
            e.map(|e| (e.kind, e.message)),
            Some((lost.kind, lost.message.clone()))
        );
        // Many documents (written a chunk at a time) likewise.
        let many = Datum::array(vec![
            doc.clone(),
            Datum::from_pairs([("id", Datum::Number(2.0))]),
        ]);
        let e = insert_into(&table, many).err();
        assert_eq!(
            e.map(|e| (e.kind, e.message)),
            Some((lost.kind, lost.message))
        );
        // Refused by the shard itself: counted against the document, as before.
        table.refuse_writes(crate::error::op_failed("refused").nondeterministic());
        let stats = insert_into(&table, doc).unwrap_or(Datum::Null);
        assert_eq!(stats.get("errors"), Some(&Datum::Number(1.0)));
    }
}
