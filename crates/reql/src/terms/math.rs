//! Arithmetic, comparison, rounding, bit operations and `random`.
//!
//! Numbers are doubles; every result is checked finite (RethinkDB rejects NaN and
//! infinities). Integer operations (`mod`, bit ops) require exact integers within 2^53.

use datum::{ptype, Datum};
use proto::ql2::TermType as T;
use rand::Rng;

use crate::error::{logic, Result, WithFrame};
use crate::eval::{expect_num, type_error, Ev};
use crate::value::Val;

const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// The longest string `add` builds, in bytes (Ponder's bound, as large as the biggest
/// query a client may send: RethinkDB has none, so a `fold` that doubles a string ran
/// the server out of memory; docs/compatibility.md).
pub const MAX_STRING_BYTES: usize = 64 * 1024 * 1024;

/// Concatenates two strings, refusing a result over `MAX_STRING_BYTES`.
fn concat(a: &str, b: &str) -> Result<Datum> {
    let len = a.len().saturating_add(b.len());
    if len > MAX_STRING_BYTES {
        return Err(crate::error::resource(format!(
            "String over size limit `{MAX_STRING_BYTES}` bytes (would be {len})."
        )));
    }
    let mut s = String::with_capacity(len);
    s.push_str(a);
    s.push_str(b);
    Ok(Datum::from(s))
}

/// Checks a computed number is finite (RethinkDB's `datum_t(double)` constructor, whose
/// error the term computing it is charged with).
pub fn finite(n: f64) -> Result<Datum> {
    if n.is_finite() {
        Ok(Datum::Number(n))
    } else {
        Err(logic(format!(
            "Non-finite number: {}",
            crate::terms::number_text::c_print(n)
        ))
        .here())
    }
}

/// Whether two values in order `ord` satisfy the comparison `tt` (EQ, NE, LT, LE, GT,
/// GE) of two operands.
pub fn holds(tt: T, ord: std::cmp::Ordering) -> bool {
    match tt {
        T::EQ => ord.is_eq(),
        T::NE => ord.is_ne(),
        T::LT => ord.is_lt(),
        T::LE => ord.is_le(),
        T::GT => ord.is_gt(),
        _ => ord.is_ge(),
    }
}

/// EQ, NE, LT, LE, GT, GE (chained over all arguments).
pub fn compare(ev: &Ev) -> Result<Val> {
    let mut prev = ev.datum(0)?;
    let tt = ev.term.tt;
    let mut result = true;
    for i in 1..ev.nargs() {
        let cur = ev.datum(i)?;
        let ok = holds(tt, prev.cmp(&cur));
        if tt == T::NE {
            // r.ne(a, b, c) is not(a == b == c).
            result = result && !ok;
        } else if !ok {
            result = false;
        }
        prev = cur;
    }
    if tt == T::NE {
        return Ok(Val::Datum(Datum::Bool(!result)));
    }
    Ok(Val::Datum(Datum::Bool(result)))
}

fn is_time(d: &Datum) -> bool {
    d.reql_type() == Some("TIME")
}

/// ADD: numbers, strings, arrays, and time + seconds.
pub fn add(ev: &Ev) -> Result<Val> {
    let mut acc = ev.datum(0)?;
    for i in 1..ev.nargs() {
        let x = ev.datum(i)?;
        acc = match (&acc, &x) {
            (Datum::Number(a), Datum::Number(b)) => finite(a + b)?,
            (Datum::String(a), Datum::String(b)) => concat(a, b)?,
            (Datum::Array(a), Datum::Array(b)) => {
                let mut v = Vec::with_capacity(a.len() + b.len());
                v.extend(a.iter().cloned());
                v.extend(b.iter().cloned());
                crate::terms::control::check_array_size(ev, v.len())?;
                Datum::array(v)
            }
            (t, Datum::Number(b)) if is_time(t) => {
                let e = ptype::time_epoch(t).unwrap_or(0.0);
                crate::terms::time::new_time(e + b, ptype::time_zone(t).unwrap_or("+00:00"))
            }
            (Datum::Number(a), t) if is_time(t) => {
                let e = ptype::time_epoch(t).unwrap_or(0.0);
                crate::terms::time::new_time(e + a, ptype::time_zone(t).unwrap_or("+00:00"))
            }
            (Datum::Number(_), other) => return Err(type_error("NUMBER", other)),
            (Datum::String(_), other) => return Err(type_error("STRING", other)),
            (Datum::Array(_), other) => return Err(type_error("ARRAY", other)),
            (a, _) => return Err(type_error("NUMBER", a)),
        };
    }
    Ok(Val::Datum(acc))
}

/// SUB: numbers, time − seconds, time − time.
pub fn sub(ev: &Ev) -> Result<Val> {
    let mut acc = ev.datum(0)?;
    for i in 1..ev.nargs() {
        let x = ev.datum(i)?;
        acc = match (&acc, &x) {
            (Datum::Number(a), Datum::Number(b)) => finite(a - b)?,
            (t, Datum::Number(b)) if is_time(t) => {
                let e = ptype::time_epoch(t).unwrap_or(0.0);
                crate::terms::time::new_time(e - b, ptype::time_zone(t).unwrap_or("+00:00"))
            }
            (t, u) if is_time(t) && is_time(u) => Datum::Number(crate::terms::time::round_ms(
                ptype::time_epoch(t).unwrap_or(0.0) - ptype::time_epoch(u).unwrap_or(0.0),
            )),
            (Datum::Number(_), other) => return Err(type_error("NUMBER", other)),
            (t, other) if is_time(t) => return Err(type_error("NUMBER", other)),
            (a, _) => return Err(type_error("NUMBER", a)),
        };
    }
    Ok(Val::Datum(acc))
}

/// MUL: numbers, and array × integer (repetition).
pub fn mul(ev: &Ev) -> Result<Val> {
    let mut acc = ev.datum(0)?;
    for i in 1..ev.nargs() {
        let x = ev.datum(i)?;
        acc = match (&acc, &x) {
            (Datum::Number(a), Datum::Number(b)) => finite(a * b)?,
            // RethinkDB takes the repeat count as a plain datum: any type error in it is
            // charged to the `mul` term.
            (Datum::Array(a), n) | (n, Datum::Array(a)) => {
                let times = int_of(n)?;
                if times < 0 {
                    return Err(logic(format!(
                        "Cannot multiply an ARRAY by a negative number: {times}"
                    )));
                }
                let total = a.len().saturating_mul(times as usize);
                crate::terms::control::check_array_size(ev, total)?;
                // The loop's length is bounded by the result, not by `times`: an empty
                // array times 2^53 is empty at once.
                let mut v = Vec::with_capacity(total);
                if !a.is_empty() {
                    for _ in 0..times {
                        v.extend(a.iter().cloned());
                    }
                }
                Datum::array(v)
            }
            (Datum::Number(_), other) => return Err(type_error("NUMBER", other)),
            (a, _) => return Err(type_error("NUMBER", a)),
        };
    }
    Ok(Val::Datum(acc))
}

/// DIV. Like every arithmetic term, its checks on the operands' values are charged to
/// the term itself.
pub fn div(ev: &Ev) -> Result<Val> {
    let mut acc = expect_num(&ev.datum(0)?)?;
    for i in 1..ev.nargs() {
        let x = expect_num(&ev.datum(i)?)?;
        if x == 0.0 {
            return Err(logic("Cannot divide by zero."));
        }
        acc /= x;
        finite(acc)?;
    }
    Ok(Val::Datum(Datum::Number(acc)))
}

/// The exact integer in a number datum (RethinkDB's integer checks and messages).
pub fn int_of(d: &Datum) -> Result<i64> {
    let n = expect_num(d)?;
    if n.fract() != 0.0 {
        return Err(logic(format!(
            "Number not an integer: {}",
            d.to_json_string()
        )));
    }
    if n.abs() > MAX_SAFE {
        return Err(logic(format!(
            "Number not an integer (>2^53): {}",
            d.to_json_string()
        )));
    }
    Ok(n as i64)
}

/// MOD: integer remainder, sign of the dividend.
pub fn modulo(ev: &Ev) -> Result<Val> {
    let a = ev.datum(0)?;
    let b = ev.datum(1)?;
    let a = int_of(&a).at(0)?;
    let b = int_of(&b).at(1)?;
    if b == 0 {
        return Err(logic("Cannot take a number modulo 0."));
    }
    Ok(Val::Datum(Datum::Number((a % b) as f64)))
}

/// FLOOR, CEIL, ROUND.
pub fn rounding(ev: &Ev) -> Result<Val> {
    let n = ev.num(0)?;
    let r = match ev.term.tt {
        T::FLOOR => n.floor(),
        T::CEIL => n.ceil(),
        _ => n.round(),
    };
    Ok(Val::Datum(Datum::Number(r)))
}

/// RethinkDB's `bit_arith_ranged_int`: converting the argument blames it, a value
/// outside [-2^53, 2^53) blames the term.
fn bit_int(ev: &Ev, i: usize) -> Result<i64> {
    let d = ev.datum(i)?;
    let n = int_of(&d).at(i)?;
    if n as f64 >= MAX_SAFE {
        return Err(logic(format!("Integer too large: {}", d.to_json_string())).here());
    }
    Ok(n)
}

/// BIT_AND, BIT_OR, BIT_XOR.
pub fn bits(ev: &Ev) -> Result<Val> {
    let mut acc = bit_int(ev, 0)?;
    for i in 1..ev.nargs() {
        let x = bit_int(ev, i)?;
        acc = match ev.term.tt {
            T::BIT_AND => acc & x,
            T::BIT_OR => acc | x,
            _ => acc ^ x,
        };
    }
    Ok(Val::Datum(Datum::Number(acc as f64)))
}

/// BIT_SAL, BIT_SAR: the value is a bit-flippable integer, the count any integer. A
/// left shift is computed in doubles as RethinkDB's `ldexp` is, so it may leave the
/// 53-bit range (and overflows to a non-finite number error) rather than wrap.
pub fn bit_shift(ev: &Ev) -> Result<Val> {
    let n = bit_int(ev, 0)?;
    let count = int_of(&ev.datum(1)?).at(1)?;
    if count < 0 {
        return Err(logic("Cannot bit-shift by a negative value"));
    }
    let out = if ev.term.tt == T::BIT_SAL {
        if n == 0 {
            0.0
        } else if count < 4096 {
            // Exact: a power of two times an integer below 2^53.
            (n as f64) * 2f64.powi(count as i32)
        } else {
            f64::INFINITY
        }
    } else if count > 63 {
        if n < 0 {
            -1.0
        } else {
            0.0
        }
    } else {
        (n >> count) as f64
    };
    Ok(Val::Datum(finite(out)?))
}

/// BIT_NOT.
pub fn bit_not(ev: &Ev) -> Result<Val> {
    Ok(Val::Datum(Datum::Number(!bit_int(ev, 0)? as f64)))
}

/// RANDOM: `r.random()`, `r.random(n)`, `r.random(a, b)`, `float: true`.
pub fn random(ev: &Ev) -> Result<Val> {
    let explicit = ev.opt_datum("float")?.is_some();
    let float = ev.opt_bool("float", false)? || (ev.nargs() == 0 && !explicit);
    if !float && ev.nargs() == 0 {
        return Err(logic(
            "Generating a random integer requires one or two bounds.",
        ));
    }
    let (lo, hi) = match ev.nargs() {
        0 => (0.0, 1.0),
        1 => (0.0, ev.num(0)?),
        _ => (ev.num(0)?, ev.num(1)?),
    };
    let mut rng = rand::thread_rng();
    if float {
        // lo + r(hi - lo) without overflowing when the bounds span the whole range;
        // bounds in either order, as RethinkDB.
        // Equal bounds give the bound itself (the blend can round away from it), and
        // rounding never takes the result outside the bounds.
        let r: f64 = rng.gen_range(0.0..1.0);
        let x = lo * (1.0 - r) + hi * r;
        let x = if lo == hi || !x.is_finite() {
            lo
        } else {
            x.clamp(lo.min(hi), lo.max(hi))
        };
        return Ok(Val::Datum(Datum::Number(x)));
    }
    let check = |n: f64, i: usize, which: &str| -> Result<i64> {
        if n.fract() != 0.0 || n.abs() > 9_007_199_254_740_992.0 {
            return Err(logic(format!(
                "{which} bound ({}) could not be safely converted to an integer.",
                Datum::Number(n).to_json_string()
            )))
            .at(i);
        }
        Ok(n as i64)
    };
    let (l, h) = if ev.nargs() == 1 {
        (0, check(hi, 0, "Upper")?)
    } else {
        (check(lo, 0, "Lower")?, check(hi, 1, "Upper")?)
    };
    if l >= h {
        return Err(logic(format!(
            "Lower bound ({l}) is not less than upper bound ({h})."
        )));
    }
    Ok(Val::Datum(Datum::Number(rng.gen_range(l..h) as f64)))
}

#[cfg(test)]
mod tests {
    use crate::value::Env;

    fn run(json: &str) -> std::result::Result<datum::Datum, crate::ReqlError> {
        let j: serde_json::Value =
            serde_json::from_str(json).map_err(|e| crate::error::logic(e.to_string()))?;
        let term = crate::term::compile_term(&j)?;
        let ctx = crate::testing::no_tables_ctx();
        let v = crate::eval::eval(&ctx, &Env::default(), &term)?;
        crate::eval::to_datum(&ctx, v)
    }

    /// Found by the conformance suite (about 1 run in 10): `r.random(a, a, float=True)`
    /// must be `a`, which `a(1 - r) + ar` is not always.
    #[test]
    fn a_random_float_between_equal_bounds_is_the_bound() {
        // r.random(-93.94757, -93.94757, float=True)
        let q = r#"[151,[-93.94757,-93.94757],{"float":true}]"#;
        for _ in 0..10_000 {
            assert_eq!(run(q).unwrap(), datum::Datum::Number(-93.94757));
        }
        let q = r#"[151,[0.1,0.30000000000000004],{"float":true}]"#;
        for _ in 0..10_000 {
            let x = run(q).unwrap().as_f64().unwrap();
            assert!((0.1..=0.30000000000000004).contains(&x), "{x}");
        }
    }

    /// Found by the `eval` fuzz target: a `fold` doubling a string (`acc + acc`) grew it
    /// to gigabytes within a second. The concatenation now stops at the limit.
    #[test]
    fn doubling_a_string_stops_at_the_limit() {
        // r.range(40).fold("ab", lambda acc, _: acc + acc)
        let q = r#"[187,[[173,[40]],"ab",[69,[[2,[1,2]],[24,[[10,[1]],[10,[1]]]]]]]]"#;
        let e = run(q).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::ResourceLimit);
        assert!(
            e.message
                .starts_with("String over size limit `67108864` bytes"),
            "{}",
            e.message
        );
        // Below the limit, concatenation is unchanged.
        let q = r#"[187,[[173,[3]],"ab",[69,[[2,[1,2]],[24,[[10,[1]],[10,[1]]]]]]]]"#;
        assert_eq!(run(q).unwrap().to_json_string(), "\"abababababababab\"");
    }
}
