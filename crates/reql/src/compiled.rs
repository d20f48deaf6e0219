//! Compiled one-argument functions: a fast path for the per-document functions of scans
//! (`map`, `filter`, `concat_map`, `sum(f)`, ...), next to the tree-walking evaluator.
//!
//! `compile` accepts a function body only when every term in it is in a small, pure
//! subset: constants, the parameter (or `r.row`), a constant field of it (`bracket`,
//! `get_field`), `split`, `count`, two-operand arithmetic and comparisons, `and`, `or`,
//! `not`. Running it skips the evaluator's per-call work (environments, argument
//! vectors, term dispatch, grouped-data checks), and `count(split(s, d))` counts the
//! pieces without building them.
//!
//! Invariant: a compiled body answers exactly what the evaluator answers, or gives up.
//! It only takes paths whose result is obvious (numbers for arithmetic, an object
//! holding the field, a string to split); anything else, every error included,
//! returns `None` and the caller evaluates the body as usual. So messages, error
//! classes and backtraces always come from the evaluator, and the subset can grow one
//! term at a time without changing behaviour.

use datum::{Datum, Str};
use proto::ql2::TermType as T;

use crate::term::Term;

/// A compiled function body.
#[derive(Debug)]
pub enum Body {
    /// A constant.
    Const(Datum),
    /// The argument.
    Arg,
    /// A field of an object (`x('f')`, `x.get_field('f')`).
    Field(Box<Body>, Str),
    /// `split(s)` (on whitespace) or `split(s, d)`.
    Split(Box<Body>, Option<Str>),
    /// `count(split(s[, d]))`: the number of pieces, none of them built.
    CountSplit(Box<Body>, Option<Str>),
    /// `count` of a string (characters) or an array.
    Count(Box<Body>),
    /// `add`, `sub`, `mul`, `div` of two numbers.
    Arith(T, Box<Body>, Box<Body>),
    /// `eq`, `ne`, `lt`, `le`, `gt`, `ge` of two values.
    Cmp(T, Box<Body>, Box<Body>),
    /// `and`/`or`: the first value that decides, else the last (`control::and`/`or`).
    And(Vec<Body>),
    Or(Vec<Body>),
    Not(Box<Body>),
}

/// Compiles the body of a function of one parameter `param`; None when any term is
/// outside the subset.
pub fn compile(param: i64, body: &Term) -> Option<Body> {
    let arg = |i: usize| {
        body.args
            .get(i)
            .and_then(|t| compile(param, t))
            .map(Box::new)
    };
    let n = body.args.len();
    // No optargs anywhere: they change meaning (e.g. `split`'s none, but be strict).
    if !body.optargs.is_empty() {
        return None;
    }
    Some(match body.tt {
        T::DATUM => match &body.datum {
            // Constants that are plain values (no pseudo-type to interpret).
            d @ (Datum::Null | Datum::Bool(_) | Datum::Number(_) | Datum::String(_)) => {
                Body::Const(d.clone())
            }
            _ => return None,
        },
        T::VAR if n == 1 => {
            let id = body.args[0].datum.as_f64()? as i64;
            if id != param {
                return None;
            }
            Body::Arg
        }
        // `r.row` is the argument of a one-parameter function (`eval::call_flagged`).
        T::IMPLICIT_VAR if n == 0 => Body::Arg,
        T::BRACKET | T::GET_FIELD if n == 2 => match &body.args[1].datum {
            Datum::String(f) if body.args[1].tt == T::DATUM => Body::Field(arg(0)?, f.clone()),
            _ => return None,
        },
        T::SPLIT if n == 1 => Body::Split(arg(0)?, None),
        T::SPLIT if n == 2 => match (&body.args[1].tt, &body.args[1].datum) {
            (T::DATUM, Datum::String(d)) => Body::Split(arg(0)?, Some(d.clone())),
            (T::DATUM, Datum::Null) => Body::Split(arg(0)?, None),
            _ => return None,
        },
        T::COUNT if n == 1 => match *arg(0)? {
            Body::Split(s, d) => Body::CountSplit(s, d),
            b => Body::Count(Box::new(b)),
        },
        T::ADD | T::SUB | T::MUL | T::DIV if n == 2 => Body::Arith(body.tt, arg(0)?, arg(1)?),
        T::EQ | T::NE | T::LT | T::LE | T::GT | T::GE if n == 2 => {
            Body::Cmp(body.tt, arg(0)?, arg(1)?)
        }
        T::AND | T::OR if n >= 1 => {
            let parts = body
                .args
                .iter()
                .map(|t| compile(param, t))
                .collect::<Option<Vec<_>>>()?;
            if body.tt == T::AND {
                Body::And(parts)
            } else {
                Body::Or(parts)
            }
        }
        T::NOT if n == 1 => Body::Not(arg(0)?),
        _ => return None,
    })
}

impl Body {
    /// Runs the body on `x`; None when the evaluator must answer instead (any error, or
    /// a case outside the obvious path). `array_limit` is the query's array size limit.
    pub fn run(&self, x: &Datum, array_limit: usize) -> Option<Datum> {
        Some(match self {
            Body::Const(d) => d.clone(),
            Body::Arg => x.clone(),
            Body::Field(o, f) => {
                let o = o.run(x, array_limit)?;
                match &o {
                    Datum::Object(m) if !o.is_ptype() => m.field(f)?,
                    _ => return None,
                }
            }
            Body::Split(s, d) => {
                let s = s.run(x, array_limit)?;
                let parts = pieces(&s, d, array_limit)?;
                Datum::array(parts.into_iter().map(Datum::str).collect())
            }
            Body::CountSplit(s, d) => {
                if let Some(n) = count_split_in_text(s, d, x) {
                    return (n <= array_limit).then(|| Datum::from(n));
                }
                let s = s.run(x, array_limit)?;
                let n = crate::terms::strings::count_pieces(s.as_str()?, d.as_deref());
                Datum::from((n <= array_limit).then_some(n)?)
            }
            Body::Count(v) => match v.run(x, array_limit)? {
                Datum::String(s) => Datum::from(s.chars().count()),
                Datum::Array(a) => Datum::from(a.len()),
                _ => return None,
            },
            Body::Arith(op, a, b) => {
                let (Datum::Number(a), Datum::Number(b)) =
                    (a.run(x, array_limit)?, b.run(x, array_limit)?)
                else {
                    return None;
                };
                let n = match op {
                    T::ADD => a + b,
                    T::SUB => a - b,
                    T::MUL => a * b,
                    _ if b == 0.0 => return None,
                    _ => a / b,
                };
                crate::terms::math::finite(n).ok()?
            }
            Body::Cmp(op, a, b) => {
                let ord = a.run(x, array_limit)?.cmp(&b.run(x, array_limit)?);
                Datum::Bool(crate::terms::math::holds(*op, ord))
            }
            Body::And(parts) => {
                let mut last = Datum::Bool(true);
                for p in parts {
                    last = p.run(x, array_limit)?;
                    if !last.truthy() {
                        break;
                    }
                }
                last
            }
            Body::Or(parts) => {
                let mut last = Datum::Bool(false);
                for p in parts {
                    last = p.run(x, array_limit)?;
                    if last.truthy() {
                        break;
                    }
                }
                last
            }
            Body::Not(v) => Datum::Bool(!v.run(x, array_limit)?.truthy()),
        })
    }
}

/// `count(split(x('f'), d))` with a one-byte delimiter, answered from a stored
/// document's text without decoding the string (`Object::count_byte_in_str_member`);
/// None when that does not apply, and the general path answers.
fn count_split_in_text(s: &Body, d: &Option<Str>, x: &Datum) -> Option<usize> {
    let (Body::Field(o, f), Some(&[b])) = (s, d.as_deref().map(str::as_bytes)) else {
        return None;
    };
    match (&**o, x) {
        (Body::Arg, Datum::Object(m)) if !x.is_ptype() => {
            m.count_byte_in_str_member(f, b).map(|n| n + 1)
        }
        _ => None,
    }
}

/// `split`'s pieces of a string (the evaluator's `split_str`); None for a non-string or
/// more pieces than an array may hold (the evaluator then gives the error).
fn pieces<'s>(s: &'s Datum, delim: &Option<Str>, array_limit: usize) -> Option<Vec<&'s str>> {
    let parts = crate::terms::strings::split_str(s.as_str()?, delim.as_deref(), None);
    (parts.len() <= array_limit).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Env, Val};

    const X: &str = "[10,[1]]";

    /// The evaluator's answer for `body` with variable 1 bound to `x`.
    fn interpreted(body: &Term, x: &Datum) -> crate::error::Result<Datum> {
        let ctx = crate::testing::no_tables_ctx();
        let env = Env::default().bind(1, Val::Datum(x.clone()));
        let v = crate::eval::eval(&ctx, &env, body)?;
        crate::eval::to_datum(&ctx, v)
    }

    fn term(json: &str) -> std::sync::Arc<Term> {
        crate::term::compile_term(&serde_json::from_str(json).expect("json")).expect("term")
    }

    fn inputs() -> Vec<Datum> {
        [
            r#"{"a": "x.y.z", "n": 3, "s": "  one two  ", "e": "", "b": true, "z": null}"#,
            r#"{"a": ".", "n": -1.5, "s": "x", "e": "..", "b": false, "z": 0}"#,
            r#"{"a": 7, "n": "3", "s": ["x"], "b": null}"#,
            r#"{"$reql_type$": "TIME", "epoch_time": 0, "timezone": "+00:00", "a": "t"}"#,
            r#"[1, 2]"#,
            r#""str.ing""#,
            r#"null"#,
            r#"12"#,
        ]
        .iter()
        .map(|j| datum::from_json_slice(j.as_bytes()).expect("datum"))
        // Stored documents: canonical text, read without building the map.
        .chain(
            [
                r#"{"a":"x.\\\".y\\.","e":"\u0001.","n":3}"#,
                r#"{"a":".","e":"..","s":"x"}"#,
            ]
            .iter()
            .map(|j| datum::from_json_owned(j.as_bytes().to_vec()).expect("datum")),
        )
        .collect()
    }

    /// Every body on every input: whenever the compiled form answers, the evaluator
    /// answers the same; `must` lists (body, input index) pairs that must be compiled
    /// answers, so the check is not vacuous.
    fn check(bodies: &[&str], must: &[(usize, usize)]) {
        let xs = inputs();
        for (bi, b) in bodies.iter().enumerate() {
            let b = b.replace("X", X);
            let t = term(&b);
            let c = compile(1, &t).unwrap_or_else(|| panic!("not compiled: {b}"));
            for (xi, x) in xs.iter().enumerate() {
                let fast = c.run(x, 100_000);
                if let Some(fast) = &fast {
                    let slow = interpreted(&t, x);
                    assert_eq!(slow.as_ref().ok(), Some(fast), "{b} on {x:?}: {slow:?}");
                }
                if must.contains(&(bi, xi)) {
                    assert!(fast.is_some(), "{b} on {x:?} gave up");
                }
            }
        }
    }

    #[test]
    fn compiled_answers_agree_with_the_evaluator() {
        check(
            &[
                r#"[43,[[149,[[170,[X,"a"]],"."]]]]"#, // count(split(x('a'), '.'))
                r#"[149,[[170,[X,"a"]],"."]]"#,        // split(x('a'), '.')
                r#"[149,[[31,[X,"s"]]]]"#,             // split(x.get_field('s'))
                r#"[43,[[149,[[170,[X,"s"]],null]]]]"#, // count(split(x('s'), null))
                r#"[43,[[149,[[170,[X,"e"]],"."]]]]"#, // count(split(x('e'), '.'))
                r#"[43,[[170,[X,"a"]]]]"#,             // count(x('a'))
                r#"[24,[[170,[X,"n"]],2]]"#,           // x('n') + 2
                r#"[27,[[170,[X,"n"]],0]]"#,           // x('n') / 0
                r#"[26,[[170,[X,"n"]],1e308]]"#,       // overflow
                r#"[17,[[170,[X,"n"]],3]]"#,           // x('n') == 3
                r#"[21,[[170,[X,"a"]],"x"]]"#,         // x('a') > 'x'
                r#"[67,[[170,[X,"b"]],[170,[X,"n"]]]]"#, // x('b') & x('n')
                r#"[66,[[170,[X,"z"]],[170,[X,"b"]]]]"#, // x('z') | x('b')
                r#"[23,[[170,[X,"z"]]]]"#,             // not x('z')
                r#"[170,[X,"missing"]]"#,              // no such field
                r#"X"#,
                r#"[66,[[170,[X,"z"]],[170,[X,"z"]]]]"#, // x('z') | x('z'): both falsy
            ],
            &[
                (0, 0),
                (0, 1),
                (0, 8),
                (0, 9),
                (4, 8),
                (1, 0),
                (2, 0),
                (3, 0),
                (4, 1),
                (5, 0),
                (6, 0),
                (9, 0),
                (10, 0),
                (11, 0),
                (12, 0),
                (13, 0),
                (15, 4),
                (16, 0),
            ],
        );
    }

    #[test]
    fn stored_text_is_counted_without_decoding() {
        let xs = inputs();
        let body = term(&r#"[43,[[149,[[170,[X,"a"]],"."]]]]"#.replace("X", X));
        let Some(Body::CountSplit(s, d)) = compile(1, &body) else {
            panic!("not compiled");
        };
        // `x.\".y\.` has three dots: four pieces, read from the text.
        assert_eq!(count_split_in_text(&s, &d, &xs[8]), Some(4));
        assert_eq!(count_split_in_text(&s, &d, &xs[9]), Some(2));
        // A decoded object has no text to read.
        assert_eq!(count_split_in_text(&s, &d, &xs[0]), None);
    }

    #[test]
    fn terms_outside_the_subset_are_not_compiled() {
        for b in [
            r#"[170,[X,[24,["a","b"]]]]"#,    // a computed field name
            r#"[149,[[170,[X,"a"]],".",1]]"#, // split with a limit
            r#"[10,[2]]"#,                    // another variable
            r#"[169,["1"]]"#,                 // r.uuid
            r#"[24,[X,1,2]]"#,                // three operands
        ] {
            let b = b.replace("X", X);
            assert!(compile(1, &term(&b)).is_none(), "{b}");
        }
    }
}
