//! `r.js`: JavaScript evaluated by QuickJS (`rquickjs`), as RethinkDB 2.4.2+ does.
//!
//! Every evaluation runs in a fresh QuickJS runtime with a memory limit, a stack limit
//! and an interrupt handler that enforces the `timeout` optarg (seconds, default 5).
//! QuickJS core has no filesystem, network or module loader, so scripts reach nothing
//! outside their own heap.
//!
//! A source that evaluates to a JavaScript function yields a ReQL function value: a
//! `Func` with no parameters (any arity, as JavaScript ignores extra arguments) whose
//! body is the `JAVASCRIPT` term itself, carrying the source and the `timeout` datum.
//! `eval::call_vals` sends such functions to [`call`], which, like RethinkDB's
//! `js_func_t`, evaluates the source again and calls the function with the arguments.
//!
//! Results convert to datums as RethinkDB's `js_to_datum` does (`Date` becomes TIME,
//! `undefined`, functions and RegExps are errors), and every JavaScript failure is a
//! ReqlQueryLogicError carrying the engine's text (e.g. `SyntaxError: ...`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datum::Datum;
use proto::ql2::TermType as T;
use rquickjs::context::EvalOptions;
use rquickjs::function::Args;
use rquickjs::{Array, Coerced, Context, Ctx, Function, Object, Runtime, Type, Value};

use crate::ctx::QueryCtx;
use crate::error::{internal, logic, Result, WithFrame};
use crate::eval::{expect_num, to_datum, Ev};
use crate::term::Term;
use crate::value::{Env, Func, Val};

/// The heap limit of one evaluation's runtime.
const MEMORY_LIMIT: usize = 128 << 20;
/// The JavaScript stack limit of one evaluation.
const MAX_STACK: usize = 512 << 10;
/// RethinkDB's nesting limit when converting a result (`TO_JSON_RECURSION_LIMIT`).
const RECURSION_LIMIT: usize = 500;
/// The default `timeout`, in milliseconds.
const DEFAULT_TIMEOUT_MS: u64 = 5000;

/// JAVASCRIPT: evaluates the source; a function result becomes a ReQL function value.
pub fn javascript(ev: &Ev) -> Result<Val> {
    let timeout = ev.opt_datum("timeout")?;
    let timeout_ms = match &timeout {
        Some(d) => timeout_ms(expect_num(d).at_opt("timeout")?),
        None => DEFAULT_TIMEOUT_MS,
    };
    let source = ev.string(0)?;
    match run(&source, timeout_ms, None, ev.ctx.array_limit)? {
        Outcome::Datum(d) => Ok(Val::Datum(d)),
        Outcome::Function => Ok(Val::Func(js_func(source, timeout, ev.env))),
    }
}

/// Calls a function value made by `r.js` (one whose body is a `JAVASCRIPT` term).
pub fn call(ctx: &Arc<QueryCtx>, func: &Func, args: Vec<Val>) -> Result<Val> {
    let body = &func.body;
    let source = body
        .args
        .first()
        .and_then(|t| t.datum.as_str())
        .ok_or_else(|| internal("JavaScript function without source."))?;
    let timeout_ms = match body.optarg("timeout").and_then(|t| t.datum.as_f64()) {
        Some(secs) => timeout_ms(secs),
        None => DEFAULT_TIMEOUT_MS,
    };
    let args = args
        .into_iter()
        .map(|v| to_datum(ctx, v))
        .collect::<Result<Vec<_>>>()?;
    match run(source, timeout_ms, Some(&args), ctx.array_limit)? {
        Outcome::Datum(d) => Ok(Val::Datum(d)),
        Outcome::Function => Err(logic(
            "Returning functions from within `r.js` is unsupported.",
        )),
    }
}

/// True when a function value was made by `r.js`.
pub fn is_js_func(func: &Func) -> bool {
    func.body.tt == T::JAVASCRIPT
}

/// The function value of a source that evaluated to a JavaScript function.
fn js_func(source: String, timeout: Option<Datum>, env: &Env) -> Func {
    let optargs = timeout
        .map(|d| vec![("timeout".to_string(), Term::datum(d))])
        .unwrap_or_default();
    Func {
        params: Arc::new(Vec::new()),
        body: Arc::new(Term {
            tt: T::JAVASCRIPT,
            args: vec![Term::datum(Datum::from(source))],
            optargs,
            datum: Datum::Null,
            path: Default::default(),
        }),
        env: env.clone(),
        compiled: None,
        implicit: false,
    }
}

/// Seconds to whole milliseconds, saturating as RethinkDB's `uint64_t` conversion.
fn timeout_ms(secs: f64) -> u64 {
    let ms = secs * 1000.0;
    if ms.is_nan() || ms <= 0.0 {
        0
    } else if ms >= u64::MAX as f64 {
        u64::MAX
    } else {
        ms as u64
    }
}

/// What one evaluation produced.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// A datum.
    Datum(Datum),
    /// The source evaluated to a function (only when not calling it).
    Function,
}

/// Evaluates `source` in a fresh runtime; with `call_args`, calls the function it
/// evaluates to with those arguments.
fn run(
    source: &str,
    timeout_ms: u64,
    call_args: Option<&[Datum]>,
    limit: usize,
) -> Result<Outcome> {
    let rt = Runtime::new().map_err(|e| internal(format!("JavaScript runtime: {e}")))?;
    rt.set_memory_limit(MEMORY_LIMIT);
    rt.set_max_stack_size(MAX_STACK);
    let fired = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now().checked_add(Duration::from_millis(timeout_ms));
    {
        let fired = fired.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            let late = deadline.is_some_and(|d| Instant::now() >= d);
            if late {
                fired.store(true, Ordering::Relaxed);
            }
            late
        })));
    }
    let cx = Context::full(&rt).map_err(|e| internal(format!("JavaScript context: {e}")))?;
    let out = cx.with(|cx| eval_in(&cx, source, call_args, limit));
    if fired.load(Ordering::Relaxed) {
        return Err(logic(format!(
            "JavaScript query `{source}` timed out after {}.{:03} seconds.",
            timeout_ms / 1000,
            timeout_ms % 1000
        )));
    }
    out.map_err(logic)
}

/// Builtins captured before user code runs, so a script cannot redefine them.
struct Builtins<'js> {
    date: Option<Object<'js>>,
    get_time: Option<Function<'js>>,
}

impl<'js> Builtins<'js> {
    fn capture(cx: &Ctx<'js>) -> Builtins<'js> {
        let g = cx.globals();
        let date: Option<Object> = g.get("Date").ok();
        let get_time = date
            .as_ref()
            .and_then(|d| d.get::<_, Object>("prototype").ok())
            .and_then(|p| p.get::<_, Function>("getTime").ok());
        Builtins { date, get_time }
    }
}

/// The evaluation proper; errors are RethinkDB's message texts.
fn eval_in<'js>(
    cx: &Ctx<'js>,
    source: &str,
    call_args: Option<&[Datum]>,
    limit: usize,
) -> std::result::Result<Outcome, String> {
    let b = Builtins::capture(cx);
    let mut opts = EvalOptions::default();
    opts.global = true;
    opts.strict = false;
    let val: Value = cx
        .eval_with_options(source, opts)
        .map_err(|e| js_error(cx, e))?;
    let Some(args) = call_args else {
        if val.is_function() {
            return Ok(Outcome::Function);
        }
        return to_datum_js(&b, &val, RECURSION_LIMIT, limit).map(Outcome::Datum);
    };
    let Some(f) = val.as_function() else {
        return Err("JavaScript source did not evaluate to a function.".into());
    };
    let mut a = Args::new(cx.clone(), args.len());
    let this = Object::new(cx.clone()).map_err(|e| js_error(cx, e))?;
    a.this(this).map_err(|e| js_error(cx, e))?;
    for d in args {
        let v = from_datum(cx, &b, d)?;
        a.push_arg(v).map_err(|e| js_error(cx, e))?;
    }
    let r: Value = f.call_arg(a).map_err(|e| js_error(cx, e))?;
    if r.is_function() {
        return Err("Returning functions from within `r.js` is unsupported.".into());
    }
    to_datum_js(&b, &r, RECURSION_LIMIT, limit).map(Outcome::Datum)
}

/// The text of a failure: the thrown value as JavaScript's `String(e)` prints it.
fn js_error(cx: &Ctx, e: rquickjs::Error) -> String {
    if !e.is_exception() {
        return e.to_string();
    }
    let thrown = cx.catch();
    match thrown.get::<Coerced<String>>() {
        Ok(s) => s.0,
        Err(_) => "Unknown error".to_string(),
    }
}

/// A JavaScript value as a datum (RethinkDB's `js_make_datum`).
fn to_datum_js<'js>(
    b: &Builtins<'js>,
    v: &Value<'js>,
    depth: usize,
    limit: usize,
) -> std::result::Result<Datum, String> {
    if depth == 0 {
        return Err("Recursion limit exceeded in js_to_json (circular reference?).".into());
    }
    let cx = v.ctx();
    let err = |e| js_error(cx, e);
    match v.type_of() {
        Type::String => Ok(Datum::from(v.get::<String>().map_err(err)?)),
        Type::Int | Type::Float => {
            let n = v.as_number().unwrap_or(f64::NAN);
            finite(n).map(Datum::Number)
        }
        Type::Bool => Ok(Datum::Bool(v.as_bool().unwrap_or(false))),
        Type::Null => Ok(Datum::Null),
        Type::Undefined => Err("Cannot convert javascript `undefined` to ql::datum_t.".into()),
        Type::Array => {
            let Some(arr) = v.as_array() else {
                return Err("Unrecognized value type when converting to ql::datum_t.".into());
            };
            array_datum(b, arr, depth, limit)
        }
        Type::Function | Type::Constructor => Err("Cannot convert function to ql::datum_t.".into()),
        Type::Object | Type::Exception | Type::Promise | Type::Proxy => {
            let Some(obj) = v.as_object() else {
                return Err("Unrecognized value type when converting to ql::datum_t.".into());
            };
            // SAFETY: both only read the tag and class id of a live value of this context.
            let (is_regexp, is_date) = unsafe {
                (
                    rquickjs::qjs::JS_IsRegExp(v.as_raw()),
                    rquickjs::qjs::JS_IsDate(v.as_raw()),
                )
            };
            if is_regexp {
                return Err("Cannot convert RegExp to ql::datum_t.".into());
            }
            if is_date {
                if let Some(get_time) = &b.get_time {
                    let mut a = Args::new(cx.clone(), 0);
                    a.this(obj.clone()).map_err(err)?;
                    let ms: f64 = get_time.call_arg(a).map_err(err)?;
                    let secs = finite(ms)? / 1000.0;
                    return Ok(datum::ptype::make_time(secs, "+00:00"));
                }
            }
            let mut m = datum::Object::new();
            for prop in obj.props::<String, Value>() {
                let (k, val) = prop.map_err(err)?;
                let d = to_datum_js(b, &val, depth - 1, limit)?;
                m.insert(k.into(), d);
            }
            Ok(Datum::object(m))
        }
        _ => Err("Unrecognized value type when converting to ql::datum_t.".into()),
    }
}

/// An array's items as a datum array, within the array size limit.
fn array_datum<'js>(
    b: &Builtins<'js>,
    arr: &Array<'js>,
    depth: usize,
    limit: usize,
) -> std::result::Result<Datum, String> {
    let cx = arr.ctx();
    let len = arr.len();
    if len > limit {
        return Err(format!("Array over size limit `{limit}`."));
    }
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let item: Value = arr.get(i).map_err(|e| js_error(cx, e))?;
        out.push(to_datum_js(b, &item, depth - 1, limit)?);
    }
    Ok(Datum::array(out))
}

/// RethinkDB refuses NaN and infinities.
fn finite(n: f64) -> std::result::Result<f64, String> {
    if n.is_finite() {
        Ok(n)
    } else {
        Err("Number return value is not finite.".into())
    }
}

/// A datum as a JavaScript value (RethinkDB's `js_from_datum`).
fn from_datum<'js>(
    cx: &Ctx<'js>,
    b: &Builtins<'js>,
    d: &Datum,
) -> std::result::Result<Value<'js>, String> {
    let err = |e| js_error(cx, e);
    Ok(match d {
        Datum::MinVal => return Err("`r.minval` cannot be passed to `r.js`.".into()),
        Datum::MaxVal => return Err("`r.maxval` cannot be passed to `r.js`.".into()),
        Datum::Null => Value::new_null(cx.clone()),
        Datum::Bool(x) => Value::new_bool(cx.clone(), *x),
        Datum::Number(n) => Value::new_number(cx.clone(), *n),
        Datum::String(s) => rquickjs::String::from_str(cx.clone(), s)
            .map_err(err)?
            .into_value(),
        Datum::Array(items) => {
            let arr = Array::new(cx.clone()).map_err(err)?;
            for (i, item) in items.iter().enumerate() {
                arr.set(i, from_datum(cx, b, item)?).map_err(err)?;
            }
            arr.into_value()
        }
        Datum::Object(_) => match d.reql_type() {
            Some("BINARY") => return Err("`r.binary` data cannot be used in `r.js`.".into()),
            Some("TIME") => {
                let epoch = datum::ptype::time_epoch(d).unwrap_or(f64::NAN);
                let ctor = b
                    .date
                    .as_ref()
                    .and_then(|o| o.as_constructor())
                    .ok_or_else(|| "Date is not available.".to_string())?;
                let date: Value = ctor.construct((epoch * 1000.0,)).map_err(err)?;
                date
            }
            _ => {
                let obj = Object::new(cx.clone()).map_err(err)?;
                if let Some(fields) = d.as_object() {
                    for (k, v) in fields.iter() {
                        obj.set(&**k, from_datum(cx, b, v)?).map_err(err)?;
                    }
                }
                obj.into_value()
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(src: &str) -> std::result::Result<Outcome, String> {
        run(src, 5000, None, 100_000).map_err(|e| e.message)
    }

    fn ok(src: &str) -> String {
        match ev(src) {
            Ok(Outcome::Datum(d)) => d.to_json_string(),
            other => panic!("{src}: {other:?}"),
        }
    }

    fn call_js(src: &str, args: &[Datum]) -> std::result::Result<String, String> {
        match run(src, 5000, Some(args), 100_000) {
            Ok(Outcome::Datum(d)) => Ok(d.to_json_string()),
            Ok(Outcome::Function) => Err("function".into()),
            Err(e) => Err(e.message),
        }
    }

    #[test]
    fn datums() {
        assert_eq!(ok("1 + 1"), "2");
        assert_eq!(ok("1 + 1; 2 + 2"), "4");
        assert_eq!(ok("'a' + 'b'"), "\"ab\"");
        assert_eq!(ok("null"), "null");
        assert_eq!(ok("[1, true, 'x', [null]]"), "[1,true,\"x\",[null]]");
        assert_eq!(
            ok("({b: 1, a: {c: [2.5]}})"),
            "{\"a\":{\"c\":[2.5]},\"b\":1}"
        );
        assert_eq!(
            ok("new Date(1500)"),
            "{\"$reql_type$\":\"TIME\",\"epoch_time\":1.5,\"timezone\":\"+00:00\"}"
        );
        // Sloppy mode, as V8 ran it.
        assert_eq!(ok("x = 3; x"), "3");
    }

    #[test]
    fn errors() {
        assert_eq!(
            ev("undefined"),
            Err("Cannot convert javascript `undefined` to ql::datum_t.".into())
        );
        assert_eq!(
            ev("function() { return 1; }"),
            Err("SyntaxError: function name expected".into())
        );
        assert_eq!(ev("throw new Error('boom')"), Err("Error: boom".into()));
        assert_eq!(ev("1/0"), Err("Number return value is not finite.".into()));
        assert_eq!(
            ev("/a/"),
            Err("Cannot convert RegExp to ql::datum_t.".into())
        );
        assert_eq!(
            ev("[function(){}]"),
            Err("Cannot convert function to ql::datum_t.".into())
        );
        assert_eq!(
            ev("var o = {}; o.o = o; o"),
            Err("Recursion limit exceeded in js_to_json (circular reference?).".into())
        );
        assert_eq!(
            run("[1,2,3]", 5000, None, 2).map_err(|e| e.message),
            Err("Array over size limit `2`.".into())
        );
        assert_eq!(
            ev("(function(a, b) { return a + b; })"),
            Ok(Outcome::Function)
        );
    }

    #[test]
    fn calls() {
        let n = |x: f64| Datum::Number(x);
        let f = "(function(a, b) { return a + b; })";
        assert_eq!(call_js(f, &[n(1.0), n(2.0)]), Ok("3".into()));
        assert_eq!(
            call_js("(function(a) { return a; })", &[n(1.0), n(2.0)]),
            Ok("1".into())
        );
        assert_eq!(
            call_js("(function(a, b, c) { return c; })", &[n(1.0), n(2.0)]),
            Err("Cannot convert javascript `undefined` to ql::datum_t.".into())
        );
        assert_eq!(
            call_js(
                "(function(x) { return x + \"bar\"; })",
                &[Datum::str("foo")]
            ),
            Ok("\"foobar\"".into())
        );
        let obj = Datum::from_pairs([("a", Datum::array(vec![n(1.0)]))]);
        assert_eq!(
            call_js("(function(o) { return o.a.concat([2]); })", &[obj]),
            Ok("[1,2]".into())
        );
        let t = datum::ptype::make_time(2.0, "+00:00");
        assert_eq!(
            call_js("(function(d) { return d.getTime(); })", &[t]),
            Ok("2000".into())
        );
        assert_eq!(
            call_js("(function() { return function() {}; })", &[]),
            Err("Returning functions from within `r.js` is unsupported.".into())
        );
        assert_eq!(
            call_js("(function(x) { return x; })", &[Datum::MinVal]),
            Err("`r.minval` cannot be passed to `r.js`.".into())
        );
    }

    /// Evaluates a JSON term tree; the datum as JSON, or the error message.
    fn query(json: &str) -> std::result::Result<String, String> {
        let j: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let term = crate::term::compile_term(&j).map_err(|e| e.message)?;
        let tables = crate::access::NoTables {
            message: "no tables",
            connect: false,
        };
        let ctx = Arc::new(QueryCtx::new(Arc::new(tables), "test".into(), 0.0));
        let v = crate::eval::eval(&ctx, &Env::default(), &term).map_err(|e| e.message)?;
        match v {
            Val::Func(_) => Ok("<function>".into()),
            v => to_datum(&ctx, v)
                .map(|d| d.to_json_string())
                .map_err(|e| e.message),
        }
    }

    #[test]
    fn through_the_evaluator() {
        // r.do(1, 2, r.js('(function(a, b) { return a + b; })'))
        let add = r#"[11, ["(function(a, b) { return a + b; })"]]"#;
        assert_eq!(query(&format!("[64, [{add}, 1, 2]]")), Ok("3".into()));
        assert_eq!(query(add), Ok("<function>".into()));
        // r.expr([1, 2, 3]).map(...) and .filter(...)
        let inc = r#"[11, ["(function(a) { return a + 1; })"]]"#;
        assert_eq!(
            query(&format!("[38, [[2, [1, 2, 3]], {inc}]]")),
            Ok("[2,3,4]".into())
        );
        let ge2 = r#"[11, ["(function(a) { return a >= 2; })"], {"timeout": 1.2}]"#;
        assert_eq!(
            query(&format!("[39, [[2, [1, 2, 3]], {ge2}]]")),
            Ok("[2,3]".into())
        );
        let one = r#"[11, ["1"]]"#;
        assert!(query(&format!("[38, [[2, [1, 2, 3]], {one}]]"))
            .is_err_and(|m| m.starts_with("Expected type FUNCTION but found DATUM:")));
        let slow = r#"[11, ["(function(a) { for (;;) {} })"], {"timeout": 0.05}]"#;
        assert_eq!(
            query(&format!("[64, [{slow}, 1]]")),
            Err(
                "JavaScript query `(function(a) { for (;;) {} })` timed out after 0.050 seconds."
                    .into()
            )
        );
    }

    #[test]
    fn timeout_and_memory() {
        let r = run("while (true) {}", 200, None, 100_000).map_err(|e| e.message);
        assert_eq!(
            r,
            Err("JavaScript query `while (true) {}` timed out after 0.200 seconds.".into())
        );
        // A catch block cannot swallow the interrupt.
        let src = "for (;;) { try { while (true) {} } catch (e) {} }";
        assert!(run(src, 100, None, 100_000).is_err());
        let hog = "var a = []; for (;;) a.push(new Array(100000).fill(1));";
        let r = run(hog, 60_000, None, 100_000).map_err(|e| e.message);
        assert!(
            r.as_ref().is_err_and(|m| m.contains("out of memory")),
            "{r:?}"
        );
        assert_eq!(timeout_ms(1.2), 1200);
        assert_eq!(timeout_ms(-1.0), 0);
        assert_eq!(timeout_ms(1e300), u64::MAX);
    }
}
