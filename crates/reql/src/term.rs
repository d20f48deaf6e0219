//! Compilation: the JSON term tree of a query → a checked `Term` tree.
//!
//! Checks done here, before anything runs (RethinkDB reports these as compile errors):
//! known term types, arity (`spec::arity`), optarg names (`spec::optargs`), and where
//! `r.asc`/`r.desc` may appear (`check_order_marks`).
//! Literal subtrees (MAKE_ARRAY/MAKE_OBJ of datums) are folded into one DATUM so that a
//! large inserted document costs one allocation per value, not one term per value.
//! `direct` compiles a query straight from its bytes to the same terms (the fast path
//! of `query::compile_query`); `compile_term` is the reference it is tested against.

use std::sync::Arc;

use datum::{Datum, Object, Str};
use proto::ql2::TermType;
use serde_json::Value as Json;

use crate::error::{compile, Frame, Path, ReqlError, Result};
use crate::spec;

pub(crate) mod direct;

/// A compiled term.
#[derive(Debug)]
pub struct Term {
    /// The term type (`DATUM` for literals).
    pub tt: TermType,
    /// Positional arguments.
    pub args: Vec<Arc<Term>>,
    /// Optional arguments in the order received (MAKE_OBJ keeps its fields here).
    pub optargs: Vec<(String, Arc<Term>)>,
    /// The value of a `DATUM` term (null otherwise).
    pub datum: Datum,
    /// Where the term sits in the query, root first: the backtrace of an error charged to
    /// it. A term the server generates carries the path of the user term it came from.
    pub path: Path,
}

impl Term {
    /// A literal term.
    pub fn datum(d: Datum) -> Arc<Term> {
        Self::datum_at(d, Path::root())
    }

    /// A literal term charged to `path`.
    pub fn datum_at(d: Datum, path: Path) -> Arc<Term> {
        Arc::new(Term {
            tt: TermType::DATUM,
            args: Vec::new(),
            optargs: Vec::new(),
            datum: d,
            path,
        })
    }

    /// The optarg of this name, if given.
    pub fn optarg(&self, name: &str) -> Option<&Arc<Term>> {
        self.optargs.iter().find(|(k, _)| k == name).map(|(_, t)| t)
    }

    /// The variable a VAR term reads (`None` for other terms).
    pub fn var_id(&self) -> Option<i64> {
        if self.tt != TermType::VAR {
            return None;
        }
        self.args
            .first()
            .and_then(|a| a.datum.as_f64())
            .map(|n| n as i64)
    }

    /// True if this term or a descendant is an IMPLICIT_VAR (`r.row`).
    pub fn uses_implicit_var(&self) -> bool {
        if self.tt == TermType::IMPLICIT_VAR {
            return true;
        }
        if self.tt == TermType::FUNC {
            return false;
        }
        self.args.iter().any(|a| a.uses_implicit_var())
            || self.optargs.iter().any(|(_, a)| a.uses_implicit_var())
    }
}

/// Compiles a term from its JSON form (the root of a query).
pub fn compile_term(j: &Json) -> Result<Arc<Term>> {
    compile_at(j, &Path::root())
}

/// Compiles a term found at `path`.
fn compile_at(j: &Json, path: &Path) -> Result<Arc<Term>> {
    match j {
        Json::Array(items) => compile_array(items, path),
        Json::Object(map) => {
            let mut fields = Vec::with_capacity(map.len());
            let mut all_datum = true;
            for (k, v) in map {
                let t = compile_at(v, &path.child(Frame::Opt(k.clone())))
                    .map_err(|e| e.with_frame(Frame::Opt(k.clone())))?;
                all_datum &= t.tt == TermType::DATUM;
                fields.push((k.clone(), t));
            }
            check_order_marks(TermType::MAKE_OBJ, &[], &fields)?;
            if all_datum {
                let obj: Object = fields
                    .into_iter()
                    .map(|(k, t)| (Str::from(k.as_str()), t.datum.clone()))
                    .collect();
                return Ok(Term::datum_at(
                    check_ptype(Datum::object(obj))?,
                    path.clone(),
                ));
            }
            Ok(make_obj(fields, path))
        }
        other => Ok(Term::datum_at(
            datum::from_json_value(other).map_err(|e| compile(e.0))?,
            path.clone(),
        )),
    }
}

/// A MAKE_OBJ term of fields (in key order) that are not all literals; their marks
/// were checked by `check_order_marks`.
fn make_obj(fields: Vec<(String, Arc<Term>)>, path: &Path) -> Arc<Term> {
    Arc::new(Term {
        tt: TermType::MAKE_OBJ,
        args: Vec::new(),
        optargs: fields,
        datum: Datum::Null,
        path: path.clone(),
    })
}

/// RethinkDB's checks (and normalisation) of a literal object that may be a
/// pseudo-type.
fn check_ptype(d: Datum) -> Result<Datum> {
    match d.reql_type() {
        None => Ok(d),
        Some("TIME") => {
            if d.get("epoch_time").and_then(Datum::as_f64).is_none() {
                return Err(crate::error::logic(format!(
                    "pseudotype TIME object {} does not have the expected field `epoch_time`.",
                    d.to_pretty_string()
                )));
            }
            if d.get("timezone").and_then(Datum::as_str).is_none() {
                return Err(crate::error::logic(format!(
                    "pseudotype TIME object {} does not have the expected field `timezone`.",
                    d.to_pretty_string()
                )));
            }
            // RethinkDB's `sanitize_time`: times have millisecond precision.
            let epoch = d.get("epoch_time").and_then(Datum::as_f64).unwrap_or(0.0);
            let rounded = (epoch * 1000.0).round() / 1000.0;
            let mut d = d;
            if rounded != epoch {
                if let Datum::Object(m) = &mut d {
                    Arc::make_mut(m).insert(Str::from("epoch_time"), Datum::Number(rounded));
                }
            }
            Ok(d)
        }
        Some("BINARY") => {
            let data = match d.get("data") {
                Some(Datum::String(s)) => s.clone(),
                Some(other) => return Err(crate::eval::type_error("STRING", other)),
                None => {
                    return Err(crate::error::logic(
                        "Invalid binary pseudotype: lacking `data` key.",
                    ))
                }
            };
            crate::terms::control::check_base64(&data)?;
            let bytes = base64_decode_lenient(&data);
            Ok(datum::ptype::make_binary(&bytes))
        }
        Some("GEOMETRY") => {
            crate::terms::geo::shape::sanitize(&d)?;
            Ok(d)
        }
        Some("LITERAL") => Ok(d),
        Some(t) => Err(crate::error::logic(format!("Unknown $reql_type$ `{t}`."))),
    }
}

/// True when a FUNC's parameter list (its first argument) names exactly one variable.
fn one_param(args: &[Arc<Term>]) -> bool {
    args.first()
        .and_then(|p| p.datum.as_array())
        .is_some_and(|p| p.len() == 1)
}

/// Does `t` hold a one-parameter function whose body uses `r.row`? Inside another
/// one-parameter function that is RethinkDB's "r.row in nested queries" error.
fn nested_implicit(t: &Term) -> bool {
    t.args
        .iter()
        .chain(t.optargs.iter().map(|(_, a)| a))
        .any(|a| {
            if a.tt == TermType::FUNC && one_param(&a.args) {
                a.args
                    .get(1)
                    .is_some_and(|b| b.uses_implicit_var() || nested_implicit(b))
            } else {
                nested_implicit(a)
            }
        })
}

fn compile_array(items: &[Json], path: &Path) -> Result<Arc<Term>> {
    let code = items.first().and_then(Json::as_i64).ok_or_else(|| {
        compile("Expected a term type number as the first element of a term array.")
    })?;
    let tt = TermType::from_i64(code)
        .ok_or_else(|| compile(format!("Unrecognized TermType: {code}.")))?;
    if items.len() > 3 {
        return Err(compile(format!(
            "Expected a term array of at most 3 elements but found {}.",
            items.len()
        )));
    }
    if tt == TermType::DATUM {
        let v = items.get(1).unwrap_or(&Json::Null);
        return Ok(Term::datum_at(
            datum::from_json_value(v).map_err(|e| compile(e.0))?,
            path.clone(),
        ));
    }
    let mut args = Vec::new();
    match items.get(1) {
        None | Some(Json::Null) => {}
        Some(Json::Array(a)) => {
            args.reserve(a.len());
            for (i, x) in a.iter().enumerate() {
                args.push(
                    compile_at(x, &path.child(Frame::Pos(i)))
                        .map_err(|e| e.with_frame(Frame::Pos(i)))?,
                );
            }
        }
        Some(_) => return Err(compile("Expected the arguments of a term to be an array.")),
    }
    let mut optargs = Vec::new();
    match items.get(2) {
        None | Some(Json::Null) => {}
        Some(Json::Object(o)) => {
            for (k, v) in o {
                optargs.push((
                    k.clone(),
                    compile_at(v, &path.child(Frame::Opt(k.clone())))
                        .map_err(|e| e.with_frame(Frame::Opt(k.clone())))?,
                ));
            }
        }
        Some(_) => {
            return Err(compile(
                "Expected the optional arguments of a term to be an object.",
            ))
        }
    }
    if tt == TermType::MAKE_ARRAY && args.iter().all(|a| a.tt == TermType::DATUM) {
        return Ok(Term::datum_at(
            Datum::array(args.iter().map(|a| a.datum.clone()).collect()),
            path.clone(),
        ));
    }
    finish_term(tt, args, optargs, path)
}

/// The checks of a term whose arguments and optargs (in key order) are compiled, and
/// the term. Not for a MAKE_ARRAY of literals (folded into a DATUM before this).
fn finish_term(
    tt: TermType,
    args: Vec<Arc<Term>>,
    optargs: Vec<(String, Arc<Term>)>,
    path: &Path,
) -> Result<Arc<Term>> {
    // With `r.args` among the arguments the count is known only once it is expanded:
    // `eval::expand_args` checks it then (RethinkDB's `arg_terms_t`).
    if !args.iter().any(|a| a.tt == TermType::ARGS) {
        check_arity(tt, args.len())?;
    }
    check_order_marks(tt, &args, &optargs)?;
    if tt == TermType::FUNC && one_param(&args) && args.get(1).is_some_and(|b| nested_implicit(b)) {
        return Err(compile(
            "Cannot use r.row in nested queries.  Use functions instead.",
        ));
    }
    if let Some(allowed) = spec::optargs(tt) {
        for (k, _) in &optargs {
            if !allowed.contains(&k.as_str()) {
                // RethinkDB charges it to the optarg's value.
                return Err(compile(format!("Unrecognized optional argument `{k}`."))
                    .with_frame(Frame::Opt(k.clone())));
            }
        }
    }
    if matches!(
        tt,
        TermType::MAP
            | TermType::FILTER
            | TermType::CONCAT_MAP
            | TermType::REDUCE
            | TermType::ORDER_BY
            | TermType::GROUP
            | TermType::FOLD
    ) {
        // Charged to the nested write term.
        if let Some(w) = args.iter().skip(1).find_map(|a| find_write(a)) {
            return Err(compile(
                "Cannot nest writes or meta ops in stream operations.  Use FOR_EACH instead.",
            )
            .blame_path(&w));
        }
    }
    Ok(Arc::new(Term {
        tt,
        args,
        optargs,
        datum: Datum::Null,
        path: path.clone(),
    }))
}

/// RethinkDB's compile-time rule for `r.asc`/`r.desc`: they may be arguments (or the
/// `index` optarg) of ORDER_BY, the `interleave` optarg of UNION, or elements of an array
/// given as that optarg. Elsewhere they are a compile error charged to the ASC/DESC
/// term. An array's elements are checked by the term holding the array, which knows
/// whether it is `interleave`; a bare ASC/DESC at the root fails when evaluated.
fn check_order_marks(
    tt: TermType,
    args: &[Arc<Term>],
    optargs: &[(String, Arc<Term>)],
) -> Result<()> {
    let is_mark = |t: &Term| matches!(t.tt, TermType::ASC | TermType::DESC);
    let misplaced = |t: &Term| {
        Err(compile(format!(
            "{} may only be used as an argument to ORDER_BY or UNION.",
            t.tt.name()
        ))
        .blame_path(&t.path))
    };
    let children = args
        .iter()
        .map(|a| (None, a))
        .chain(optargs.iter().map(|(k, a)| (Some(k.as_str()), a)));
    for (opt, child) in children {
        let interleave = tt == TermType::UNION && opt == Some("interleave");
        let deferred = tt == TermType::MAKE_ARRAY;
        if is_mark(child) && tt != TermType::ORDER_BY && !interleave && !deferred {
            return misplaced(child);
        }
        if child.tt == TermType::MAKE_ARRAY && tt != TermType::MAKE_ARRAY && !interleave {
            if let Some(m) = child.args.iter().find(|x| is_mark(x)) {
                return misplaced(m);
            }
        }
    }
    if tt == TermType::MAKE_ARRAY {
        // Nested arrays: an element array's marks are never in an allowed place.
        for child in args.iter().filter(|a| a.tt == TermType::MAKE_ARRAY) {
            if let Some(m) = child.args.iter().find(|x| is_mark(x)) {
                return misplaced(m);
            }
        }
    }
    Ok(())
}

/// The path of the first write or catalog change in a subtree.
fn find_write(t: &Term) -> Option<Path> {
    if has_write_tt(t.tt) {
        return Some(t.path.clone());
    }
    t.args
        .iter()
        .chain(t.optargs.iter().map(|(_, a)| a))
        .find_map(|a| find_write(a))
}

/// True when a term type performs a write or a catalog change.
fn has_write_tt(tt: TermType) -> bool {
    matches!(
        tt,
        TermType::INSERT
            | TermType::UPDATE
            | TermType::REPLACE
            | TermType::DELETE
            | TermType::DB_CREATE
            | TermType::DB_DROP
            | TermType::TABLE_CREATE
            | TermType::TABLE_DROP
            | TermType::INDEX_CREATE
            | TermType::INDEX_DROP
            | TermType::INDEX_RENAME
            | TermType::SYNC
            | TermType::RECONFIGURE
            | TermType::REBALANCE
    )
}

fn check_arity(tt: TermType, n: usize) -> Result<()> {
    let (min, max) = spec::arity(tt);
    let ok = n >= min && max.is_none_or(|m| n <= m);
    if ok {
        return Ok(());
    }
    Err(arity_error(min, max, n))
}

/// RethinkDB's arity message (`argspec_t::print`), a compile error.
pub fn arity_error(min: usize, max: Option<usize>, n: usize) -> ReqlError {
    compile(arity_message(min, max, n))
}

/// "Expected X arguments but found N." in RethinkDB's wording.
pub fn arity_message(min: usize, max: Option<usize>, n: usize) -> String {
    match max {
        Some(m) if m == min => format!(
            "Expected {} argument{} but found {}.",
            min,
            if min == 1 { "" } else { "s" },
            n
        ),
        None => format!("Expected {min} or more arguments but found {n}."),
        Some(m) => format!("Expected between {min} and {m} arguments but found {n}."),
    }
}

/// Decodes base64 that passed `check_base64` (whitespace and missing padding allowed).
fn base64_decode_lenient(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Result<Arc<Term>> {
        compile_term(&serde_json::from_str(s).unwrap())
    }

    #[test]
    fn folds_literals() {
        let t = c(r#"[2,[1,{"a":[2,[2,3]]}]]"#).unwrap();
        assert_eq!(t.tt, TermType::DATUM);
        assert_eq!(t.datum.to_json_string(), r#"[1,{"a":[2,3]}]"#);
    }

    #[test]
    fn arity_and_optargs() {
        let e = c(r#"[16,[1,2,3]]"#).unwrap_err();
        assert_eq!(e.message, "Expected 2 arguments but found 3.");
        let e = c(r#"[16,[1,2],{"bogus":1}]"#).unwrap_err();
        assert_eq!(e.message, "Unrecognized optional argument `bogus`.");
        let e = c(r#"[99999,[]]"#).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Compile);
    }

    #[test]
    fn arity_waits_for_args_expansion() {
        // r.time(r.args([...])): one argument before expansion, seven after.
        assert!(c(r#"[136,[[154,[[2,[1986,11,3,12,0,0,"Z"]]]]]]"#).is_ok());
        // r.now(r.args([])) and r.db_list(r.args([])) compile; the count is checked later.
        assert!(c(r#"[103,[[154,[[2,[]]]]]]"#).is_ok());
        assert!(c(r#"[59,[[154,[[2,[]]]]]]"#).is_ok());
        let e = c(r#"[136,[1986]]"#).unwrap_err();
        assert_eq!(e.message, "Expected between 4 and 7 arguments but found 1.");
    }

    #[test]
    fn terms_without_arguments() {
        for (q, msg) in [
            (r#"[59,[1]]"#, "Expected 0 arguments but found 1."),
            (r#"[103,[1]]"#, "Expected 0 arguments but found 1."),
            (r#"[180,[1]]"#, "Expected 0 arguments but found 1."),
            (
                r#"[62,[[14,["test"]],1]]"#,
                "Expected between 0 and 1 arguments but found 2.",
            ),
            (r#"[24,[]]"#, "Expected 1 or more arguments but found 0."),
        ] {
            let e = c(q).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::Compile, "{q}");
            assert_eq!(e.message, msg, "{q}");
        }
        // wait, reconfigure and rebalance take their target optionally.
        for q in [r#"[177,[]]"#, r#"[176,[]]"#, r#"[179,[]]"#] {
            assert!(c(q).is_ok(), "{q}");
        }
    }
}
