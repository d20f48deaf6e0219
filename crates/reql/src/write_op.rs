//! Writes as operations: evaluating a write yields, per document, a `WriteOp` (the new
//! document or its deletion, conditional on the version that was read) and applying it
//! (`Table::apply`) runs no user code.
//!
//! `write_doc` is the one place a write is evaluated and applied: it reads the document
//! (or takes the one a scan already read), runs the caller's function — update and
//! replace functions, insert's conflict function, the write hook — with no lock held,
//! and applies the result on the condition that the key still holds the version it was
//! computed from. When another write got there first the function runs again on the new
//! document, up to `MAX_ATTEMPTS` times. So a single-document update is atomic as in
//! RethinkDB, a function that writes the same document (`non_atomic`) cannot block
//! anything, and a non-deterministic function may run more than once (its last run is
//! the one applied). Values such as `r.now()`, `r.uuid()` and `r.random()` are fixed in
//! the operation's document before it is applied, so the operation is deterministic:
//! it is what a replication log carries (`WriteOp::to_datum`/`from_datum`).

use datum::{Datum, Version};

use crate::access::{Change, Table, Ticket};
use crate::ctx::QueryCtx;
use crate::error::{op_failed, ReqlError, Result};

/// How many times a write is evaluated before it gives up on a document that keeps
/// changing under it.
pub const MAX_ATTEMPTS: usize = 1000;

/// One write to one document, as applied: deterministic and serialisable.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOp {
    /// The document's primary key.
    pub key: Datum,
    /// The version the change was computed from (`None`: apply whatever is stored).
    pub expect: Option<Version>,
    /// The new document or its deletion (`Keep` is never applied).
    pub change: Change,
}

/// The outcome of `Table::apply`.
#[derive(Debug)]
pub enum Applied {
    /// Applied: the old and new documents and the write's ticket (none when nothing
    /// was written).
    Done(Option<Datum>, Option<Datum>, Option<Ticket>),
    /// The key no longer holds the expected version; nothing was written. Carries the
    /// document the key holds now (read under the same lock), to evaluate again with.
    Conflict(Option<Datum>),
}

impl WriteOp {
    /// The operation as a datum (`{key, expect, put}` or `{key, expect, delete: true}`),
    /// the form a replication log stores.
    pub fn to_datum(&self) -> Datum {
        let expect = self
            .expect
            .map_or(Datum::Null, |v| Datum::from(format!("{:016x}", v.0)));
        let mut pairs = vec![("key", self.key.clone()), ("expect", expect)];
        match &self.change {
            Change::Put(d) => pairs.push(("put", d.clone())),
            Change::Delete => pairs.push(("delete", Datum::Bool(true))),
            Change::Keep => {}
        }
        Datum::from_pairs(pairs)
    }

    /// Reads back `to_datum`'s form.
    pub fn from_datum(d: &Datum) -> Result<WriteOp> {
        let bad = || crate::error::internal("Malformed write operation.");
        let key = d.get("key").cloned().ok_or_else(bad)?;
        let expect = match d.get("expect") {
            None | Some(Datum::Null) => None,
            Some(v) => {
                let hex = v.as_str().ok_or_else(bad)?;
                Some(Version(u64::from_str_radix(hex, 16).map_err(|_| bad())?))
            }
        };
        let change = match (d.get("put"), d.get("delete")) {
            (Some(doc), None) => Change::Put(doc.clone()),
            (None, Some(Datum::Bool(true))) => Change::Delete,
            (None, None) => Change::Keep,
            _ => return Err(bad()),
        };
        Ok(WriteOp {
            key,
            expect,
            change,
        })
    }
}

/// The old and new document of one write and its ticket.
pub type Written = (Option<Datum>, Option<Datum>, Option<Ticket>);

/// Evaluates and applies the write of the document under `key` (see the module note).
/// `seen` is the document as the caller read it (a selection's row; `None` when the
/// caller expects no document, as `insert` does): the first evaluation uses it, and each
/// conflict hands back the current one, so the write itself never reads (and needs no
/// read permission). `f` says what to do given the document.
pub fn write_doc(
    ctx: &QueryCtx,
    t: &dyn Table,
    key: &Datum,
    seen: Option<Datum>,
    f: &mut dyn FnMut(Option<&Datum>) -> Result<Change>,
) -> Result<Written> {
    let mut old = seen;
    for attempt in 0..MAX_ATTEMPTS {
        if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(crate::interrupt::error());
        }
        let change = f(old.as_ref())?;
        if let Change::Keep = change {
            return Ok((old.clone(), old, None));
        }
        let op = WriteOp {
            key: key.clone(),
            expect: Some(Version::of(old.as_ref())),
            change,
        };
        match t.apply(op)? {
            Applied::Done(old, new, ticket) => return Ok((old, new, ticket)),
            Applied::Conflict(now) => {
                old = now;
                // Someone else's write won; give it room before evaluating again.
                if attempt >= 8 {
                    std::thread::yield_now();
                }
            }
        }
    }
    Err(too_many_conflicts(t, key))
}

/// Applies `change` to the document under `key` whatever it holds (writers that
/// evaluate nothing, and tests).
pub fn overwrite(t: &dyn Table, key: &Datum, change: Change) -> Result<Written> {
    let op = WriteOp {
        key: key.clone(),
        expect: None,
        change,
    };
    match t.apply(op)? {
        Applied::Done(old, new, ticket) => Ok((old, new, ticket)),
        Applied::Conflict(_) => Err(crate::error::internal(
            "A write without a condition conflicted.",
        )),
    }
}

fn too_many_conflicts(t: &dyn Table, key: &Datum) -> ReqlError {
    op_failed(format!(
        "The document with primary key {} in table `{}.{}` changed during each of {} \
         evaluations of the write; giving up.",
        key.to_pretty_string(),
        t.db(),
        t.name(),
        MAX_ATTEMPTS
    ))
    .nondeterministic()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_through_their_datum_form() {
        let doc = Datum::from_pairs([("id", Datum::Number(1.0)), ("t", Datum::str("x"))]);
        for op in [
            WriteOp {
                key: Datum::Number(1.0),
                expect: Some(Version(u64::MAX)),
                change: Change::Put(doc.clone()),
            },
            WriteOp {
                key: Datum::str("k"),
                expect: Some(Version::ABSENT),
                change: Change::Delete,
            },
            WriteOp {
                key: Datum::Number(2.0),
                expect: None,
                change: Change::Put(doc.clone()),
            },
        ] {
            let json = op.to_datum().to_json_string();
            let back = datum::from_json_slice(json.as_bytes()).unwrap();
            assert_eq!(WriteOp::from_datum(&back).unwrap(), op);
        }
    }

    fn ctx() -> QueryCtx {
        QueryCtx::new(
            std::sync::Arc::new(crate::access::NoTables {
                message: "no tables",
                connect: false,
            }),
            "test".into(),
            0.0,
        )
    }

    fn doc(n: f64) -> Datum {
        Datum::from_pairs([("id", Datum::Number(1.0)), ("n", Datum::Number(n))])
    }

    #[test]
    fn a_conflict_evaluates_again_on_the_current_document() {
        let t = crate::testing::MemTable::new(vec![doc(0.0)]);
        let key = Datum::Number(1.0);
        let mut calls = Vec::new();
        let r = write_doc(&ctx(), &t, &key, Some(doc(0.0)), &mut |old| {
            let n = old
                .and_then(|d| d.get("n"))
                .and_then(Datum::as_f64)
                .unwrap_or(-1.0);
            calls.push(n);
            if calls.len() == 1 {
                // Another writer gets there first.
                overwrite(&t, &key, Change::Put(doc(10.0)))?;
            }
            Ok(Change::Put(doc(n + 1.0)))
        });
        let (old, new, _) = r.unwrap();
        assert_eq!(calls, vec![0.0, 10.0]);
        assert_eq!((old, new), (Some(doc(10.0)), Some(doc(11.0))));
    }

    #[test]
    fn a_write_that_always_conflicts_gives_up_with_a_nondeterministic_error() {
        let t = crate::testing::MemTable::new(vec![doc(0.0)]);
        let key = Datum::Number(1.0);
        let mut n = 0.0;
        let e = write_doc(&ctx(), &t, &key, Some(doc(0.0)), &mut |_| {
            n += 1.0;
            overwrite(&t, &key, Change::Put(doc(n)))?;
            Ok(Change::Delete)
        })
        .unwrap_err();
        assert!(
            e.message
                .contains("changed during each of 1000 evaluations"),
            "{e}"
        );
        assert!(!e.deterministic);
        assert_eq!(n, MAX_ATTEMPTS as f64);
        // A logic error of the function is deterministic and ends the write at once.
        let e = write_doc(&ctx(), &t, &key, None, &mut |_| {
            Err(crate::error::logic("no"))
        });
        assert!(e.unwrap_err().deterministic);
    }
}
