//! Target `keys`: the order-preserving key encoding (`datum::keys`) against ReQL's
//! order (`datum::cmp`), on pairs of values built from the input (`arbitrary`).
//!
//! For two values `a`, `b` and their encodings:
//! - primary keys (`encode_primary`, never truncated: too long is an error) and
//!   secondary values (`encode_secondary`, whole) order bytewise exactly as `cmp`
//!   orders the values, equal encodings included;
//! - `decode(encode_primary(x))` is `x` in ReQL's order (times come back in UTC);
//! - a value refused as a secondary value is refused as a primary key too, unless it
//!   is or holds a range bound (`MinVal`/`MaxVal`, which primary-key bounds take);
//! - secondary index entries (`secondary_entry`) order as `(value, primary key, tag)`
//!   unless both values were truncated to the same `SECONDARY_TRUNC_BYTES`-byte prefix
//!   (the documented exception: readers re-sort such runs), and split back into their
//!   parts;
//! - the scan bounds `secondary_lower`/`secondary_upper` of a value `x` contain the
//!   entry of every `y` in the range (loose only when truncated: then they may also
//!   contain entries outside it, which readers filter).

use std::cmp::Ordering;

use arbitrary::{Result, Unstructured};
use datum::keys::{
    decode, encode_primary, encode_secondary, secondary_entry, secondary_lower, secondary_upper,
    split_secondary_entry, SECONDARY_TRUNC_BYTES,
};
use datum::{cmp, ptype, Datum};

/// Runs one input.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (Ok(a), Ok(b)) = (value(&mut u, 3), value(&mut u, 3)) else {
        return;
    };
    let tags: (Option<u32>, Option<u32>) = u.arbitrary().unwrap_or_default();
    let order = cmp(&a, &b);

    let (pa, pb) = (encode_primary(&a), encode_primary(&b));
    if let (Ok(x), Ok(y)) = (&pa, &pb) {
        assert_eq!(x.cmp(y), order, "primary order: {a:?} vs {b:?}");
    }
    for (d, p) in [(&a, &pa), (&b, &pb)] {
        if let Ok(p) = p {
            match decode(p) {
                Some(back) => assert_eq!(cmp(&back, d), Ordering::Equal, "decode of {d:?}"),
                None => panic!("primary key of {d:?} does not decode"),
            }
        }
    }

    let (sa, sb) = (encode_secondary(&a), encode_secondary(&b));
    for (d, s, p) in [(&a, &sa, &pa), (&b, &sb, &pb)] {
        if s.is_err() && !has_bound(d) {
            assert!(p.is_err(), "{d:?}: primary key but not secondary value");
        }
    }
    let (Ok(sa), Ok(sb)) = (sa, sb) else {
        return;
    };
    assert_eq!(sa.cmp(&sb), order, "secondary order: {a:?} vs {b:?}");

    // Entries, for two documents with these primary keys.
    let (ka, kb) = (vec![0x40, 1], vec![0x40, 2]);
    let (ea, ta) = secondary_entry(&sa, &ka, tags.0);
    let (eb, tb) = secondary_entry(&sb, &kb, tags.1);
    let prefix = |s: &[u8]| s.get(..SECONDARY_TRUNC_BYTES).unwrap_or(s).to_vec();
    if !(ta && tb && prefix(&sa) == prefix(&sb)) {
        let want = order.then(ka.cmp(&kb)).then(tags.0.cmp(&tags.1));
        assert_eq!(ea.cmp(&eb), want, "entry order: {a:?} vs {b:?}");
    }
    for (e, s, k, t) in [(&ea, &sa, &ka, tags.0), (&eb, &sb, &kb, tags.1)] {
        let parts = split_secondary_entry(e);
        let p = prefix(s);
        assert_eq!(parts, Some((&p[..], &k[..], t)), "entry does not split");
    }

    // Scan bounds of `a` against the entry of `b`.
    for inclusive in [true, false] {
        let lower = secondary_lower(&sa, inclusive);
        let upper = secondary_upper(&sa, inclusive);
        let above = if inclusive {
            order != Ordering::Greater
        } else {
            order == Ordering::Less
        };
        let below = if inclusive {
            order != Ordering::Less
        } else {
            order == Ordering::Greater
        };
        // `b` is in the range above (below) `a`: its entry is inside the bound.
        if above {
            assert!(eb >= lower, "lower bound of {a:?} excludes {b:?}");
        }
        if below {
            assert!(eb < upper, "upper bound of {a:?} excludes {b:?}");
        }
        if !ta && !tb {
            assert_eq!(eb >= lower, above, "lower bound of {a:?} admits {b:?}");
            assert_eq!(eb < upper, below, "upper bound of {a:?} admits {b:?}");
        }
    }
}

/// Whether `d` is or holds `MinVal`/`MaxVal` (range bounds: primary-key encodings take
/// them, secondary values do not).
fn has_bound(d: &Datum) -> bool {
    match d {
        Datum::MinVal | Datum::MaxVal => true,
        Datum::Array(a) => a.iter().any(has_bound),
        _ => false,
    }
}

/// A value: mostly keyable ones, sometimes null, objects and range bounds (refused).
fn value(u: &mut Unstructured, depth: u32) -> Result<Datum> {
    Ok(match u.int_in_range(0..=13)? {
        0 => Datum::Bool(u.arbitrary()?),
        1..=3 => Datum::Number(number(u)?),
        4..=6 => Datum::str(&string(u)?),
        7 | 8 if depth > 0 => {
            let n = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, depth - 1)?);
            }
            Datum::array(items)
        }
        9 => ptype::make_binary(&bytes(u)?),
        10 => {
            let tz = *u.choose(&["+00:00", "-07:00", "+13:45"])?;
            ptype::make_time(number(u)?, tz)
        }
        11 => u
            .choose(&[Datum::Null, Datum::MinVal, Datum::MaxVal])?
            .clone(),
        12 => {
            let mut o = datum::Object::new();
            o.insert(datum::Str::from(string(u)?.as_str()), Datum::Null);
            Datum::object(o)
        }
        // Long strings: around the 127-character primary limit and the truncation
        // of secondary entries.
        _ => {
            let c = *u.choose(&['a', 'b', '\u{0}', 'é'])?;
            let n = u.int_in_range(100..=260)?;
            let mut s: String = std::iter::repeat_n(c, n).collect();
            s.push_str(&string(u)?);
            Datum::str(&s)
        }
    })
}

fn number(u: &mut Unstructured) -> Result<f64> {
    let n = match u.int_in_range(0..=3)? {
        0 => f64::from(u.int_in_range(-3i8..=3)?),
        1 => *u.choose(&[
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            1e20,
            9007199254740993.0,
        ])?,
        2 => f64::from(u.arbitrary::<i32>()?) / 8.0,
        _ => f64::from_bits(u.arbitrary()?),
    };
    Ok(if n.is_finite() { n } else { 1.5 })
}

fn string(u: &mut Unstructured) -> Result<String> {
    let n = u.int_in_range(0..=6)?;
    let mut s = String::new();
    for _ in 0..n {
        s.push(*u.choose(&['a', 'b', '\u{0}', '\u{1}', '\u{ff}', 'é', '\u{10ffff}', 'Z'])?);
    }
    Ok(s)
}

fn bytes(u: &mut Unstructured) -> Result<Vec<u8>> {
    let n = u.int_in_range(0..=6)?;
    (0..n)
        .map(|_| Ok(*u.choose(&[0u8, 1, 2, 0x7f, 0xff])?))
        .collect()
}
