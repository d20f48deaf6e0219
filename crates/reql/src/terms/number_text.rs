//! Reading a number from a string, as `coerce_to('NUMBER')` does.
//!
//! RethinkDB reads the string with C's `sscanf(s, "%lf%c")` and accepts it only when
//! exactly one item is read: leading white space is skipped, an optional sign, then a
//! decimal number (`1`, `.5`, `5.`, `1e5`), a hexadecimal one (`0x1A`, `0x1.8p3`), an
//! infinity (`inf`, `infinity`) or a NaN (`nan`, `nan(…)`), any case, and nothing may
//! follow, not even white space. The value then becomes a datum, which refuses a
//! non-finite number: `"inf"`, `"-inf"`, `"nan"` and out-of-range numbers such as
//! `"1e400"` fail with `Non-finite number: inf` (C's `%.20g` of the value).

/// What the text reads as.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// A finite number.
    Number(f64),
    /// A number RethinkDB reads but cannot hold: the error text.
    NonFinite(String),
    /// Not a number at all.
    Invalid,
}

/// Reads `s` as RethinkDB's `coerce_to('NUMBER')` does.
pub fn read(s: &str) -> Read {
    let t = s.trim_start_matches([' ', '\t', '\n', '\u{0b}', '\u{0c}', '\r']);
    let (neg, body) = match (t.strip_prefix('-'), t.strip_prefix('+')) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => (false, t),
    };
    let v = match special(body)
        .or_else(|| hex(body))
        .or_else(|| decimal(body))
    {
        Some(v) => v,
        None => return Read::Invalid,
    };
    let v = if neg { -v } else { v };
    if v.is_finite() {
        Read::Number(v)
    } else {
        Read::NonFinite(format!("Non-finite number: {}", c_print(v)))
    }
}

/// C's `%g` of a non-finite value.
pub fn c_print(v: f64) -> &'static str {
    match (v.is_nan(), v.is_sign_negative()) {
        (true, false) => "nan",
        (true, true) => "-nan",
        (false, false) => "inf",
        (false, true) => "-inf",
    }
}

/// `inf`, `infinity`, `nan` and `nan(chars)`, any case.
fn special(b: &str) -> Option<f64> {
    let l = b.to_ascii_lowercase();
    if l == "inf" || l == "infinity" {
        return Some(f64::INFINITY);
    }
    if l == "nan" {
        return Some(f64::NAN);
    }
    let inner = l.strip_prefix("nan(")?.strip_suffix(')')?;
    inner
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        .then_some(f64::NAN)
}

/// A decimal number: digits with an optional point (at least one digit), then an
/// optional exponent with at least one digit.
fn decimal(b: &str) -> Option<f64> {
    let bytes = b.as_bytes();
    let mut i = 0;
    let mut digits = 0;
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
        digits += 1;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    if i != bytes.len() {
        return None;
    }
    // Rust's parser rounds correctly, as glibc's does; it reads `5.` and `.5` too.
    b.parse::<f64>().ok()
}

/// A hexadecimal number: `0x`, hex digits with an optional point (at least one digit),
/// then an optional binary exponent `p[+-]digits`.
fn hex(b: &str) -> Option<f64> {
    let rest = b.strip_prefix("0x").or_else(|| b.strip_prefix("0X"))?;
    let bytes = rest.as_bytes();
    let mut i = 0;
    // Up to 28 significant hex digits (112 bits) are kept; later ones only scale.
    let mut mant: u128 = 0;
    let mut kept = 0u32;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut seen_point = false;
    loop {
        match bytes.get(i) {
            Some(&c) if c.is_ascii_hexdigit() => {
                let v = u128::from((c as char).to_digit(16).unwrap_or(0));
                digits += 1;
                if mant == 0 && v == 0 {
                    if seen_point {
                        exp -= 4;
                    }
                } else if kept < 28 {
                    mant = (mant << 4) | v;
                    kept += 1;
                    if seen_point {
                        exp -= 4;
                    }
                } else if !seen_point {
                    exp += 4;
                }
            }
            Some(b'.') if !seen_point => seen_point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'p' | b'P')) {
        i += 1;
        let neg = match bytes.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        let mut e: i64 = 0;
        while let Some(d) = bytes.get(i).filter(|c| c.is_ascii_digit()) {
            e = e.saturating_mul(10).saturating_add(i64::from(d - b'0'));
            i += 1;
        }
        if i == start {
            return None;
        }
        exp = exp.saturating_add(if neg { -e } else { e });
    }
    if i != bytes.len() {
        return None;
    }
    Some(scale(mant as f64, exp))
}

/// `m * 2^exp`, saturating to 0 or infinity.
fn scale(m: f64, exp: i64) -> f64 {
    if m == 0.0 {
        return 0.0;
    }
    let mut v = m;
    let mut e = exp.clamp(-2200, 2200);
    while e > 0 {
        let step = e.min(1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= 2f64.powi(step as i32);
        e += step;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Read {
        read(s)
    }

    #[test]
    fn decimal_forms() {
        assert_eq!(n("1"), Read::Number(1.0));
        assert_eq!(n("  -2.5"), Read::Number(-2.5));
        assert_eq!(n("+1"), Read::Number(1.0));
        assert_eq!(n(".5"), Read::Number(0.5));
        assert_eq!(n("5."), Read::Number(5.0));
        assert_eq!(n("1e5"), Read::Number(100000.0));
        assert_eq!(n("1E-2"), Read::Number(0.01));
        assert_eq!(n("1e-400"), Read::Number(0.0));
        for bad in [
            "", " ", "1 ", "1e", "1e+", ".", "-", "1.2.3", "1x", "e5", "++1", "0x",
        ] {
            assert_eq!(n(bad), Read::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn hexadecimal_forms() {
        assert_eq!(n("0x10"), Read::Number(16.0));
        assert_eq!(n("-0X1A"), Read::Number(-26.0));
        assert_eq!(n("0x1.8p1"), Read::Number(3.0));
        assert_eq!(n("0x.8"), Read::Number(0.5));
        assert_eq!(n("0x1p-2"), Read::Number(0.25));
        assert_eq!(n("0x1p"), Read::Invalid);
        assert_eq!(
            n("0x1p5000"),
            Read::NonFinite("Non-finite number: inf".into())
        );
    }

    #[test]
    fn non_finite() {
        let nf = |s: &str| Read::NonFinite(format!("Non-finite number: {s}"));
        assert_eq!(n("inf"), nf("inf"));
        assert_eq!(n("INFINITY"), nf("inf"));
        assert_eq!(n("-inf"), nf("-inf"));
        assert_eq!(n("nan"), nf("nan"));
        assert_eq!(n("-NaN"), nf("-nan"));
        assert_eq!(n("nan(123)"), nf("nan"));
        assert_eq!(n("1e400"), nf("inf"));
        assert_eq!(n("-1e400"), nf("-inf"));
        assert_eq!(n("infin"), Read::Invalid);
        assert_eq!(n("inf "), Read::Invalid);
    }
}
