//! Control flow and value utilities: literals, variables, `do`, `branch`, `and`/`or`,
//! `error`, `default`, `type_of`, `coerce_to`, `info`, `json`, `uuid`, `range`.

use std::sync::Arc;

use datum::{Datum, Object, Str};

use crate::error::{logic, ErrorKind, ReqlError, Result, WithFrame};
use crate::eval::{call_vals, describe, expect_int, expect_str, Ev};
use crate::value::{Sequence, Val, IMPLICIT_VAR_ID};

/// MAKE_ARRAY.
pub fn make_array(ev: &Ev) -> Result<Val> {
    let mut out = Vec::with_capacity(ev.nargs());
    for i in 0..ev.nargs() {
        out.push(ev.datum(i)?);
    }
    check_array_size(ev, out.len())?;
    Ok(Val::Datum(Datum::array(out)))
}

/// DATUM: a literal (an array literal is held to the array limit, as RethinkDB checks
/// arrays when it builds them from the query).
pub fn datum(ev: &Ev) -> Result<Val> {
    if let Datum::Array(a) = &ev.term.datum {
        check_array_size(ev, a.len())?;
    }
    Ok(Val::Datum(ev.term.datum.clone()))
}

/// Fails when an array exceeds the query's array limit.
pub fn check_array_size(ev: &Ev, n: usize) -> Result<()> {
    if n > ev.ctx.array_limit {
        return Err(crate::value::array_limit_error(ev.ctx.array_limit));
    }
    Ok(())
}

/// Ponder's error for a value nested deeper than `datum::MAX_NESTING` (see
/// `datum::nesting`): RethinkDB has no such limit, so the text is Ponder's.
pub fn nesting_error() -> ReqlError {
    crate::error::resource(format!(
        "Nesting depth limit exceeded: arrays and objects may nest at most {} levels deep.",
        datum::MAX_NESTING
    ))
}

/// Fails when a loop's new accumulator nests deeper than `datum::MAX_NESTING`: the
/// loops (`fold`, `reduce`) are where a value can grow deeper than the query that
/// builds it. An accumulator returned unchanged is not measured again (`old` must be
/// kept alive across the step, so that its address cannot be reused by `new`).
pub fn check_step_nesting(old: &Datum, new: &Datum) -> Result<()> {
    let same = match (old, new) {
        (Datum::Array(a), Datum::Array(b)) => Arc::ptr_eq(a, b),
        (Datum::Object(a), Datum::Object(b)) => Arc::ptr_eq(a, b),
        (_, Datum::Array(_) | Datum::Object(_)) => false,
        _ => true,
    };
    if !same && new.nesting_exceeds(datum::MAX_NESTING) {
        return Err(nesting_error());
    }
    Ok(())
}

/// MAKE_OBJ.
pub fn make_obj(ev: &Ev) -> Result<Val> {
    let mut m = Object::new();
    for (k, t) in &ev.term.optargs {
        // The values inherit the object's `literal_ok` (RethinkDB's make_obj_term_t).
        let v = crate::eval::eval_flagged(ev.ctx, ev.env, t, ev.literal_ok).at_opt(k)?;
        let d = ev.to_datum(v).at_opt(k)?;
        m.insert(Str::from(k.as_str()), d);
    }
    Ok(Val::Datum(Datum::object(m)))
}

/// VAR.
pub fn var(ev: &Ev) -> Result<Val> {
    let id = ev
        .term
        .args
        .first()
        .and_then(|t| t.datum.as_f64())
        .ok_or_else(|| logic("VAR needs a numeric id."))? as i64;
    ev.env
        .lookup(id)
        .ok_or_else(|| logic(format!("Variable {id} is not in scope.")))
}

/// IMPLICIT_VAR (`r.row`).
pub fn implicit_var(ev: &Ev) -> Result<Val> {
    ev.env.lookup(IMPLICIT_VAR_ID).ok_or_else(|| {
        crate::error::compile("r.row is not defined in this context. Use a function instead.")
    })
}

/// FUNCALL (`r.do`): the function comes first, then its arguments.
pub fn funcall(ev: &Ev) -> Result<Val> {
    let f = ev.arg(0)?;
    let mut args = Vec::with_capacity(ev.nargs().saturating_sub(1));
    for i in 1..ev.nargs() {
        // RethinkDB's `funcall_term_t` takes every argument as a datum (the first may
        // also be grouped data): a stream that is an array in disguise is collected, a
        // real stream, table or database fails here, blamed on the argument.
        let v = match ev.arg(i)? {
            Val::Grouped(g) if i == 1 => Val::Grouped(g),
            other => Val::Datum(crate::eval::to_datum(ev.ctx, other).at(i)?),
        };
        args.push(v);
    }
    if matches!(args.first(), Some(Val::Grouped(_))) {
        let mut rest = args.into_iter();
        return match rest.next() {
            Some(Val::Grouped(g)) => {
                crate::terms::group::funcall_each(ev, &f, g, rest.collect()).at(0)
            }
            _ => Err(logic("FUNCALL: grouped argument expected.")),
        };
    }
    call_vals(ev.ctx, &f, args).at(0)
}

/// BRANCH: `r.branch(c1, v1, c2, v2, …, else)`.
pub fn branch(ev: &Ev) -> Result<Val> {
    let n = ev.nargs();
    if n.is_multiple_of(2) {
        return Err(logic(
            "Cannot call `branch` term with an even number of arguments.",
        ));
    }
    let mut i = 0;
    while i + 1 < n {
        if ev.datum(i)?.truthy() {
            return ev.arg(i + 1);
        }
        i += 2;
    }
    ev.arg(n - 1)
}

/// AND: the first falsy value, else the last value (`true` with no arguments). The value
/// is returned as it was evaluated (RethinkDB's `and_term_t` returns the `val_t`), so a
/// single selection stays a selection: `r.and(c, table.get(k)).update(...)`.
pub fn and(ev: &Ev) -> Result<Val> {
    short_circuit(ev, true)
}

/// OR: the first truthy value, else the last value (`false` with no arguments); like
/// `and`, a selection stays a selection.
pub fn or(ev: &Ev) -> Result<Val> {
    short_circuit(ev, false)
}

/// AND (`is_and`) and OR: evaluates the arguments in order and returns the first one
/// whose truth ends the evaluation (falsy for AND, truthy for OR), else the last one,
/// unchanged.
fn short_circuit(ev: &Ev, is_and: bool) -> Result<Val> {
    let mut last = Val::Datum(Datum::Bool(is_and));
    for i in 0..ev.nargs() {
        let (v, truthy) = match ev.arg(i)? {
            Val::Single(s) => {
                let t = s.doc.truthy();
                (Val::Single(s), t)
            }
            other => {
                let d = ev.to_datum(other).at(i)?;
                let t = d.truthy();
                (Val::Datum(d), t)
            }
        };
        last = v;
        if truthy != is_and {
            break;
        }
    }
    Ok(last)
}

/// NOT.
pub fn not(ev: &Ev) -> Result<Val> {
    Ok(Val::Datum(Datum::Bool(!ev.datum(0)?.truthy())))
}

/// ERROR: a ReqlUserError.
pub fn error(ev: &Ev) -> Result<Val> {
    if ev.nargs() == 0 {
        return Err(ReqlError::new(
            ErrorKind::EmptyUser,
            "Empty ERROR term outside a default block.",
        ));
    }
    let msg = ev.string(0)?;
    Err(ReqlError::new(ErrorKind::User, msg))
}

/// DEFAULT: the fallback when the value is null or a non-existence error occurred.
/// Any other value is returned as it was evaluated (RethinkDB's `default_term_t`), so
/// `table.get(k).default(r.error(...))` is still a single selection when the document
/// exists and `update`, `delete` and `changes` work on it.
pub fn default(ev: &Ev) -> Result<Val> {
    let (err_msg, original, value) = match ev.arg(0) {
        Ok(Val::Datum(Datum::Null)) => (Datum::Null, None, Val::Datum(Datum::Null)),
        Ok(Val::Single(s)) if matches!(s.doc, Datum::Null) => (Datum::Null, None, Val::Single(s)),
        Ok(v) => return Ok(v),
        Err(e) if e.kind == ErrorKind::NonExistence => (
            Datum::from(e.message.clone()),
            Some(e),
            Val::Datum(Datum::Null),
        ),
        Err(e) => return Err(e),
    };
    let result = ev.arg(1).and_then(|fallback| match fallback {
        Val::Func(_) => call_vals(ev.ctx, &fallback, vec![Val::Datum(err_msg)]).at(1),
        other => Ok(other),
    });
    match result {
        // `r.error()` as the fallback: the original error, or the null value itself.
        Err(e) if e.kind == ErrorKind::EmptyUser => match original {
            Some(orig) => Err(orig),
            None => Ok(value),
        },
        other => other,
    }
}

/// TYPE_OF.
pub fn type_of(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let name = match &v {
        Val::Seq(s) if s.is_array && s.table.is_some() => "SELECTION<ARRAY>".to_string(),
        Val::Seq(s) if s.is_array => "ARRAY".to_string(),
        other => other.type_name(),
    };
    Ok(Val::Datum(Datum::from(name)))
}

/// COERCE_TO. RethinkDB charges "Cannot coerce X to Y." to the value converted, and its
/// other checks (an unknown type, a string that is no number, bad pairs) to the term.
pub fn coerce_to(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let target = ev.string(1)?.to_ascii_uppercase();
    coerce_val(ev, v, target).at(0)
}

fn coerce_val(ev: &Ev, v: Val, target: String) -> Result<Val> {
    let d = match v {
        Val::Seq(s) => match target.as_str() {
            "ARRAY" => return Ok(Val::Datum(Datum::array(s.collect(ev.ctx.array_limit)?))),
            "OBJECT" => Datum::array(s.collect(ev.ctx.array_limit)?),
            _ => {
                let name = if s.table.is_some() {
                    "SELECTION<STREAM>"
                } else {
                    "SEQUENCE"
                };
                return Err(logic(format!("Cannot coerce {name} to {target}.")));
            }
        },
        Val::Table(t) if target == "ARRAY" || target == "OBJECT" => {
            let s = crate::eval::to_seq(Val::Table(t))?;
            Datum::array(s.collect(ev.ctx.array_limit)?)
        }
        other @ (Val::Table(_) | Val::Db(_) | Val::Func(_)) => {
            return Err(logic(format!(
                "Cannot coerce {} to {}.",
                other.type_name(),
                target
            )))
        }
        other => ev.to_datum(other)?,
    };
    coerce_datum(d, &target).map(Val::Datum)
}

/// Converts a datum to the named type, as `coerce_to` does.
pub fn coerce_datum(d: Datum, target: &str) -> Result<Datum> {
    check_json_able(&d)?;
    let from = match d.reql_type() {
        Some(t) if t != "GEOMETRY" => t.to_string(),
        _ => d.type_name(),
    };
    let fail = || logic(format!("Cannot coerce {from} to {target}."));
    match target {
        "STRING" => Ok(match &d {
            Datum::String(_) => d,
            Datum::Number(_) => Datum::from(d.to_json_string()),
            _ if d.reql_type() == Some("BINARY") => {
                let bytes = datum::ptype::binary_bytes(&d).unwrap_or_default();
                Datum::from(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => Datum::from(d.to_json_string()),
        }),
        "NUMBER" => match &d {
            Datum::Number(_) => Ok(d),
            Datum::String(s) => match crate::terms::number_text::read(s) {
                crate::terms::number_text::Read::Number(n) => Ok(Datum::Number(n)),
                crate::terms::number_text::Read::NonFinite(msg) => Err(logic(msg).here()),
                crate::terms::number_text::Read::Invalid => {
                    Err(logic(format!("Could not coerce `{s}` to NUMBER.")).here())
                }
            },
            _ => Err(fail()),
        },
        "ARRAY" => match &d {
            Datum::Array(_) => Ok(d),
            Datum::Object(o) if !d.is_ptype() => Ok(Datum::array(
                o.iter()
                    .map(|(k, v)| Datum::array(vec![Datum::String(k.clone()), v.clone()]))
                    .collect(),
            )),
            _ => Err(fail()),
        },
        "OBJECT" => match &d {
            Datum::Object(_) if !d.is_ptype() => Ok(d),
            Datum::Array(a) => {
                let mut m = Object::new();
                // The pairs are checked by the term itself (RethinkDB's `rcheck`s).
                for pair in a.iter() {
                    match pair.as_array() {
                        Some([Datum::String(k), v]) => {
                            if let Some(old) = m.get(k) {
                                return Err(logic(format!(
                                    "Duplicate key {} in coerced object.  (got {} and {} as values)",
                                    Datum::String(k.clone()).to_json_string(),
                                    crate::eval::trunc_print(old),
                                    crate::eval::trunc_print(v)
                                ))
                                .here());
                            }
                            m.insert(k.clone(), v.clone());
                        }
                        Some([k, _]) => {
                            return Err(logic(format!(
                                "Expected type STRING but found {}.",
                                k.type_name()
                            ))
                            .here())
                        }
                        _ => {
                            return Err(logic(format!(
                                "Expected array of size 2, but got size {}.",
                                pair.as_array().map_or(0, <[Datum]>::len)
                            ))
                            .here())
                        }
                    }
                }
                Ok(Datum::object(m))
            }
            _ => Err(fail()),
        },
        "BOOL" => match &d {
            Datum::Bool(_) => Ok(d),
            _ => Ok(Datum::Bool(d.truthy())),
        },
        "NULL" => match &d {
            Datum::Null => Ok(d),
            _ => Err(fail()),
        },
        "BINARY" => match &d {
            Datum::String(s) => Ok(datum::ptype::make_binary(s.as_bytes())),
            _ if d.reql_type() == Some("BINARY") => Ok(d),
            _ => Err(fail()),
        },
        "DATUM" => Ok(d),
        _ if target == from => Ok(d),
        _ => Err(logic(format!("Unknown Type: {target}")).here()),
    }
}

/// INFO.
pub fn info(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let d = match v {
        Val::Table(t) if t.slice().is_some() => crate::terms::index::slice_info(ev, &t)?,
        Val::Table(t) => table_info(ev, &t)?,
        Val::Single(s) => Datum::from_pairs([
            ("type", Datum::str("SELECTION<OBJECT>")),
            ("table", table_info(ev, &s.table)?),
        ]),
        Val::Db(name) => {
            let mut m = Object::new();
            if let Some(id) = ev.ctx.access.db_config(&name)?.get("id") {
                m.insert(Str::from("id"), id.clone());
            }
            m.insert(Str::from("name"), Datum::str(&name));
            m.insert(Str::from("type"), Datum::str("DB"));
            Datum::object(m)
        }
        Val::Func(_) => Datum::from_pairs([("type", Datum::str("FUNCTION"))]),
        Val::Grouped(g) => {
            let name = if matches!(g, crate::value::Grouped::Stream(_)) {
                "GROUPED_STREAM"
            } else {
                "GROUPED_DATA"
            };
            Datum::from_pairs([("type", Datum::str(name))])
        }
        Val::Seq(s) if !s.is_array || s.table.is_some() => match &s.table {
            Some(t) => Datum::from_pairs([
                (
                    "type",
                    Datum::str(if s.is_array {
                        "SELECTION<ARRAY>"
                    } else {
                        "SELECTION<STREAM>"
                    }),
                ),
                ("table", table_info(ev, t)?),
            ]),
            None => Datum::from_pairs([("type", Datum::str("STREAM"))]),
        },
        other => {
            let d = ev.to_datum(other)?;
            let mut m = Object::new();
            m.insert(Str::from("type"), Datum::from(d.type_name()));
            if !matches!(d, Datum::MinVal | Datum::MaxVal | Datum::Null) {
                let mut text = String::new();
                print_datum(&d, &mut text, 0);
                m.insert(Str::from("value"), Datum::from(text));
            }
            if d.reql_type() == Some("BINARY") {
                let n = datum::ptype::binary_bytes(&d).map_or(0, |b| b.len());
                m.insert(Str::from("count"), Datum::from(n));
            }
            Datum::object(m)
        }
    };
    Ok(Val::Datum(d))
}

/// `info` of a table (also the `table` of a selection's `info`; a slice's base table).
fn table_info(ev: &Ev, t: &Arc<dyn crate::access::Table>) -> Result<Datum> {
    let t = match t.slice() {
        Some(s) => s.base.clone(),
        None => t.clone(),
    };
    let mut m = Object::new();
    let cfg = ev.ctx.access.table_config(t.db(), t.name())?;
    m.insert(Str::from("type"), Datum::str("TABLE"));
    m.insert(Str::from("name"), Datum::str(t.name()));
    m.insert(Str::from("primary_key"), Datum::str(t.primary_key()));
    let names = t.index_status()?.into_iter().map(|s| Datum::str(&s.name));
    m.insert(Str::from("indexes"), Datum::array(names.collect()));
    if let Some(id) = cfg.get("id") {
        m.insert(Str::from("id"), id.clone());
    }
    m.insert(
        Str::from("doc_count_estimates"),
        Datum::array(vec![Datum::from(t.count()? as f64)]),
    );
    let mut db = Object::new();
    db.insert(Str::from("name"), Datum::str(t.db()));
    db.insert(Str::from("type"), Datum::str("DB"));
    if let Some(dbid) = ev.ctx.access.db_config(t.db())?.get("id") {
        db.insert(Str::from("id"), dbid.clone());
    }
    m.insert(Str::from("db"), Datum::object(db));
    Ok(Datum::object(m))
}

/// RethinkDB's `datum_t::print` (rapidjson's pretty writer with tab indentation and
/// `"key":\tvalue`), as `info` shows a value: arrays and objects one element a line.
fn print_datum(d: &Datum, out: &mut String, depth: usize) {
    let indent = |out: &mut String, n: usize| out.extend(std::iter::repeat_n('\t', n));
    match d {
        Datum::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                print_datum(v, out, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push(']');
        }
        Datum::Object(o) if !o.is_empty() => {
            out.push_str("{\n");
            for (i, (k, v)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                out.push_str(&Datum::str(k).to_json_string());
                out.push_str(":\t");
                print_datum(v, out, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push('}');
        }
        other => out.push_str(&other.to_json_string()),
    }
}

/// JSON: parses a string.
pub fn json(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    if let Some(k) = crate::terms::json_check::duplicate_key(s.as_bytes()) {
        return Err(logic(format!("Duplicate key \"{k}\" in JSON.")));
    }
    datum::from_json_slice(s.as_bytes())
        .map(Val::Datum)
        .map_err(|e| {
            logic(format!(
                "Failed to parse \"{s}\" as JSON: {}",
                rapidjson_message(&e.0, s.trim().is_empty())
            ))
        })
}

/// RethinkDB parses JSON with rapidjson; its error texts are what clients see. Maps
/// serde_json's description of the same problem onto rapidjson's wording.
pub(crate) fn rapidjson_message(serde_msg: &str, empty: bool) -> &'static str {
    let m = serde_msg;
    if empty {
        "The document is empty."
    } else if m.starts_with("EOF while parsing a list") || m.starts_with("expected `,` or `]`") {
        "Missing a comma or ']' after an array element."
    } else if m.starts_with("EOF while parsing an object") || m.starts_with("expected `,` or `}`") {
        "Missing a comma or '}' after an object member."
    } else if m.starts_with("expected `:`") {
        "Missing a colon after a name of object member."
    } else if m.starts_with("key must be a string") {
        "Missing a name for object member."
    } else if m.starts_with("trailing characters") {
        "The document root must not be followed by other values."
    } else if m.starts_with("EOF while parsing a string") {
        "Missing a closing quotation mark in string."
    } else if m.starts_with("invalid escape") {
        "Invalid escape character in string."
    } else if m.starts_with("control character") {
        "Invalid encoding in string."
    } else {
        "Invalid value."
    }
}

/// Fails for values with no JSON form (`r.minval`, `r.maxval`). A part shared by several
/// parents is checked once, so a value that shares its halves costs its size.
pub fn check_json_able(d: &Datum) -> Result<()> {
    // A value with nothing to walk (a scalar, or a stored document as read) is decided
    // without the walk's allocations: most answers are one of those.
    let nested = match d {
        Datum::Array(_) => true,
        Datum::Object(o) => o.raw_json().is_none(),
        _ => false,
    };
    if !nested {
        datum::work::tick();
        return match d {
            Datum::MinVal => Err(logic("Cannot convert `r.minval` to JSON.")),
            Datum::MaxVal => Err(logic("Cannot convert `r.maxval` to JSON.")),
            _ => Ok(()),
        };
    }
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![d];
    while let Some(d) = stack.pop() {
        datum::work::tick();
        match d {
            Datum::MinVal => return Err(logic("Cannot convert `r.minval` to JSON.")),
            Datum::MaxVal => return Err(logic("Cannot convert `r.maxval` to JSON.")),
            Datum::Array(a)
                if Arc::strong_count(a) == 1 || seen.insert(Arc::as_ptr(a) as usize) =>
            {
                stack.extend(a.iter());
            }
            // Decoded from JSON text and unchanged since: it holds no minval/maxval.
            Datum::Object(o) if o.raw_json().is_some() => {}
            Datum::Object(o)
                if Arc::strong_count(o) == 1 || seen.insert(Arc::as_ptr(o) as usize) =>
            {
                stack.extend(o.values());
            }
            _ => {}
        }
    }
    Ok(())
}

/// TO_JSON_STRING.
pub fn to_json_string(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    check_json_able(&d)?;
    Ok(Val::Datum(Datum::from(d.to_json_string())))
}

/// UUID: random (v4), or deterministic (v5) from a string.
pub fn uuid(ev: &Ev) -> Result<Val> {
    if ev.nargs() == 1 {
        let s = ev.string(0)?;
        // RethinkDB's namespace for name-based UUIDs.
        let ns = uuid::Uuid::from_u128(0x91461c99_f89d_49d2_af96_d8e2e14e9b58);
        return Ok(Val::Datum(Datum::from(
            uuid::Uuid::new_v5(&ns, s.as_bytes()).to_string(),
        )));
    }
    Ok(Val::Datum(Datum::from(uuid::Uuid::new_v4().to_string())))
}

/// RANGE: `r.range()`, `r.range(end)`, `r.range(start, end)`.
pub fn range(ev: &Ev) -> Result<Val> {
    let (start, end) = match ev.nargs() {
        0 => (0, None),
        1 => (0, Some(expect_int(&ev.datum(0)?).at(0)?)),
        _ => (
            expect_int(&ev.datum(0)?).at(0)?,
            Some(expect_int(&ev.datum(1)?).at(1)?),
        ),
    };
    let mut i = start;
    let cancel = ev.ctx.cancel.clone();
    let stream = std::iter::from_fn(move || {
        if end.is_some_and(|e| i >= e) {
            return None;
        }
        // The only endless source: stop when the client has gone.
        if i % 4096 == 0 && cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Some(Err(crate::error::op_failed(
                "Query interrupted: the client disconnected.",
            )));
        }
        let d = Datum::Number(i as f64);
        i += 1;
        Some(Ok(d))
    });
    let mut seq = Sequence::stream(Box::new(stream));
    seq.infinite = end.is_none();
    Ok(Val::Seq(seq))
}

/// A datum rendering for error messages about any value.
pub fn show(v: &Val) -> String {
    describe(v)
}

/// The string argument used by several terms, checked.
pub fn str_of(d: &Datum) -> Result<&str> {
    expect_str(d)
}

/// Makes an `Arc<str>`.
pub fn s(x: &str) -> Str {
    Arc::from(x)
}

/// BINARY: `r.binary(string)` or an existing binary value.
pub fn binary(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    match &d {
        Datum::String(s) => Ok(Val::Datum(datum::ptype::make_binary(s.as_bytes()))),
        _ if d.reql_type() == Some("BINARY") => Ok(Val::Datum(d)),
        other => Err(crate::eval::type_error("STRING", other)).at(0),
    }
}

/// Checks base64 text the way RethinkDB's decoder reports problems.
pub fn check_base64(s: &str) -> Result<()> {
    let mut seen_pad = false;
    let mut count = 0usize;
    for c in s.chars() {
        match c {
            '=' => seen_pad = true,
            '\n' | '\r' | ' ' | '\t' => {}
            _ if seen_pad => {
                return Err(logic(
                    "Invalid base64 format, data found after padding character '='.",
                ));
            }
            'A'..='Z' | 'a'..='z' | '0'..='9' | '+' | '/' => count += 1,
            other => {
                return Err(logic(format!("Invalid base64 character found: '{other}'.")));
            }
        }
    }
    if count % 4 == 1 {
        return Err(logic(
            "Invalid base64 length: 1 character remaining, cannot decode a full byte.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::{compile_term, Term};
    use crate::testing::MemTable;
    use crate::value::{Env, SingleSel};

    fn ctx() -> Arc<crate::ctx::QueryCtx> {
        crate::testing::no_tables_ctx()
    }

    #[test]
    fn json_able_values_with_and_without_a_walk() {
        let stored = datum::from_json_slice(br#"{"a":[1,{"b":null}]}"#).unwrap();
        let nested = Datum::array(vec![Datum::Number(1.0), Datum::MaxVal]);
        let mut obj = datum::Object::new();
        obj.insert("k".into(), Datum::MinVal);
        for (d, ok) in [
            (Datum::Null, true),
            (Datum::str("x"), true),
            (stored, true),
            (Datum::MinVal, false),
            (Datum::MaxVal, false),
            (nested, false),
            (Datum::object(obj), false),
        ] {
            assert_eq!(check_json_able(&d).is_ok(), ok, "{d:?}");
        }
    }

    /// Variable 1 bound to `table.get(1)` of a table holding `docs`.
    fn env_with_single(docs: Vec<Datum>) -> Env {
        let table: Arc<dyn crate::access::Table> = Arc::new(MemTable::new(docs.clone()));
        let doc = docs.into_iter().next().unwrap_or(Datum::Null);
        Env::default().bind(
            1,
            Val::Single(SingleSel {
                table,
                key: Datum::Number(1.0),
                doc,
            }),
        )
    }

    fn eval_json(env: &Env, q: &str) -> Result<Val> {
        let term: Arc<Term> = compile_term(&serde_json::from_str(q).expect("json"))?;
        crate::eval::eval(&ctx(), env, &term)
    }

    fn doc() -> Datum {
        Datum::from_pairs([("id", Datum::Number(1.0))])
    }

    #[test]
    fn default_keeps_a_single_selection() {
        let env = env_with_single(vec![doc()]);
        // r.default(var 1, r.error("missing"))
        let v = eval_json(&env, r#"[92,[[10,[1]],[12,["missing"]]]]"#);
        assert!(matches!(v, Ok(Val::Single(_))));
        // r.default(var 1, r.error()) on a missing document: the selection itself.
        let env = env_with_single(Vec::new());
        let v = eval_json(&env, r#"[92,[[10,[1]],[12,[]]]]"#);
        assert!(matches!(v, Ok(Val::Single(ref s)) if s.doc == Datum::Null));
        // A missing document takes the fallback.
        let v = eval_json(&env, r#"[92,[[10,[1]],5]]"#);
        assert!(matches!(v, Ok(Val::Datum(Datum::Number(n))) if n == 5.0));
        let v = eval_json(&env, r#"[92,[[10,[1]],[12,["missing"]]]]"#);
        assert!(matches!(v, Err(ref e) if e.message == "missing"));
    }

    #[test]
    fn and_or_return_the_deciding_value_unchanged() {
        let env = env_with_single(vec![doc()]);
        // r.and(true, var 1) and r.or(false, var 1): the selection.
        assert!(matches!(
            eval_json(&env, r#"[67,[true,[10,[1]]]]"#),
            Ok(Val::Single(_))
        ));
        assert!(matches!(
            eval_json(&env, r#"[66,[false,[10,[1]]]]"#),
            Ok(Val::Single(_))
        ));
        // r.or(var 1, false) stops at the (truthy) selection; r.and(false, var 1) at false.
        assert!(matches!(
            eval_json(&env, r#"[66,[[10,[1]],false]]"#),
            Ok(Val::Single(_))
        ));
        assert!(matches!(
            eval_json(&env, r#"[67,[false,[10,[1]]]]"#),
            Ok(Val::Datum(Datum::Bool(false)))
        ));
        assert!(matches!(
            eval_json(&env, "[67,[]]"),
            Ok(Val::Datum(Datum::Bool(true)))
        ));
        assert!(matches!(
            eval_json(&env, "[66,[]]"),
            Ok(Val::Datum(Datum::Bool(false)))
        ));
    }
}
