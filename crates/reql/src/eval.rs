//! The evaluator: one exhaustive dispatch from term type to the function that implements
//! it (in `terms/`), and the argument helpers every term uses.
//!
//! Backtraces (see `error`): an error leaving a term's evaluation, or a lazy stream the
//! term made, is charged to that term unless it already is to another; the argument
//! helpers (`Ev::datum`, `Ev::num`, ...) charge conversion errors to the argument.

use std::sync::Arc;

use datum::Datum;
use proto::ql2::TermType as T;

use crate::ctx::QueryCtx;
use crate::error::{logic, Frame, Path, ReqlError, Result, WithFrame};
use crate::term::Term;
use crate::terms;
use crate::value::{Env, Func, Sequence, Val, IMPLICIT_VAR_ID};

/// The evaluation state of one term: query context, variables, and the term.
pub struct Ev<'a> {
    /// Query-wide context.
    pub ctx: &'a Arc<QueryCtx>,
    /// Variables in scope.
    pub env: &'a Env,
    /// The term being evaluated.
    pub term: &'a Term,
    /// Argument 0 when it was evaluated before dispatch (to see whether it is grouped,
    /// `terms::group::eval_groupable`); `arg(0)` takes it instead of evaluating again.
    pub arg0: std::cell::RefCell<Option<Val>>,
    /// RethinkDB's `LITERAL_OK` evaluation flag: set for the arguments of `merge`, the
    /// bodies of functions that `merge` and `update` call, and passed down by
    /// `MAKE_OBJ` to its values. `r.literal` anywhere else is a "stray literal".
    pub literal_ok: bool,
    /// For arguments evaluated by `branch` or `do` (which pass on a value another term
    /// produced): that term's path, which a conversion of the argument blames.
    pub producers: std::cell::RefCell<Vec<(usize, Path)>>,
}

thread_local! {
    /// How many `branch`/`do` arguments are being evaluated on this thread: while it
    /// is not zero, every term evaluated records its path in `PRODUCER`.
    static WANT_PRODUCER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The path of the term that produced the last value (see `WANT_PRODUCER`).
    static PRODUCER: std::cell::RefCell<Option<Path>> = const { std::cell::RefCell::new(None) };
}

/// Records `term` as the producer of the value just made, when someone wants to know.
fn note_producer(term: &Term) {
    if WANT_PRODUCER.with(|w| w.get() > 0) {
        PRODUCER.with(|p| *p.borrow_mut() = Some(term.path.clone()));
    }
}

/// Terms whose value is the value of another term they evaluate last.
fn passes_value_on(t: &Term) -> bool {
    matches!(t.tt, T::BRANCH | T::FUNCALL)
}

impl<'a> Ev<'a> {
    /// The evaluation state of `term`, nothing evaluated yet.
    pub fn new(ctx: &'a Arc<QueryCtx>, env: &'a Env, term: &'a Term) -> Ev<'a> {
        Ev {
            ctx,
            env,
            term,
            arg0: std::cell::RefCell::new(None),
            literal_ok: false,
            producers: std::cell::RefCell::new(Vec::new()),
        }
    }
}

/// Evaluates a term.
pub fn eval(ctx: &Arc<QueryCtx>, env: &Env, term: &Term) -> Result<Val> {
    eval_flagged(ctx, env, term, false)
}

/// Evaluates a term where `r.literal` is legal (see [`Ev::literal_ok`]).
pub fn eval_literal_ok(ctx: &Arc<QueryCtx>, env: &Env, term: &Term) -> Result<Val> {
    eval_flagged(ctx, env, term, true)
}

pub(crate) fn eval_flagged(
    ctx: &Arc<QueryCtx>,
    env: &Env,
    term: &Term,
    literal_ok: bool,
) -> Result<Val> {
    let r = eval_unblamed(ctx, env, term, literal_ok);
    if r.is_ok() && !passes_value_on(term) {
        note_producer(term);
    }
    match r {
        Ok(Val::Seq(s)) => Ok(Val::Seq(blame_stream(s, term))),
        Ok(Val::Grouped(crate::value::Grouped::Stream(g))) => {
            let blame = blamer(term);
            Ok(Val::Grouped(crate::value::Grouped::Stream(
                crate::value::GroupedStream {
                    stream: Box::new(g.stream.map(move |r| r.map_err(&blame))),
                    infinite: g.infinite,
                },
            )))
        }
        Ok(v) => Ok(v),
        Err(e) => Err(e.blame_in(term)),
    }
}

/// A stream whose errors not yet charged to a term are charged to `term` (which made
/// it), as if raised while `term` was evaluated.
fn blame_stream(s: Sequence, term: &Term) -> Sequence {
    let blame = blamer(term);
    let stream = s.stream;
    Sequence {
        stream: Box::new(stream.map(move |r| r.map_err(&blame))),
        ..s
    }
}

/// `ReqlError::blame_in(term)` for later, without holding on to `term`.
fn blamer(term: &Term) -> impl Fn(ReqlError) -> ReqlError + Send + 'static {
    let path = term.path.clone();
    let args: Vec<Path> = term.args.iter().map(|a| a.path.clone()).collect();
    let opts: Vec<(String, Path)> = (term.optargs.iter())
        .map(|(k, a)| (k.clone(), a.path.clone()))
        .collect();
    move |e: ReqlError| {
        e.blame_with(&path, |f| match f {
            Frame::Pos(i) => args.get(*i).cloned(),
            Frame::Opt(n) => opts.iter().find(|(k, _)| k == n).map(|(_, p)| p.clone()),
        })
    }
}

fn eval_unblamed(ctx: &Arc<QueryCtx>, env: &Env, term: &Term, literal_ok: bool) -> Result<Val> {
    if term.args.iter().any(|a| a.tt == T::ARGS) {
        if matches!(term.tt, T::ORDER_BY | T::UNION) {
            return Err(logic(
                "r.args is not supported in an order_by or union command yet.",
            ));
        }
        if matches!(term.tt, T::UPDATE | T::REPLACE) {
            // `r.args` would hide a non-deterministic argument once expanded.
            terms::write::check_args_deterministic(term)?;
        }
        let expanded = expand_args(ctx, env, term)?;
        let mut ev = Ev::new(ctx, env, &expanded);
        ev.literal_ok = literal_ok;
        return terms::group::eval_groupable(&ev).map_err(|e| ev.blame(e));
    }
    let mut ev = Ev::new(ctx, env, term);
    ev.literal_ok = literal_ok;
    terms::group::eval_groupable(&ev).map_err(|e| ev.blame(e))
}

/// Splices `r.args(array)` arguments into the argument list, then checks arity.
pub(crate) fn expand_args(ctx: &Arc<QueryCtx>, env: &Env, term: &Term) -> Result<Term> {
    let mut args = Vec::with_capacity(term.args.len());
    for (i, a) in term.args.iter().enumerate() {
        if a.tt != T::ARGS {
            args.push(a.clone());
            continue;
        }
        let inner = a
            .args
            .first()
            .ok_or_else(|| logic("r.args needs an array."))?;
        let v = eval(ctx, env, inner).at(i)?;
        match v {
            // Spliced values are charged to the term holding the `r.args`.
            Val::Func(f) => args.push(Arc::new(Term {
                tt: T::FUNC,
                args: vec![
                    Term::datum_at(
                        Datum::array(f.params.iter().map(|p| Datum::from(*p)).collect()),
                        term.path.clone(),
                    ),
                    f.body.clone(),
                ],
                optargs: Vec::new(),
                datum: Datum::Null,
                path: term.path.clone(),
            })),
            other => {
                let d = to_datum(ctx, other).at(i)?;
                let items = expect_array(&d).at(i)?;
                args.extend((items.iter().cloned()).map(|d| Term::datum_at(d, term.path.clone())));
            }
        }
    }
    // RethinkDB checks the expanded count when the term runs (`arg_terms_t::start_eval`),
    // so a wrong count is a ReqlQueryLogicError here, not a compile error.
    let (min, max) = crate::spec::arity(term.tt);
    if args.len() < min || max.is_some_and(|m| args.len() > m) {
        return Err(logic(crate::term::arity_message(min, max, args.len())));
    }
    Ok(Term {
        tt: term.tt,
        args,
        optargs: term
            .optargs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        datum: term.datum.clone(),
        path: term.path.clone(),
    })
}

impl<'a> Ev<'a> {
    /// Number of positional arguments.
    pub fn nargs(&self) -> usize {
        self.term.args.len()
    }

    /// Evaluates positional argument `i`.
    pub fn arg(&self, i: usize) -> Result<Val> {
        if i == 0 {
            if let Some(v) = self.arg0.borrow_mut().take() {
                return Ok(v);
            }
        }
        match self.term.args.get(i) {
            Some(t) if passes_value_on(t) => {
                WANT_PRODUCER.with(|w| w.set(w.get() + 1));
                let r = eval(self.ctx, self.env, t);
                let outer = WANT_PRODUCER.with(|w| {
                    w.set(w.get() - 1);
                    w.get()
                });
                // Inside another `branch`/`do` argument, its caller reads it too.
                let produced = PRODUCER.with(|p| {
                    let mut p = p.borrow_mut();
                    if outer == 0 {
                        p.take()
                    } else {
                        p.clone()
                    }
                });
                if let Some(p) = produced {
                    self.producers.borrow_mut().push((i, p));
                }
                r
            }
            Some(t) => eval(self.ctx, self.env, t),
            None => Err(logic(format!("Missing argument {i}."))),
        }
    }

    /// Charges an error leaving this term's evaluation: to the term itself, or, after
    /// `at(i)`, to the term that produced argument `i`'s value.
    pub fn blame(&self, e: ReqlError) -> ReqlError {
        let producers = self.producers.borrow();
        e.blame_with(&self.term.path, |f| match f {
            Frame::Pos(i) => (producers.iter().rev())
                .find(|(j, _)| j == i)
                .map(|(_, p)| p.clone())
                .or_else(|| self.term.args.get(*i).map(|a| a.path.clone())),
            Frame::Opt(n) => self.term.optarg(n).map(|a| a.path.clone()),
        })
    }

    /// Evaluates positional argument `i` where `r.literal` is legal (`merge`).
    pub fn arg_literal_ok(&self, i: usize) -> Result<Val> {
        match self.term.args.get(i) {
            Some(t) => eval_literal_ok(self.ctx, self.env, t).at(i),
            None => Err(logic(format!("Missing argument {i}."))),
        }
    }

    /// Evaluates argument `i` as a datum.
    pub fn datum(&self, i: usize) -> Result<Datum> {
        let v = self.arg(i)?;
        self.to_datum(v).at(i)
    }

    /// Evaluates argument `i` as a table (RethinkDB's type error otherwise).
    pub fn table(&self, i: usize) -> Result<Arc<dyn crate::access::Table>> {
        match self.arg(i)? {
            Val::Table(t) => Ok(t),
            other => Err(logic(format!(
                "Expected type TABLE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
            .at(i),
        }
    }

    /// Evaluates argument `i` as a sequence.
    pub fn seq(&self, i: usize) -> Result<Sequence> {
        let v = self.arg(i)?;
        self.to_seq(v).at(i)
    }

    /// Evaluates argument `i` as a number.
    pub fn num(&self, i: usize) -> Result<f64> {
        let d = self.datum(i)?;
        expect_num(&d).at(i)
    }

    /// Evaluates argument `i` as a string.
    pub fn string(&self, i: usize) -> Result<String> {
        let d = self.datum(i)?;
        expect_str(&d).map(str::to_string).at(i)
    }

    /// Evaluates the named optarg, if present.
    pub fn opt(&self, name: &str) -> Result<Option<Val>> {
        match self.term.optarg(name) {
            Some(t) => eval(self.ctx, self.env, t).at_opt(name).map(Some),
            None => Ok(None),
        }
    }

    /// Evaluates the named optarg as a datum, if present.
    pub fn opt_datum(&self, name: &str) -> Result<Option<Datum>> {
        match self.opt(name)? {
            Some(v) => Ok(Some(self.to_datum(v).at_opt(name)?)),
            None => Ok(None),
        }
    }

    /// Evaluates `left_bound`/`right_bound` (`open_bound`): true for `open`.
    pub fn opt_open(&self, name: &str, default_open: bool) -> Result<bool> {
        match self.opt_datum(name)? {
            None => Ok(default_open),
            Some(d) => open_bound(name, &d),
        }
    }

    /// Evaluates the named optarg as a boolean (default when absent).
    pub fn opt_bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.opt_datum(name)? {
            None => Ok(default),
            Some(Datum::Bool(b)) => Ok(b),
            Some(d) => Err(type_error("BOOL", &d)).at_opt(name),
        }
    }

    /// Converts a value to a datum (collecting array-derived sequences).
    pub fn to_datum(&self, v: Val) -> Result<Datum> {
        to_datum(self.ctx, v)
    }

    /// Converts a value to a sequence.
    pub fn to_seq(&self, v: Val) -> Result<Sequence> {
        to_seq(v)
    }

    /// Calls a function value with datum arguments.
    pub fn call(&self, f: &Val, args: Vec<Datum>) -> Result<Val> {
        call(self.ctx, f, args)
    }

    /// Calls a function value and converts the result to a datum.
    pub fn call_datum(&self, f: &Val, args: Vec<Datum>) -> Result<Datum> {
        let v = call(self.ctx, f, args)?;
        to_datum(self.ctx, v)
    }
}

/// Converts a value to a datum.
pub fn to_datum(ctx: &QueryCtx, v: Val) -> Result<Datum> {
    match v {
        Val::Datum(d) => Ok(d),
        Val::Single(s) => Ok(s.doc),
        Val::Seq(s) if s.is_array => Ok(Datum::array(s.collect(ctx.array_limit)?)),
        other => Err(logic(format!(
            "Expected type DATUM but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        ))),
    }
}

/// RethinkDB's `trunc_print`: the pretty form, cut at 300 characters.
pub fn trunc_print(d: &Datum) -> String {
    let s = d.to_pretty_string();
    if s.chars().count() > 300 {
        let mut t: String = s.chars().take(297).collect();
        t.push_str("...");
        t
    } else {
        s
    }
}

/// The printed form of a value in type errors (RethinkDB's `val_t::print`).
pub fn describe(v: &Val) -> String {
    match v {
        Val::Table(t) if t.slice().is_some() => format!("SELECTION ON table({})", t.name()),
        Val::Table(t) => format!("table(\"{}\")", t.name()),
        Val::Db(d) => format!("db(\"{d}\")"),
        Val::Seq(s) => match &s.table {
            Some(t) => format!("SELECTION ON table({})", t.name()),
            None => format!("VALUE {}", v.kind_name()),
        },
        Val::Func(_) | Val::Grouped(_) => format!("VALUE {}", v.kind_name()),
        Val::Single(s) => s.doc.to_pretty_string(),
        Val::Datum(d) => d.to_pretty_string(),
    }
}

/// Converts a value to a sequence (arrays, tables, streams).
pub fn to_seq(v: Val) -> Result<Sequence> {
    match v {
        Val::Seq(s) => Ok(s),
        Val::Datum(Datum::Array(a)) => Ok(Sequence::from_array(a)),
        Val::Table(t) => {
            let stream = t.scan(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )?;
            Ok(Sequence {
                stream,
                is_array: false,
                table: Some(t),
                infinite: false,
            })
        }
        // RethinkDB charges these to the operator, not the argument.
        Val::Datum(d) => Err(logic(format!("Cannot convert {} to SEQUENCE", d.type_name())).here()),
        Val::Single(s) => {
            Err(logic(format!("Cannot convert {} to SEQUENCE", s.doc.type_name())).here())
        }
        other => Err(logic(format!(
            "Expected type SEQUENCE but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        ))),
    }
}

/// Calls a function value. A non-function datum acts as a constant function.
pub fn call(ctx: &Arc<QueryCtx>, f: &Val, args: Vec<Datum>) -> Result<Val> {
    call_vals(ctx, f, args.into_iter().map(Val::Datum).collect())
}

/// Calls a function value of one datum argument (`call` with one argument): a compiled
/// body answers without the argument vectors a general call builds per document.
pub fn call1(ctx: &Arc<QueryCtx>, f: &Val, x: Datum) -> Result<Val> {
    if let Val::Func(func) = f {
        if !ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(out) = run_compiled(ctx, func, &x) {
                return Ok(Val::Datum(out));
            }
        }
    }
    call_flagged(ctx, f, vec![Val::Datum(x)], false)
}

/// The compiled body's answer for a call with the one datum argument `x`, when it has
/// one (`compiled`); the caller evaluates the body otherwise. Only for a datum argument,
/// since a selection passed through must stay a selection.
fn run_compiled(ctx: &QueryCtx, func: &Func, x: &Datum) -> Option<Datum> {
    let c = func.compiled.as_ref().filter(|_| func.params.len() == 1)?;
    let out = c.run(x, ctx.array_limit)?;
    // No compiled term passes its value on: the body made it.
    note_producer(&func.body);
    Some(out)
}

/// Calls a function value whose body may use `r.literal` (the functions of `merge` and
/// `update`, RethinkDB's `f->call(env, args, LITERAL_OK)`).
pub fn call_literal_ok(ctx: &Arc<QueryCtx>, f: &Val, args: Vec<Datum>) -> Result<Val> {
    call_flagged(ctx, f, args.into_iter().map(Val::Datum).collect(), true)
}

/// Calls a function value with arguments of any kind (sequences must be collected first).
pub fn call_vals(ctx: &Arc<QueryCtx>, f: &Val, args: Vec<Val>) -> Result<Val> {
    call_flagged(ctx, f, args, false)
}

fn call_flagged(ctx: &Arc<QueryCtx>, f: &Val, args: Vec<Val>, literal_ok: bool) -> Result<Val> {
    if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(crate::error::op_failed(
            "Query interrupted: the client disconnected.",
        ));
    }
    match f {
        Val::Func(func) if terms::js::is_js_func(func) => terms::js::call(ctx, func, args),
        Val::Func(func) => {
            if func.params.len() != args.len() && !func.params.is_empty() {
                return Err(logic(format!(
                    "Expected function with {} argument{} but found function with {} argument{}.",
                    args.len(),
                    if args.len() == 1 { "" } else { "s" },
                    func.params.len(),
                    if func.params.len() == 1 { "" } else { "s" },
                )));
            }
            if let [Val::Datum(x)] = args.as_slice() {
                if let Some(out) = run_compiled(ctx, func, x) {
                    return Ok(Val::Datum(out));
                }
            }
            let mut env = func.env.clone();
            if args.len() == 1 && func.implicit {
                if let Some(a) = args.first().and_then(Val::share) {
                    env = env.bind(IMPLICIT_VAR_ID, a);
                }
            }
            for (id, a) in func.params.iter().zip(args) {
                env = env.bind(*id, a);
            }
            eval_flagged(ctx, &env, &func.body, literal_ok)
        }
        Val::Datum(d) => Ok(Val::Datum(d.clone())),
        other => Err(logic(format!(
            "Expected type FUNCTION but found {}:\n{}",
            other.kind_name(),
            describe(other)
        ))),
    }
}

/// Builds a function value from a FUNC term.
pub fn make_func(ev: &Ev) -> Result<Val> {
    let params_term = ev
        .term
        .args
        .first()
        .ok_or_else(|| logic("FUNC without parameters"))?;
    let params = match &params_term.datum {
        Datum::Array(a) => a
            .iter()
            .map(|p| p.as_f64().map(|n| n as i64))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| logic("Function parameters must be numbers."))?,
        _ => {
            let v = ev.datum(0)?;
            match v {
                Datum::Array(a) => a
                    .iter()
                    .map(|p| p.as_f64().map(|n| n as i64))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| logic("Function parameters must be numbers."))?,
                _ => return Err(logic("Function parameters must be an array.")),
            }
        }
    };
    let body = ev
        .term
        .args
        .get(1)
        .cloned()
        .ok_or_else(|| logic("FUNC without body"))?;
    let compiled = match params.as_slice() {
        [p] => crate::compiled::compile(*p, &body).map(Arc::new),
        _ => None,
    };
    Ok(Val::Func(Func {
        params: Arc::new(params),
        implicit: body.uses_implicit_var(),
        body,
        env: ev.env.clone(),
        compiled,
    }))
}

/// RethinkDB's `open_bool`: a `left_bound`/`right_bound` value, true for `open`. A
/// non-string fails converting the optarg (charged to it); another string is the term's
/// own check.
pub fn open_bound(name: &str, d: &Datum) -> Result<bool> {
    match d.as_str() {
        Some("open") => Ok(true),
        Some("closed") => Ok(false),
        Some(_) => Err(logic(format!(
            "Expected `open` or `closed` for optarg `{name}` (got `{}`).",
            trunc_print(d)
        ))
        .here()),
        None => Err(type_error("STRING", d)).at_opt(name),
    }
}

/// "Expected type X but found Y." for a datum.
pub fn type_error(expected: &str, found: &Datum) -> crate::error::ReqlError {
    let kind = if matches!(found, Datum::Null) {
        crate::error::ErrorKind::NonExistence
    } else {
        crate::error::ErrorKind::QueryLogic
    };
    crate::error::ReqlError::new(
        kind,
        format!(
            "Expected type {} but found {}.",
            expected,
            found.type_name()
        ),
    )
}

/// The number in a datum, or RethinkDB's type error.
pub fn expect_num(d: &Datum) -> Result<f64> {
    d.as_f64().ok_or_else(|| type_error("NUMBER", d))
}

/// The string in a datum, or RethinkDB's type error.
pub fn expect_str(d: &Datum) -> Result<&str> {
    d.as_str().ok_or_else(|| type_error("STRING", d))
}

/// The array in a datum, or RethinkDB's type error.
pub fn expect_array(d: &Datum) -> Result<&[Datum]> {
    d.as_array().ok_or_else(|| type_error("ARRAY", d))
}

/// The object in a datum, or RethinkDB's type error.
pub fn expect_object(d: &Datum) -> Result<&datum::Object> {
    d.as_object().ok_or_else(|| type_error("OBJECT", d))
}

/// An integer argument (RethinkDB: "Number not an integer").
pub fn expect_int(d: &Datum) -> Result<i64> {
    let n = expect_num(d)?;
    if n > 9_007_199_254_740_992.0 {
        return Err(logic(format!(
            "Number not an integer (>2^53): {}",
            d.to_json_string()
        )));
    }
    if n < -9_007_199_254_740_992.0 {
        return Err(logic(format!(
            "Number not an integer (<-2^53): {}",
            d.to_json_string()
        )));
    }
    if n.fract() != 0.0 {
        return Err(logic(format!(
            "Number not an integer: {}",
            d.to_json_string()
        )));
    }
    Ok(n as i64)
}

/// Requires a function value (terms such as `map` take no constant shortcut).
pub fn expect_func(v: Val) -> Result<Val> {
    match v {
        Val::Func(_) => Ok(v),
        other => Err(logic(format!(
            "Expected type FUNCTION but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        ))),
    }
}

/// True when the term is FUNC.
pub fn is_func_term(t: &Term) -> bool {
    t.tt == T::FUNC
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(q: &str) -> Result<Datum> {
        let ctx = crate::testing::no_tables_ctx();
        let term = crate::term::compile_term(&serde_json::from_str(q).expect("json"))?;
        let v = eval(&ctx, &Env::default(), &term)?;
        to_datum(&ctx, v)
    }

    #[test]
    fn args_expand_before_the_count_is_checked() {
        // r.add(r.args([1, 2, 3]))
        assert_eq!(
            run("[24,[[154,[[2,[1,2,3]]]]]]").ok(),
            Some(Datum::Number(6.0))
        );
        // r.time(r.args([1986, 11, 3, "Z"]))
        let t = run(r#"[136,[[154,[[2,[1986,11,3,"Z"]]]]]]"#).unwrap_or(Datum::Null);
        assert_eq!(t.reql_type(), Some("TIME"));
        // A wrong count after expansion is a runtime error in RethinkDB's words.
        let e = run("[136,[[154,[[2,[1986,11]]]]]]").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::QueryLogic);
        assert_eq!(e.message, "Expected between 4 and 7 arguments but found 2.");
        let e = run("[103,[[154,[[2,[1]]]]]]").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::QueryLogic);
        assert_eq!(e.message, "Expected 0 arguments but found 1.");
    }
}
