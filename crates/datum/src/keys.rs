//! Order-preserving byte encoding of primary keys: the only place keys are encoded.
//!
//! For any two keyable Datums `a` and `b`, `encode(a) < encode(b)` (bytewise) exactly when
//! `a < b` in ReQL's order, so the storage engine's ordered scans are ReQL-ordered.
//!
//! Layout: one tag byte per type, ordered as ReQL orders types, then the value:
//! - numbers: the IEEE-754 bits made sortable (sign bit flipped for positives, all bits
//!   inverted for negatives), 8 bytes big-endian; `-0.0` is encoded as `0.0`;
//! - strings and binary: the bytes with `0x00` escaped as `0x00 0xFF`, then `0x00 0x00`;
//! - arrays: the encoded items followed by a `0x00` end byte (below every tag);
//! - times: the sortable epoch seconds (time zones do not affect order or identity).
//!
//! Which values may be primary keys, and the maximum key length (127 characters), follow
//! RethinkDB's `datum_t::print_primary`.

use crate::ptype;
use crate::value::Datum;

/// RethinkDB's longest primary key (`MAX_PRIMARY_KEY_SIZE - 1`).
pub const MAX_PRIMARY_KEY_CHARS: usize = 127;

const TAG_MIN: u8 = 0x01;
const TAG_ARRAY: u8 = 0x10;
const TAG_FALSE: u8 = 0x20;
const TAG_TRUE: u8 = 0x21;
const TAG_NULL: u8 = 0x30;
const TAG_NUMBER: u8 = 0x40;
const TAG_BINARY: u8 = 0x60;
const TAG_TIME: u8 = 0x68;
const TAG_STRING: u8 = 0x70;
const TAG_MAX: u8 = 0xFE;

/// Why a value cannot be a primary key (the message is RethinkDB's).
#[derive(Debug, Clone, PartialEq)]
pub enum KeyError {
    /// Null, objects, and pseudo-types that are not keyable.
    BadType(String),
    /// Longer than `MAX_PRIMARY_KEY_CHARS`.
    TooLong(String),
}

impl KeyError {
    /// RethinkDB's text for this error.
    pub fn message(&self) -> &str {
        match self {
            KeyError::BadType(m) | KeyError::TooLong(m) => m,
        }
    }
}

/// Encodes a primary key, checking RethinkDB's type and length rules.
pub fn encode_primary(d: &Datum) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(24);
    encode_into(d, &mut out, true)?;
    if printed_len(d) > MAX_PRIMARY_KEY_CHARS {
        return Err(KeyError::TooLong(format!(
            "Primary key too long (max {} characters): {}",
            MAX_PRIMARY_KEY_CHARS,
            d.to_json_string()
        )));
    }
    Ok(out)
}

/// Encodes a range bound (MinVal/MaxVal allowed, no length limit).
pub fn encode_bound(d: &Datum) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(24);
    encode_into(d, &mut out, true)?;
    Ok(out)
}

fn bad_type(d: &Datum) -> KeyError {
    KeyError::BadType(format!(
        "Primary keys must be either a number, string, bool, pseudotype or array (got type {}):\n{}",
        d.type_name(),
        d.to_pretty_string()
    ))
}

/// The length RethinkDB's printed primary key would have (it limits that, not ours).
fn printed_len(d: &Datum) -> usize {
    match d {
        Datum::String(s) => 1 + s.len(),
        Datum::Number(_) => 1 + 16 + 1 + 24,
        Datum::Bool(_) => 2,
        Datum::Array(a) => 1 + a.iter().map(|x| printed_len(x) + 1).sum::<usize>(),
        other => 1 + other.to_json_string().len(),
    }
}

fn encode_into(d: &Datum, out: &mut Vec<u8>, top: bool) -> Result<(), KeyError> {
    match d {
        Datum::MinVal => out.push(TAG_MIN),
        Datum::MaxVal => out.push(TAG_MAX),
        Datum::Null => {
            if top {
                return Err(bad_type(d));
            }
            out.push(TAG_NULL)
        }
        Datum::Bool(b) => out.push(if *b { TAG_TRUE } else { TAG_FALSE }),
        Datum::Number(n) => {
            out.push(TAG_NUMBER);
            out.extend_from_slice(&sortable_f64(*n));
        }
        Datum::String(s) => {
            out.push(TAG_STRING);
            escape_bytes(s.as_bytes(), out);
        }
        Datum::Array(a) => {
            out.push(TAG_ARRAY);
            for item in a.iter() {
                encode_into(item, out, false)?;
            }
            out.push(0x00);
        }
        Datum::Object(_) => match d.reql_type() {
            Some("TIME") => {
                out.push(TAG_TIME);
                out.extend_from_slice(&sortable_f64(ptype::time_epoch(d).unwrap_or(0.0)));
            }
            Some("BINARY") => {
                out.push(TAG_BINARY);
                escape_bytes(&ptype::binary_bytes(d).unwrap_or_default(), out);
            }
            _ => return Err(bad_type(d)),
        },
    }
    Ok(())
}

/// Sortable big-endian bytes of a double.
fn sortable_f64(n: f64) -> [u8; 8] {
    let n = if n == 0.0 { 0.0 } else { n };
    let bits = n.to_bits();
    let bits = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    bits.to_be_bytes()
}

fn escape_bytes(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        out.push(c);
        if c == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json_slice;
    use proptest::prelude::*;

    fn d(s: &str) -> Datum {
        from_json_slice(s.as_bytes()).unwrap()
    }

    #[test]
    fn rejects_null_and_objects() {
        assert!(matches!(
            encode_primary(&Datum::Null),
            Err(KeyError::BadType(_))
        ));
        assert!(matches!(
            encode_primary(&d(r#"{"a":1}"#)),
            Err(KeyError::BadType(_))
        ));
        let long = Datum::str(&"x".repeat(127));
        assert!(matches!(encode_primary(&long), Err(KeyError::TooLong(_))));
        assert!(encode_primary(&Datum::str(&"x".repeat(126))).is_ok());
    }

    #[test]
    fn order_matches_reql() {
        let vals = [
            "[]",
            "[1]",
            "[1,\"a\"]",
            "[2]",
            "false",
            "true",
            "-1e300",
            "-1",
            "-0.5",
            "0",
            "0.5",
            "3",
            "1e300",
            "\"\"",
            "\"a\"",
            "\"a\\u0000\"",
            "\"ab\"",
            "\"b\"",
        ];
        for w in vals.windows(2) {
            let a = encode_primary(&d(w[0])).unwrap();
            let b = encode_primary(&d(w[1])).unwrap();
            assert!(a < b, "{} < {}", w[0], w[1]);
        }
        assert!(encode_bound(&Datum::MinVal).unwrap() < encode_primary(&d("[]")).unwrap());
        assert!(encode_bound(&Datum::MaxVal).unwrap() > encode_primary(&d("\"zz\"")).unwrap());
    }

    fn leaf() -> impl Strategy<Value = Datum> {
        prop_oneof![
            any::<bool>().prop_map(Datum::Bool),
            (-1e12f64..1e12).prop_map(Datum::Number),
            "[a-c\u{0}]{0,4}".prop_map(|s| Datum::str(&s)),
        ]
    }

    fn key() -> impl Strategy<Value = Datum> {
        leaf().prop_recursive(2, 8, 3, |inner| {
            prop::collection::vec(inner, 0..3).prop_map(Datum::array)
        })
    }

    proptest! {
        #[test]
        fn encoding_preserves_order(a in key(), b in key()) {
            let ea = encode_bound(&a).unwrap();
            let eb = encode_bound(&b).unwrap();
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        }
    }
}
