//! Write hooks: `set_write_hook`, `get_write_hook`, and the hook's application to each
//! document a write changes (`Hook`, called by `terms::write`).
//!
//! A hook is a function `(context, old_val, new_val) -> new_val` stored with the table's
//! configuration (`Table::set_write_hook`; the `cluster` crate persists it in the table's
//! catalog record). The table only keeps the definition — a FUNC term in RethinkDB's
//! JSON wire form — and `reql` compiles and evaluates it, once per write term.
//!
//! As in RethinkDB (`btree_batched_replacer_t::apply_write_hook`):
//! - the hook runs inside the document's atomic read-modify-write, after the write's own
//!   function, for inserts, updates, replaces and deletes (also when nothing changes);
//! - `context` is `{primary_key, timestamp}`, `timestamp` being the query's `r.now()`;
//! - its errors become "Error in write hook: …", counted per document in `errors` and
//!   `first_error`; it may not turn a deletion into a write or a write into a deletion;
//! - its result is checked like any new document (object, primary key unchanged);
//! - hook functions must be deterministic (`r.now()` allowed) and take three arguments;
//! - `ignore_write_hook: true` skips it and requires the `config` permission, as do
//!   `get_write_hook` and `set_write_hook`.
//!
//! `get_write_hook` returns `{function: <binary>, query: "setWriteHook(...)"}`; the
//! binary is the JSON function behind RethinkDB's `$reql_write_hook_function$` prefix
//! (RethinkDB's bytes are its own serialization; only the round trip through
//! `set_write_hook` is promised, by both).

use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;
use serde_json::{json, Value as Json};

use crate::access::{Change, Table, WriteHook};
use crate::ctx::QueryCtx;
use crate::error::{logic, op_failed, ReqlError, Result, WithFrame};
use crate::eval::{call, describe, to_datum, Ev};
use crate::value::{Env, Func, Val};

/// The prefix of `get_write_hook`'s `function` binary.
pub const BLOB_PREFIX: &str = "$reql_write_hook_function$";

/// RethinkDB's checks of a hook function: deterministic (its `func_t` checks that, so
/// the error is left for the caller to charge to the function), then three parameters
/// (checked by the term).
fn check_function(f: &Func) -> Result<()> {
    if crate::terms::js::is_js_func(f) || !crate::terms::write::is_deterministic(&f.body) {
        return Err(logic(
            "Could not prove function deterministic.  Write hook functions must be deterministic.",
        ));
    }
    if f.params.len() != 3 {
        return Err(logic("Write hook functions must expect 3 arguments.").here());
    }
    Ok(())
}

/// A function value as a FUNC term in JSON wire form (captured variables inlined).
fn function_json(f: &Func) -> Json {
    let params: Vec<Json> = f.params.iter().map(|p| json!(p)).collect();
    json!([
        T::FUNC as i64,
        [
            [T::MAKE_ARRAY as i64, params],
            crate::terms::index::term_to_json(&f.body, &f.env)
        ]
    ])
}

/// Compiles a stored hook into a function value.
fn compile(ctx: &Arc<QueryCtx>, h: &WriteHook) -> Result<Func> {
    let term = crate::term::compile_term(&h.function)?;
    match crate::eval::eval(ctx, &Env::default(), &term)? {
        Val::Func(f) => Ok(f),
        _ => Err(logic("Write hook functions must be functions.")),
    }
}

/// The `function` binary of `get_write_hook`.
fn blob(h: &WriteHook) -> Datum {
    let mut bytes = BLOB_PREFIX.as_bytes().to_vec();
    bytes.extend_from_slice(h.function.to_string().as_bytes());
    datum::ptype::make_binary(&bytes)
}

fn from_blob(d: &Datum) -> Result<WriteHook> {
    let bytes = datum::ptype::binary_bytes(d).unwrap_or_default();
    let body = bytes.strip_prefix(BLOB_PREFIX.as_bytes()).ok_or_else(|| {
        logic("Cannot create a write hook except from a reql_write_hook_function returned from `get_write_hook`.")
    })?;
    let function: Json = serde_json::from_slice(body).map_err(|e| {
        logic(format!(
            "Binary blob passed to set_write_hook could not be interpreted as a reql_write_hook_function ({e})."
        ))
    })?;
    Ok(WriteHook { function })
}

/// `{function, query}`: a hook as `get_write_hook` and the table's config show it.
pub fn hook_datum(h: &WriteHook) -> Datum {
    let query = format!("setWriteHook({})", crate::terms::index::js_of(&h.function));
    Datum::from_pairs([("function", blob(h)), ("query", Datum::str(&query))])
}

/// SET_WRITE_HOOK: `table.set_write_hook(function | binary | null)`.
pub fn set_write_hook(ev: &Ev) -> Result<Val> {
    let t = crate::terms::index::expect_table(ev, 0, "TABLE")?;
    let hook = match ev.arg(1)? {
        Val::Datum(Datum::Null) => None,
        Val::Datum(d) if d.reql_type() == Some("BINARY") => {
            let h = from_blob(&d)?;
            check_function(&compile(ev.ctx, &h)?).here()?;
            Some(h)
        }
        Val::Func(f) => {
            check_function(&f).at(1)?;
            Some(WriteHook {
                function: function_json(&f),
            })
        }
        other => {
            return Err(logic(format!(
                "Expected type FUNCTION but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
            .at(1)
        }
    };
    let created = hook.is_some();
    let existed = t.set_write_hook(hook)?;
    let what = match (created, existed) {
        (false, _) => "deleted",
        (true, true) => "replaced",
        (true, false) => "created",
    };
    Ok(Val::Datum(Datum::from_pairs([(what, Datum::Number(1.0))])))
}

/// GET_WRITE_HOOK: the hook as `{function, query}`, or null.
pub fn get_write_hook(ev: &Ev) -> Result<Val> {
    let t = crate::terms::index::expect_table(ev, 0, "TABLE")?;
    t.require_config()?;
    Ok(Val::Datum(match t.write_hook()? {
        Some(h) => hook_datum(&h),
        None => Datum::Null,
    }))
}

/// A table's write hook, compiled for one write term.
pub struct Hook {
    func: Val,
    pk: String,
}

impl Hook {
    /// The hook the write term `ev` applies on `t`: none when the table has none or
    /// the term sets `ignore_write_hook: true` (which needs the `config` permission).
    pub fn for_write(ev: &Ev, t: &dyn Table) -> Result<Option<Hook>> {
        if ev.opt_bool("ignore_write_hook", false)? {
            t.require_config()?;
            return Ok(None);
        }
        let Some(h) = t.write_hook()? else {
            return Ok(None);
        };
        Ok(Some(Hook {
            func: Val::Func(compile(ev.ctx, &h)?),
            pk: t.primary_key().to_string(),
        }))
    }

    /// Runs the hook on one document's change: `old` is the stored document, `change`
    /// what the write wants; the answer is what is stored.
    pub fn apply(
        &self,
        ctx: &Arc<QueryCtx>,
        key: &Datum,
        old: Option<&Datum>,
        change: Change,
    ) -> Result<Change> {
        let old_val = old.cloned().unwrap_or(Datum::Null);
        let new_val = match &change {
            Change::Put(d) => d.clone(),
            Change::Delete => Datum::Null,
            Change::Keep => old_val.clone(),
        };
        let primary_key = [&new_val, &old_val]
            .into_iter()
            .find(|d| !matches!(d, Datum::Null))
            .and_then(|d| d.get(&self.pk))
            .cloned()
            .unwrap_or(Datum::Null);
        let context =
            Datum::from_pairs([("primary_key", primary_key), ("timestamp", ctx.now_datum())]);
        let deleting = matches!(new_val, Datum::Null);
        let out = call(ctx, &self.func, vec![context, old_val, new_val])
            .and_then(|v| to_datum(ctx, v))
            .map_err(|e| ReqlError {
                message: format!("Error in write hook: {}", e.message),
                ..e
            })?;
        match (deleting, &out) {
            (true, Datum::Null) => Ok(change),
            (true, _) => Err(op_failed(
                "A write hook function must not turn a deletion into a replace/insert.",
            )),
            (false, Datum::Null) => Err(op_failed(
                "A write hook function must not turn a replace/insert into a deletion.",
            )),
            (false, _) => {
                crate::terms::write::check_new_doc(&self.pk, key, old, &out)?;
                if old.is_some_and(|o| o == &out && o.to_json_string() == out.to_json_string()) {
                    Ok(Change::Keep)
                } else {
                    Ok(Change::Put(out))
                }
            }
        }
    }

    /// True when `e` came from a hook (for writes that count only some errors).
    pub fn is_hook_error(e: &ReqlError) -> bool {
        e.message.starts_with("Error in write hook: ")
            || e.message.starts_with("A write hook function must not")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_reject_foreign_bytes() {
        let h = WriteHook {
            function: serde_json::from_str(r#"[69,[[2,[1,2,3]],[10,[3]]]]"#).unwrap(),
        };
        let d = hook_datum(&h);
        let f = d.get("function").unwrap();
        assert_eq!(from_blob(f).unwrap(), h);
        assert_eq!(
            d.get("query").and_then(Datum::as_str),
            Some("setWriteHook(function(var1, var2, var3) { return var3; })")
        );
        let e = from_blob(&datum::ptype::make_binary(b"nope")).unwrap_err();
        assert!(e.message.starts_with("Cannot create a write hook"));
    }
}
