//! Object terms: `get_field`, `bracket`, `pluck`, `without`, `merge`, `has_fields`,
//! `keys`, `values`, `literal`, `object`. On sequences, the per-object terms map (or, for
//! `has_fields`, filter) lazily over the items.

use std::sync::Arc;

use datum::{Datum, Object, Str};

use crate::error::{logic, nonexist, Result, WithFrame};
use crate::eval::{call_literal_ok, expect_object, type_error, Ev};
use crate::terms::seq::{filter_items, map_items};
use crate::value::{Sequence, Val};

/// RethinkDB's "No attribute" error.
pub fn no_attribute(field: &str, obj: &Datum) -> crate::error::ReqlError {
    nonexist(format!(
        "No attribute `{}` in object:\n{}",
        field,
        obj.to_pretty_string()
    ))
}

/// Reads a field of an object datum.
pub fn field_of(d: &Datum, field: &str, term: &str) -> Result<Datum> {
    match d {
        Datum::Object(o) => o.field(field).ok_or_else(|| no_attribute(field, d)),
        Datum::Null => Err(nonexist(format!(
            "Cannot perform {term} on a non-object non-sequence `null`."
        ))),
        _ => Err(logic(format!(
            "Cannot perform {} on a non-object non-sequence `{}`.",
            term,
            d.to_json_string()
        ))),
    }
}

/// RethinkDB refuses the object terms on pseudo-type values (times, binary), but not on
/// geometry: "Cannot call `keys` on objects of type `PTYPE<TIME>`."
fn check_plain(d: &Datum, term: &str) -> Result<()> {
    if d.is_ptype() && d.reql_type() != Some("GEOMETRY") {
        return Err(logic(format!(
            "Cannot call `{term}` on objects of type `{}`.",
            d.type_name()
        )));
    }
    Ok(())
}

/// `check_plain` on a single value (sequences are checked item by item elsewhere).
fn check_val(v: &Val, term: &str) -> Result<()> {
    match v {
        Val::Datum(d) => check_plain(d, term),
        Val::Single(s) => check_plain(&s.doc, term),
        _ => Ok(()),
    }
}

fn is_sequence(v: &Val) -> bool {
    matches!(v, Val::Seq(_) | Val::Table(_) | Val::Datum(Datum::Array(_)))
}

/// GET_FIELD.
pub fn get_field(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let field = ev.string(1)?;
    if is_sequence(&v) {
        let seq = ev.to_seq(v)?;
        return Ok(Val::Seq(pluck_values(seq, field, "get_field")));
    }
    check_val(&v, "get_field").at(0)?;
    let d = ev.to_datum(v)?;
    field_of(&d, &field, "get_field").map(Val::Datum)
}

/// `seq('field')`: the field of each object, skipping those without it.
fn pluck_values(seq: Sequence, field: String, term: &'static str) -> Sequence {
    let mut seq = map_items(seq, move |d| match &d {
        Datum::Object(o) => Ok(o.get(field.as_str()).cloned()),
        other => Err(logic(format!(
            "Cannot perform {term} on a non-object non-sequence `{}`.",
            other.to_json_string()
        ))),
    });
    seq.table = None;
    seq
}

/// BRACKET: field access on objects, index access on arrays and sequences.
pub fn bracket(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let key = ev.datum(1)?;
    match key {
        Datum::Number(_) => {
            if matches!(v, Val::Datum(Datum::Object(_))) || matches!(v, Val::Single(_)) {
                let d = ev.to_datum(v)?;
                return Err(logic(format!(
                    "Cannot perform nth on a non-sequence `{}`.",
                    d.to_json_string()
                )));
            }
            crate::terms::seq::nth_of(ev, v, &key)
        }
        Datum::String(s) => {
            if is_sequence(&v) {
                let seq = ev.to_seq(v)?;
                return Ok(Val::Seq(pluck_values(seq, s.to_string(), "bracket")));
            }
            check_val(&v, "bracket").at(0)?;
            let d = ev.to_datum(v)?;
            field_of(&d, &s, "bracket").map(Val::Datum)
        }
        other => Err(logic(format!(
            "Expected NUMBER or STRING as second argument to `bracket` but found {}.",
            other.type_name()
        ))),
    }
}

/// Evaluates the selector arguments (from `first`) of pluck/without/has_fields.
fn selectors(ev: &Ev, first: usize) -> Result<Vec<Datum>> {
    let mut out = Vec::new();
    for i in first..ev.nargs() {
        out.push(ev.datum(i)?);
    }
    Ok(out)
}

/// Applies `f` to an object, or maps it over a sequence.
fn per_object(
    ev: &Ev,
    v: Val,
    keep_selection: bool,
    f: impl Fn(&Datum) -> Result<Datum> + Send + 'static,
) -> Result<Val> {
    if is_sequence(&v) {
        let seq = ev.to_seq(v)?;
        let mut out = map_items(seq, move |d| f(&d).map(Some));
        if !keep_selection {
            out.table = None;
        }
        return Ok(Val::Seq(out));
    }
    let d = ev.to_datum(v)?;
    f(&d).map(Val::Datum)
}

/// PLUCK.
pub fn pluck(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    check_val(&v, "pluck").at(0)?;
    let sel = selectors(ev, 1)?;
    if is_sequence(&v) {
        return per_object(ev, v, false, move |d| match d {
            Datum::Array(_) => Err(logic("Cannot perform pluck on a sequence of sequences.")),
            _ => pluck_datum(d, &sel),
        });
    }
    per_object(ev, v, false, move |d| pluck_datum(d, &sel))
}

/// Plucks selectors out of one object.
pub fn pluck_datum(d: &Datum, sel: &[Datum]) -> Result<Datum> {
    let obj = expect_object(d)?;
    let mut out = Object::new();
    for s in sel {
        pluck_into(obj, s, &mut out)?;
    }
    Ok(Datum::object(out))
}

fn pluck_into(obj: &Object, sel: &Datum, out: &mut Object) -> Result<()> {
    match sel {
        Datum::String(k) => {
            if let Some(v) = obj.get(&**k) {
                out.insert(k.clone(), v.clone());
            }
        }
        Datum::Array(items) => {
            for s in items.iter() {
                pluck_into(obj, s, out)?;
            }
        }
        Datum::Object(m) => {
            for (k, sub) in m.iter() {
                let Some(v) = obj.get(&**k) else { continue };
                if matches!(sub, Datum::Bool(true)) {
                    out.insert(k.clone(), v.clone());
                    continue;
                }
                let nested = match v {
                    Datum::Object(_) => pluck_datum(v, std::slice::from_ref(sub))?,
                    Datum::Array(a) => Datum::array(
                        a.iter()
                            .filter(|x| matches!(x, Datum::Object(_)))
                            .map(|x| pluck_datum(x, std::slice::from_ref(sub)))
                            .collect::<Result<_>>()?,
                    ),
                    _ => continue,
                };
                out.insert(k.clone(), nested);
            }
        }
        other => {
            return Err(logic(format!(
                "Invalid path argument `{}`.",
                other.to_json_string()
            )))
        }
    }
    Ok(())
}

/// WITHOUT.
pub fn without(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    check_val(&v, "without").at(0)?;
    let sel = selectors(ev, 1)?;
    per_object(ev, v, false, move |d| without_datum(d, &sel))
}

fn without_datum(d: &Datum, sel: &[Datum]) -> Result<Datum> {
    let obj = expect_object(d)?;
    let mut out = obj.clone();
    for s in sel {
        without_from(&mut out, s)?;
    }
    Ok(Datum::object(out))
}

fn without_from(obj: &mut Object, sel: &Datum) -> Result<()> {
    match sel {
        Datum::String(k) => {
            obj.remove(&**k);
        }
        Datum::Array(items) => {
            for s in items.iter() {
                without_from(obj, s)?;
            }
        }
        Datum::Object(m) => {
            for (k, sub) in m.iter() {
                if matches!(sub, Datum::Bool(true)) {
                    obj.remove(&**k);
                    continue;
                }
                let Some(v) = obj.get(&**k).cloned() else {
                    continue;
                };
                let nested = match &v {
                    Datum::Object(_) => without_datum(&v, std::slice::from_ref(sub))?,
                    Datum::Array(a) => Datum::array(
                        a.iter()
                            .map(|x| match x {
                                Datum::Object(_) => without_datum(x, std::slice::from_ref(sub)),
                                other => Ok(other.clone()),
                            })
                            .collect::<Result<_>>()?,
                    ),
                    _ => continue,
                };
                obj.insert(k.clone(), nested);
            }
        }
        other => {
            return Err(logic(format!(
                "Invalid path argument `{}`.",
                other.to_json_string()
            )))
        }
    }
    Ok(())
}

/// MERGE: deep merge of objects (functions are called with the current object).
pub fn merge(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    check_val(&v, "merge").at(0)?;
    let mut others = Vec::new();
    for i in 1..ev.nargs() {
        others.push(ev.arg_literal_ok(i)?);
    }
    let mut plain = Vec::new();
    for (i, o) in others.into_iter().enumerate() {
        plain.push(match o {
            Val::Func(f) => MergeArg::Func(Val::Func(f)),
            other => {
                let d = ev.to_datum(other).at(i + 1)?;
                if d.is_ptype() && !matches!(d.reql_type(), Some("LITERAL" | "GEOMETRY")) {
                    return Err(logic(format!(
                        "Cannot merge objects of type `{}`.",
                        d.type_name()
                    )))
                    .at(i + 1);
                }
                MergeArg::Datum(d)
            }
        });
    }
    let ctx = ev.ctx.clone();
    per_object(ev, v, false, move |d| {
        let mut acc = d.clone();
        for a in &plain {
            let with = match a {
                MergeArg::Datum(x) => x.clone(),
                MergeArg::Func(f) => {
                    let r = call_literal_ok(&ctx, f, vec![acc.clone()])?;
                    crate::eval::to_datum(&ctx, r)?
                }
            };
            acc = merge_datum(&acc, &with)?;
        }
        Ok(acc)
    })
}

enum MergeArg {
    Datum(Datum),
    Func(Val),
}

/// Deep-merges `with` into `base` (RethinkDB's merge, honouring `r.literal` inside
/// `with`). A literal is only meaningful as the value of a key: `with` itself being
/// one is RethinkDB's stray literal (its merge would produce an object typed LITERAL).
pub fn merge_datum(base: &Datum, with: &Datum) -> Result<Datum> {
    if with.reql_type() == Some("LITERAL") {
        return Err(stray_literal());
    }
    merge_inner(base, with)
}

/// RethinkDB's error for `r.literal` outside the object passed to merge or update.
pub fn stray_literal() -> crate::error::ReqlError {
    logic(STRAY_LITERAL)
}

const STRAY_LITERAL: &str = "Stray literal keyword found: literal is only legal inside of the object passed to merge or update and cannot nest inside other literals.";

fn merge_inner(base: &Datum, with: &Datum) -> Result<Datum> {
    if with.reql_type() == Some("LITERAL") {
        return Ok(with.get("value").cloned().unwrap_or(Datum::Null));
    }
    match (base, with) {
        (Datum::Object(b), Datum::Object(w)) if !with.is_ptype() && !base.is_ptype() => {
            let mut out = (**b).clone();
            for (k, v) in w.iter() {
                if v.reql_type() == Some("LITERAL") {
                    match v.get("value") {
                        Some(x) => {
                            out.insert(k.clone(), strip_literals(x)?);
                        }
                        None => {
                            out.remove(&**k);
                        }
                    }
                    continue;
                }
                let merged = match out.get(&**k) {
                    Some(old) => merge_inner(old, v)?,
                    None => strip_literals(v)?,
                };
                out.insert(k.clone(), merged);
            }
            Ok(Datum::object(out))
        }
        (_, w) => strip_literals(w),
    }
}

/// Removes `r.literal` wrappers from a value being stored.
fn strip_literals(d: &Datum) -> Result<Datum> {
    match d {
        Datum::Object(o) if d.reql_type() == Some("LITERAL") => {
            Ok(o.get("value").cloned().unwrap_or(Datum::Null))
        }
        Datum::Object(o) => {
            if !o.values().any(has_literal) {
                return Ok(d.clone());
            }
            let mut out = Object::new();
            for (k, v) in o.iter() {
                if v.reql_type() == Some("LITERAL") && v.get("value").is_none() {
                    continue;
                }
                out.insert(k.clone(), strip_literals(v)?);
            }
            Ok(Datum::object(out))
        }
        _ => Ok(d.clone()),
    }
}

fn has_literal(d: &Datum) -> bool {
    match d {
        Datum::Object(o) => d.reql_type() == Some("LITERAL") || o.values().any(has_literal),
        _ => false,
    }
}

/// HAS_FIELDS: a boolean for an object, a filter for a sequence.
pub fn has_fields(ev: &Ev) -> Result<Val> {
    let v = ev.arg(0)?;
    let sel = selectors(ev, 1)?;
    if is_sequence(&v) {
        let seq = ev.to_seq(v)?;
        return Ok(Val::Seq(filter_items(seq, move |d| match d {
            Datum::Object(o) => Ok(sel.iter().all(|s| has_path(o, s))),
            _ => Ok(false),
        })));
    }
    check_val(&v, "has_fields").at(0)?;
    let d = ev.to_datum(v)?;
    let o = expect_object(&d).at(0)?;
    for s in &sel {
        if let Some(epoch) = datum::ptype::time_epoch(s) {
            return Err(logic(format!(
                "Invalid path argument `{}`.",
                Datum::Number(epoch).to_json_string()
            )));
        }
        if !matches!(s, Datum::String(_) | Datum::Array(_) | Datum::Object(_)) {
            return Err(logic(format!(
                "Invalid path argument `{}`.",
                s.to_json_string()
            )));
        }
    }
    Ok(Val::Datum(Datum::Bool(sel.iter().all(|s| has_path(o, s)))))
}

/// Does `o` have the (possibly nested) path `sel`, with a non-null value?
pub fn has_path(o: &Object, sel: &Datum) -> bool {
    match sel {
        Datum::String(k) => o.get(&**k).is_some_and(|v| !matches!(v, Datum::Null)),
        Datum::Array(items) => items.iter().all(|s| has_path(o, s)),
        Datum::Object(m) => m.iter().all(|(k, sub)| match o.get(&**k) {
            None | Some(Datum::Null) => false,
            Some(_) if matches!(sub, Datum::Bool(true)) => true,
            Some(Datum::Object(inner)) => has_path(inner, sub),
            Some(_) => false,
        }),
        _ => false,
    }
}

/// KEYS.
pub fn keys(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    let o = plain_object(&d, "keys").at(0)?;
    Ok(Val::Datum(Datum::array(
        o.keys().map(|k| Datum::String(k.clone())).collect(),
    )))
}

/// VALUES.
pub fn values(ev: &Ev) -> Result<Val> {
    let d = ev.datum(0)?;
    let o = plain_object(&d, "values").at(0)?;
    Ok(Val::Datum(Datum::array(o.values().cloned().collect())))
}

/// The object of `keys`/`values`, or "Cannot call `keys` on objects of type `X`.".
fn plain_object<'a>(d: &'a Datum, term: &str) -> Result<&'a Object> {
    check_plain(d, term)?;
    match d {
        Datum::Object(o) => Ok(o),
        other => Err(logic(format!(
            "Cannot call `{term}` on objects of type `{}`.",
            other.type_name()
        ))),
    }
}

/// LITERAL.
pub fn literal(ev: &Ev) -> Result<Val> {
    if !ev.literal_ok {
        return Err(stray_literal());
    }
    let mut m = Object::new();
    m.insert(Str::from(datum_reql_type()), Datum::str("LITERAL"));
    if ev.nargs() == 1 {
        let v = ev.datum(0)?;
        if has_literal(&v) {
            return Err(stray_literal());
        }
        m.insert(Str::from("value"), v);
    }
    Ok(Val::Datum(Datum::object(m)))
}

fn datum_reql_type() -> &'static str {
    "$reql_type$"
}

/// OBJECT: `r.object(k1, v1, k2, v2, …)`.
pub fn object(ev: &Ev) -> Result<Val> {
    if !ev.nargs().is_multiple_of(2) {
        return Err(logic(format!(
            "OBJECT expects an even number of arguments (but found {}).",
            ev.nargs()
        )));
    }
    let mut m = Object::new();
    let mut i = 0;
    while i < ev.nargs() {
        let k = ev.datum(i)?;
        let k = match k {
            Datum::String(s) => s,
            other => return Err(type_error("STRING", &other)).at(i),
        };
        let v = ev.datum(i + 1)?;
        if let Some(old) = m.get(&*k) {
            return Err(logic(format!(
                "Duplicate key \"{}\" in object.  (got {} and {} as values)",
                k,
                old.to_json_string(),
                v.to_json_string()
            )));
        }
        m.insert(k, v);
        i += 2;
    }
    Ok(Val::Datum(Datum::object(m)))
}

/// An `Arc<str>` key.
pub fn key(s: &str) -> Str {
    Arc::from(s)
}

#[cfg(test)]
mod tests {
    use crate::value::{Env, Val};

    /// Compiles and evaluates a JSON term; the result as JSON, or the error message.
    fn run(json: &str) -> std::result::Result<String, String> {
        let j: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let term = crate::term::compile_term(&j).map_err(|e| e.message)?;
        let ctx = crate::testing::no_tables_ctx();
        let v = crate::eval::eval(&ctx, &Env::default(), &term).map_err(|e| e.message)?;
        let v = match v {
            Val::Seq(s) => Val::Datum(datum::Datum::array(s.collect(1000).map_err(|e| e.message)?)),
            v => v,
        };
        crate::eval::to_datum(&ctx, v)
            .map(|d| d.to_json_string())
            .map_err(|e| e.message)
    }

    fn stray(json: &str) -> bool {
        run(json).is_err_and(|m| m == super::STRAY_LITERAL)
    }

    #[test]
    fn literal_is_only_legal_where_merge_and_update_allow_it() {
        // r.literal('foo') at the top level, and inside a plain object.
        assert!(stray(r#"[137, ["foo"]]"#));
        assert!(stray(r#"[3, [], {"a": [137, [1]]}]"#));
        // Inside the object passed to merge (also through a function's object body).
        assert_eq!(
            run(r#"[35, [{"a": {"b": 1}, "c": 2}, [3, [], {"a": [137, [{"d": 3}]]}]]]"#),
            Ok(r#"{"a":{"d":3},"c":2}"#.into())
        );
        assert_eq!(
            run(r#"[35, [{"a": 1, "c": 2}, [69, [[2, [1]], [3, [], {"a": [137, []]}]]]]]"#),
            Ok(r#"{"c":2}"#.into())
        );
        // Not passed down by other terms, nor nested in another literal.
        assert!(stray(
            r#"[35, [{"a": 1}, [65, [true, [3, [], {"a": [137, [2]]}], {}]]]]"#
        ));
        assert!(stray(
            r#"[35, [{"a": 1}, [3, [], {"a": [137, [[137, [2]]]]}]]]"#
        ));
    }

    #[test]
    fn merging_a_literal_itself_is_a_stray_literal() {
        // obj.merge(r.literal('foo')): the literal is the object merged, not a value.
        assert!(stray(r#"[35, [{"a": 1}, [137, ["foo"]]]]"#));
        assert!(stray(
            r#"[35, [{"a": 1}, [69, [[2, [1]], [137, ["foo"]]]]]]"#
        ));
    }

    #[test]
    fn a_filter_predicate_may_hold_a_literal() {
        // `filter(r.literal(v))` keeps the rows equal to `v` (RethinkDB's `filter_match`),
        // not those that merely have `v`'s fields.
        assert_eq!(
            run(r#"[39, [[2, [{"id": 0}, {"id": 1}]], [137, [{"id": 0}]]]]"#),
            Ok(r#"[{"id":0}]"#.into())
        );
        assert_eq!(
            run(r#"[39, [[2, [{"id": 0, "a": 1}, {"id": 1}]], [137, [{"id": 0}]]]]"#),
            Ok("[]".into())
        );
        assert_eq!(
            run(
                r#"[39, [[2, [{"b": {"c": 0, "d": 1}}, {"b": {"c": 0}}]], [3, [], {"b": [137, [{"c": 0}]]}]]]"#
            ),
            Ok(r#"[{"b":{"c":0}}]"#.into())
        );
    }
}
