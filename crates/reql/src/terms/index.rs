//! Secondary index terms: `index_create`, `index_drop`, `index_list`, `index_rename`,
//! `index_status`, `index_wait`. The index-aware reads (`get_all`, `between`,
//! `order_by(index=)`, `distinct(index=)`, `min`/`max(index=)`, `eq_join(index=)`) are
//! in `index_read` and re-exported here.
//!
//! Index functions travel as FUNC terms in RethinkDB's JSON wire form (`IndexSpec`);
//! `IndexFunction` compiles one back and evaluates it on documents for the `cluster`
//! crate. `index_status`'s `function` is that JSON behind RethinkDB's
//! `$reql_index_function$` prefix (RethinkDB's bytes are its own serialization; only
//! round-tripping through `index_create` is promised, by both).
//!

use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;
use serde_json::{json, Value as Json};

use crate::access::{IndexSpec, IndexStatus, Table};
use crate::ctx::QueryCtx;
use crate::error::{logic, op_failed, Result, WithFrame};
use crate::eval::{describe, type_error, Ev};
use crate::term::Term;
use crate::value::{Env, Val};

pub use super::index_read::{
    between, distinct_on, eq_join, get_all, min_max_on, order_by_index, slice_info,
};

const BLOB_PREFIX: &str = "$reql_index_function$";

pub(crate) fn expect_table(ev: &Ev, i: usize, what: &str) -> Result<Arc<dyn Table>> {
    // RethinkDB's `as_table`: a failed conversion is charged to the argument.
    match ev.arg(i)? {
        Val::Table(t) if t.slice().is_none() => Ok(t),
        other => Err(logic(format!(
            "Expected type {what} but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        )))
        .at(i),
    }
}

/// An optarg `index` as a string (RethinkDB's `as_str` on it, charged to the optarg).
pub fn index_opt(ev: &Ev) -> Result<Option<String>> {
    match ev.opt_datum("index")? {
        None => Ok(None),
        Some(Datum::String(s)) => Ok(Some(s.to_string())),
        Some(d) => Err(type_error("STRING", &d)).at_opt("index"),
    }
}

// ---------------------------------------------------------------- index functions

/// Writes a term back in RethinkDB's JSON wire form; variables bound in `env` (captured
/// by a function) are replaced by their values.
pub fn term_to_json(t: &Term, env: &Env) -> Json {
    match t.tt {
        T::DATUM => datum_to_json(&t.datum),
        T::MAKE_OBJ => Json::Object(
            t.optargs
                .iter()
                .map(|(k, v)| (k.clone(), term_to_json(v, env)))
                .collect(),
        ),
        T::VAR => {
            let id = t.var_id();
            if let Some(Val::Datum(d)) = id.and_then(|id| env.lookup(id)) {
                return datum_to_json(&d);
            }
            json!([
                T::VAR as i64,
                t.args
                    .iter()
                    .map(|a| term_to_json(a, env))
                    .collect::<Vec<_>>()
            ])
        }
        tt => {
            let args: Vec<Json> = t.args.iter().map(|a| term_to_json(a, env)).collect();
            if t.optargs.is_empty() {
                json!([tt as i64, args])
            } else {
                let opts: serde_json::Map<String, Json> = t
                    .optargs
                    .iter()
                    .map(|(k, v)| (k.clone(), term_to_json(v, env)))
                    .collect();
                json!([tt as i64, args, opts])
            }
        }
    }
}

fn datum_to_json(d: &Datum) -> Json {
    match d {
        Datum::Array(a) => json!([
            T::MAKE_ARRAY as i64,
            a.iter().map(datum_to_json).collect::<Vec<_>>()
        ]),
        Datum::Object(o) => Json::Object(
            o.iter()
                .map(|(k, v)| (k.to_string(), datum_to_json(v)))
                .collect(),
        ),
        Datum::MinVal => json!([T::MINVAL as i64, []]),
        Datum::MaxVal => json!([T::MAXVAL as i64, []]),
        other => datum::to_json_value(other),
    }
}

/// Terms an index function may not contain (RethinkDB's `is_deterministic`).
fn deterministic(t: &Term) -> bool {
    let bad = match t.tt {
        T::JAVASCRIPT | T::RANDOM | T::NOW | T::HTTP | T::DB | T::TABLE | T::LINE => true,
        T::UUID => t.args.is_empty(),
        _ => false,
    };
    !bad && t.args.iter().all(|a| deterministic(a))
        && t.optargs.iter().all(|(_, a)| deterministic(a))
}

/// A compiled index function.
pub struct IndexFunction {
    func: crate::value::Func,
    ctx: Arc<QueryCtx>,
}

impl IndexFunction {
    /// Compiles a FUNC term in JSON form.
    pub fn compile(function: &Json) -> Result<IndexFunction> {
        let term = crate::term::compile_term(function)?;
        if !deterministic(&term) {
            return Err(logic(
                "Could not prove function deterministic.  Index functions must be deterministic.",
            ));
        }
        let tables = crate::access::NoTables {
            message: "Index functions must be deterministic.",
            connect: false,
        };
        let ctx = Arc::new(QueryCtx::new(Arc::new(tables), "test".into(), 0.0));
        match crate::eval::eval(&ctx, &Env::default(), &term)? {
            Val::Func(func) => Ok(IndexFunction { func, ctx }),
            _ => Err(logic("Index functions must be functions.")),
        }
    }

    /// The index value of one document.
    pub fn eval(&self, doc: &Datum) -> Result<Datum> {
        let f = Val::Func(self.func.clone());
        let v = crate::eval::call(&self.ctx, &f, vec![doc.clone()])?;
        crate::eval::to_datum(&self.ctx, v)
    }
}

/// The `function` blob of `index_status`.
fn spec_blob(spec: &IndexSpec) -> Datum {
    let body = json!({"function": spec.function, "multi": spec.multi, "geo": spec.geo});
    let mut bytes = BLOB_PREFIX.as_bytes().to_vec();
    bytes.extend_from_slice(body.to_string().as_bytes());
    datum::ptype::make_binary(&bytes)
}

fn spec_from_blob(d: &Datum) -> Result<IndexSpec> {
    let bytes = datum::ptype::binary_bytes(d).unwrap_or_default();
    let body = bytes.strip_prefix(BLOB_PREFIX.as_bytes()).ok_or_else(|| {
        logic("Cannot create an sindex except from a reql_index_function returned from `index_status` in the field `function`.")
    })?;
    let bad = |m: &str| {
        logic(format!(
            "Binary blob passed to index create could not be interpreted as a reql_index_function ({m})."
        ))
    };
    let j: Json = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let function = j
        .get("function")
        .cloned()
        .ok_or_else(|| bad("no function"))?;
    Ok(IndexSpec {
        function,
        multi: j.get("multi").and_then(Json::as_bool).unwrap_or(false),
        geo: j.get("geo").and_then(Json::as_bool).unwrap_or(false),
    })
}

/// A JavaScript rendering of an index function for `index_status`'s `query`.
pub(crate) fn js_of(j: &Json) -> String {
    let arr = match j.as_array() {
        Some(a) => a,
        None => return j.to_string(),
    };
    let tt = arr.first().and_then(Json::as_i64).and_then(T::from_i64);
    let args: Vec<&Json> = arr
        .get(1)
        .and_then(Json::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let list = |xs: &[&Json]| xs.iter().map(|x| js_of(x)).collect::<Vec<_>>().join(", ");
    match tt {
        Some(T::FUNC) => {
            let params: Vec<String> = args
                .first()
                .and_then(|p| p.get(1))
                .and_then(Json::as_array)
                .map(|ps| ps.iter().map(|p| format!("var{p}")).collect())
                .unwrap_or_default();
            let body = args.get(1).map_or_else(String::new, |b| js_of(b));
            format!("function({}) {{ return {body}; }}", params.join(", "))
        }
        Some(T::VAR) => format!(
            "var{}",
            args.first().map_or_else(String::new, |a| a.to_string())
        ),
        Some(T::MAKE_ARRAY) => format!("[{}]", list(&args)),
        Some(T::IMPLICIT_VAR) => "r.row".into(),
        Some(T::BRACKET | T::GET_FIELD) if args.len() == 2 => {
            format!("{}({})", js_of(args[0]), js_of(args[1]))
        }
        Some(tt) => {
            let name = tt.name().to_lowercase();
            match args.split_first() {
                Some((first, rest)) => format!("{}.{}({})", js_of(first), name, list(rest)),
                None => format!("r.{name}()"),
            }
        }
        None => j.to_string(),
    }
}

fn status_datum(s: &IndexStatus) -> Datum {
    let mut query = format!("indexCreate('{}', {}", s.name, js_of(&s.spec.function));
    match (s.spec.multi, s.spec.geo) {
        (true, true) => query.push_str(", {multi: true, geo: true}"),
        (true, false) => query.push_str(", {multi: true}"),
        (false, true) => query.push_str(", {geo: true}"),
        _ => {}
    }
    query.push(')');
    let mut pairs = vec![
        ("index", Datum::str(&s.name)),
        ("ready", Datum::Bool(s.ready)),
        ("outdated", Datum::Bool(false)),
        ("multi", Datum::Bool(s.spec.multi)),
        ("geo", Datum::Bool(s.spec.geo)),
        ("function", spec_blob(&s.spec)),
        ("query", Datum::str(&query)),
    ];
    if !s.ready {
        pairs.push(("progress", Datum::Number(s.progress)));
    }
    Datum::from_pairs(pairs)
}

// ---------------------------------------------------------------- index terms

/// INDEX_CREATE: `table.index_create(name[, function], {multi, geo})`.
pub fn index_create(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let name = ev.string(1)?;
    if name == t.primary_key() {
        return Err(logic(format!(
            "Index name conflict: `{name}` is the name of the primary key."
        )));
    }
    // A function the user passed is blamed for its own checks (RethinkDB's `func_t`
    // raises them); a stored blob or the default `row(name)` leave them to the term.
    let arg = if ev.nargs() == 3 {
        Some(ev.arg(2)?)
    } else {
        None
    };
    let user_function = matches!(arg, Some(Val::Func(_)));
    let mut spec = if let Some(arg) = arg {
        match arg {
            Val::Func(f) => {
                let params: Vec<Json> = f.params.iter().map(|p| json!(p)).collect();
                IndexSpec {
                    function: json!([
                        T::FUNC as i64,
                        [
                            [T::MAKE_ARRAY as i64, params],
                            term_to_json(&f.body, &f.env)
                        ]
                    ]),
                    multi: false,
                    geo: false,
                }
            }
            Val::Datum(d) if d.reql_type() == Some("BINARY") => spec_from_blob(&d)?,
            other => {
                return Err(logic(format!(
                    "Expected type FUNCTION but found {}:\n{}",
                    other.kind_name(),
                    describe(&other)
                )))
                .at(2)
            }
        }
    } else {
        IndexSpec {
            function: json!([
                T::FUNC as i64,
                [
                    [T::MAKE_ARRAY as i64, [1]],
                    [T::GET_FIELD as i64, [[T::VAR as i64, [1]], name.as_str()]]
                ]
            ]),
            multi: false,
            geo: false,
        }
    };
    let compiled = IndexFunction::compile(&spec.function);
    if user_function {
        compiled.at(2)?;
    } else {
        compiled.here()?;
    }
    if ev.term.optarg("multi").is_some() {
        spec.multi = ev.opt_bool("multi", false)?;
    }
    if ev.term.optarg("geo").is_some() {
        spec.geo = ev.opt_bool("geo", false)?;
    }
    t.index_create(&name, spec)?;
    Ok(Val::Datum(Datum::from_pairs([(
        "created",
        Datum::Number(1.0),
    )])))
}

/// INDEX_DROP.
pub fn index_drop(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let name = ev.string(1)?;
    t.index_drop(&name)?;
    Ok(Val::Datum(Datum::from_pairs([(
        "dropped",
        Datum::Number(1.0),
    )])))
}

/// INDEX_LIST: the index names, sorted.
pub fn index_list(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let names = t
        .index_status()?
        .into_iter()
        .map(|s| Datum::str(&s.name))
        .collect();
    Ok(Val::Datum(Datum::array(names)))
}

/// INDEX_RENAME: `table.index_rename(old, new, {overwrite})`.
pub fn index_rename(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let old = ev.string(1)?;
    let new = ev.string(2)?;
    for n in [&old, &new] {
        if n == t.primary_key() {
            return Err(logic(format!(
                "Index name conflict: `{n}` is the name of the primary key."
            )));
        }
    }
    let overwrite = ev.opt_bool("overwrite", false)?;
    t.index_rename(&old, &new, overwrite)?;
    let renamed = if old == new { 0.0 } else { 1.0 };
    Ok(Val::Datum(Datum::from_pairs([(
        "renamed",
        Datum::Number(renamed),
    )])))
}

/// The statuses of the named indexes (all when none are named), sorted by name.
fn statuses(ev: &Ev, t: &Arc<dyn Table>) -> Result<Vec<IndexStatus>> {
    let mut wanted = Vec::new();
    for i in 1..ev.nargs() {
        wanted.push(ev.string(i)?);
    }
    let all = t.index_status()?;
    for w in &wanted {
        if !all.iter().any(|s| &s.name == w) {
            return Err(crate::access::index_not_found(w, t.db(), t.name()));
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| wanted.is_empty() || wanted.contains(&s.name))
        .collect())
}

/// INDEX_STATUS.
pub fn index_status(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let list = statuses(ev, &t)?;
    Ok(Val::Datum(Datum::array(
        list.iter().map(status_datum).collect(),
    )))
}

/// INDEX_WAIT: polls until every named index is ready.
pub fn index_wait(ev: &Ev) -> Result<Val> {
    let t = expect_table(ev, 0, "TABLE")?;
    let mut nap = std::time::Duration::from_millis(5);
    loop {
        let list = statuses(ev, &t)?;
        if list.iter().all(|s| s.ready) {
            return Ok(Val::Datum(Datum::array(
                list.iter().map(status_datum).collect(),
            )));
        }
        if ev.ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(op_failed("Query interrupted: the client disconnected."));
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(std::time::Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_round_trip_and_evaluate() {
        let j: Json =
            serde_json::from_str(r#"[69,[[2,[1]],[2,[[31,[[10,[1]],"b"]],[31,[[10,[1]],"c"]]]]]]"#)
                .unwrap();
        let f = IndexFunction::compile(&j).unwrap();
        let doc = datum::from_json_slice(br#"{"b":1,"c":"x"}"#).unwrap();
        assert_eq!(f.eval(&doc).unwrap().to_json_string(), r#"[1,"x"]"#);
        assert!(f.eval(&Datum::from_pairs([("b", Datum::Null)])).is_err());
        let spec = IndexSpec {
            function: j,
            multi: true,
            geo: false,
        };
        assert_eq!(spec_from_blob(&spec_blob(&spec)).unwrap(), spec);
        let bad: Json = serde_json::from_str(r#"[69,[[2,[1]],[151,[]]]]"#).unwrap();
        let e = IndexFunction::compile(&bad).err().unwrap();
        assert!(e.message.contains("deterministic"));
        let t = crate::term::compile_term(&spec.function).unwrap();
        assert_eq!(term_to_json(&t, &Env::default()), spec.function);
    }
}
