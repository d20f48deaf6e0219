//! ReQL's total order over Datums, as RethinkDB's `datum_t::modern_cmp` defines it.
//!
//! - `MinVal` is below and `MaxVal` above everything.
//! - Two pseudo-types of different kinds order by their `$reql_type$`; of the same kind
//!   by their value (`TIME` by `epoch_time` alone, `BINARY` by bytes). `GEOMETRY`
//!   compares as a plain object.
//! - A pseudo-type against anything else, and values of different types, order by type
//!   name: ARRAY < BOOL < NULL < NUMBER < OBJECT < PTYPE<…> < STRING.
//! - Arrays compare lexicographically; objects as their sorted (key, value) lists.

use std::cmp::Ordering;

use crate::ptype;
use crate::value::Datum;

/// Compares two Datums in ReQL's order.
pub fn cmp(a: &Datum, b: &Datum) -> Ordering {
    crate::work::tick();
    match (a, b) {
        (Datum::MinVal, Datum::MinVal) | (Datum::MaxVal, Datum::MaxVal) => return Ordering::Equal,
        (Datum::MinVal, _) | (_, Datum::MaxVal) => return Ordering::Less,
        (_, Datum::MinVal) | (Datum::MaxVal, _) => return Ordering::Greater,
        _ => {}
    }
    let ta = ordered_ptype(a);
    let tb = ordered_ptype(b);
    match (ta, tb) {
        (Some(x), Some(y)) => {
            if x != y {
                return x.cmp(y);
            }
            return ptype_cmp(x, a, b);
        }
        (Some(_), None) | (None, Some(_)) => {
            return a.type_name().cmp(&b.type_name());
        }
        (None, None) => {}
    }
    match (a, b) {
        (Datum::Null, Datum::Null) => Ordering::Equal,
        (Datum::Bool(x), Datum::Bool(y)) => x.cmp(y),
        (Datum::Number(x), Datum::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Datum::String(x), Datum::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Datum::Array(x), Datum::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let c = cmp(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Datum::Object(x), Datum::Object(y)) => {
            for ((ka, va), (kb, vb)) in x.iter().zip(y.iter()) {
                let c = ka.as_bytes().cmp(kb.as_bytes());
                if c != Ordering::Equal {
                    return c;
                }
                let c = cmp(va, vb);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

/// The pseudo-type name when the value orders as a pseudo-type (GEOMETRY does not).
fn ordered_ptype(d: &Datum) -> Option<&str> {
    match d.reql_type() {
        Some("GEOMETRY") | None => None,
        Some(t) => Some(t),
    }
}

fn ptype_cmp(kind: &str, a: &Datum, b: &Datum) -> Ordering {
    match kind {
        "TIME" => {
            let x = ptype::time_epoch(a).unwrap_or(0.0);
            let y = ptype::time_epoch(b).unwrap_or(0.0);
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        "BINARY" => {
            let x = ptype::binary_bytes(a).unwrap_or_default();
            let y = ptype::binary_bytes(b).unwrap_or_default();
            x.cmp(&y)
        }
        _ => {
            // Unknown pseudo-types compare structurally.
            match (a, b) {
                (Datum::Object(x), Datum::Object(y)) => x.iter().cmp(y.iter()),
                _ => Ordering::Equal,
            }
        }
    }
}

fn type_rank(d: &Datum) -> u8 {
    match d {
        Datum::MinVal => 0,
        Datum::Array(_) => 1,
        Datum::Bool(_) => 2,
        Datum::Null => 3,
        Datum::Number(_) => 4,
        Datum::Object(_) => 5,
        Datum::String(_) => 7,
        Datum::MaxVal => 9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json_slice;

    fn d(s: &str) -> Datum {
        from_json_slice(s.as_bytes()).unwrap()
    }

    #[test]
    fn type_order() {
        let ordered = [
            "[1]",
            "false",
            "true",
            "null",
            "-1",
            "2",
            "{}",
            r#"{"$reql_type$":"BINARY","data":""}"#,
            r#"{"$reql_type$":"TIME","epoch_time":0,"timezone":"+00:00"}"#,
            r#""a""#,
        ];
        for w in ordered.windows(2) {
            assert_eq!(
                cmp(&d(w[0]), &d(w[1])),
                Ordering::Less,
                "{} < {}",
                w[0],
                w[1]
            );
        }
        assert_eq!(cmp(&Datum::MinVal, &d("[]")), Ordering::Less);
        assert_eq!(cmp(&Datum::MaxVal, &d("\"z\"")), Ordering::Greater);
    }

    #[test]
    fn times_ignore_timezone() {
        let a = d(r#"{"$reql_type$":"TIME","epoch_time":5,"timezone":"+00:00"}"#);
        let b = d(r#"{"$reql_type$":"TIME","epoch_time":5,"timezone":"+02:00"}"#);
        assert_eq!(a, b);
    }

    #[test]
    fn arrays_and_objects() {
        assert!(d("[1,2]") < d("[1,2,0]"));
        assert!(d("[1,3]") > d("[1,2,9]"));
        assert!(d(r#"{"a":1}"#) < d(r#"{"a":2}"#));
        assert!(d(r#"{"a":1}"#) < d(r#"{"b":0}"#));
        assert_eq!(d("1"), d("1.0"));
    }
}
