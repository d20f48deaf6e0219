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
//!
//! Secondary index entries (`secondary_entry`) are `S' ‖ P ‖ T ‖ len(P) (u16) ‖ len(T) (u8)`:
//! `S'` the encoded index value truncated to `SECONDARY_TRUNC_BYTES`, `P` the encoded
//! primary key (so entries stay unique and equal values sort by primary key, as in
//! RethinkDB's `print_secondary`), `T` the 4-byte position of the value in a multi
//! index's array (RethinkDB's tag). Encodings are prefix-free, so entry order is
//! `(S, P, T)` order as long as `S` is not truncated. Truncated entries (RethinkDB
//! truncates at `MAX_KEY_SIZE` too) keep the full `S` in the entry's value; readers
//! re-check range bounds against it and re-sort runs of entries sharing one truncated
//! prefix. Ponder truncates at a fixed length (RethinkDB's depends on the primary key's
//! length), so such runs are exactly the entries sharing their first
//! `SECONDARY_TRUNC_BYTES` bytes.

use crate::ptype;
use crate::value::Datum;

/// RethinkDB's longest primary key as its error message states it
/// (`MAX_PRIMARY_KEY_SIZE - 1`).
pub const MAX_PRIMARY_KEY_CHARS: usize = 127;

/// RethinkDB's `MAX_PRIMARY_KEY_SIZE`: the longest printed primary key
/// (`datum_t::print_primary`, whose output carries a one-byte type prefix).
const MAX_PRIMARY_KEY_SIZE: usize = MAX_PRIMARY_KEY_CHARS + 1;

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

/// Which key an encoding is for (they differ only in their error messages).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Primary,
    Secondary,
}

/// Encodes a primary key, checking RethinkDB's type and length rules.
pub fn encode_primary(d: &Datum) -> Result<Vec<u8>, KeyError> {
    check_nul(d)?;
    // A string key (the common one) fits exactly: tag, text, terminator.
    let room = match d {
        Datum::String(s) => s.len() + 3,
        _ => 24,
    };
    let mut out = Vec::with_capacity(room);
    encode_into(d, &mut out, true, Kind::Primary)?;
    if printed_len(d) > MAX_PRIMARY_KEY_SIZE {
        return Err(too_long(d));
    }
    Ok(out)
}

/// Whether `d` can be a primary key: `encode_primary`'s answer without its encoding,
/// for a caller that only checks (an insert validating a document before the store
/// encodes the key); a string key, the common one, is checked without allocating.
pub fn check_primary(d: &Datum) -> Result<(), KeyError> {
    match d {
        Datum::String(_) => {
            check_nul(d)?;
            if printed_len(d) > MAX_PRIMARY_KEY_SIZE {
                return Err(too_long(d));
            }
            Ok(())
        }
        _ => encode_primary(d).map(drop),
    }
}

/// The error for a primary key longer than RethinkDB's limit.
fn too_long(d: &Datum) -> KeyError {
    KeyError::TooLong(format!(
        "Primary key too long (max {} characters): {}",
        MAX_PRIMARY_KEY_CHARS,
        d.to_json_string()
    ))
}

/// RethinkDB refuses NUL bytes in the strings of a primary key (top level or inside an
/// array): its key format cannot hold them.
fn check_nul(d: &Datum) -> Result<(), KeyError> {
    match d {
        Datum::String(s) => match memchr::memchr(0, s.as_bytes()) {
            Some(pos) => Err(KeyError::BadType(format!(
                "String {} (truncated) contains NULL byte at offset {pos} in index key.",
                quoted_prefix(s.as_bytes(), 20)
            ))),
            None => Ok(()),
        },
        Datum::Array(a) => a.iter().try_for_each(check_nul),
        _ => Ok(()),
    }
}

/// RethinkDB's `debug_print_quoted_string` of the first `max` bytes.
fn quoted_prefix(bytes: &[u8], max: usize) -> String {
    let mut out = String::from("\"");
    for &b in bytes.iter().take(max) {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Encodes a range bound (MinVal/MaxVal allowed, no length limit).
pub fn encode_bound(d: &Datum) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(24);
    encode_into(d, &mut out, true, Kind::Primary)?;
    Ok(out)
}

/// Encodes a secondary index value (no length limit: entries truncate it), checking
/// RethinkDB's rules: numbers, strings, bools, times, binary and arrays of those (nulls
/// allowed inside arrays); never null, objects or geometry.
pub fn encode_secondary(d: &Datum) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(24);
    encode_into(d, &mut out, true, Kind::Secondary)?;
    Ok(out)
}

fn bad_type(d: &Datum, kind: Kind, top: bool) -> KeyError {
    if d.reql_type() == Some("GEOMETRY") {
        return KeyError::BadType(
            "Cannot use a geometry value as a key value in a primary or non-geospatial secondary index."
                .to_string(),
        );
    }
    KeyError::BadType(match (kind, top) {
        (Kind::Primary, _) => format!(
            "Primary keys must be either a number, string, bool, pseudotype or array (got type {}):\n{}",
            d.type_name(),
            d.to_pretty_string()
        ),
        (Kind::Secondary, true) => format!(
            "Secondary keys must be a number, string, bool, pseudotype, or array (got type {}):\n{}",
            d.type_name(),
            d.to_pretty_string()
        ),
        (Kind::Secondary, false) => format!(
            "Array keys can only contain numbers, strings, bools, pseudotypes, or arrays (got {} of type {}).",
            d.to_pretty_string(),
            d.type_name()
        ),
    })
}

/// The longest stored prefix of a secondary index value (bytes); longer values are
/// truncated in the entry key and kept whole in the entry value.
pub const SECONDARY_TRUNC_BYTES: usize = 200;

/// Builds the entry key of one secondary index value (`sec`, from `encode_secondary`)
/// for the document with encoded primary key `pk`; `tag` is the position of the value in
/// a multi index's array. Returns the key and whether `sec` was truncated.
pub fn secondary_entry(sec: &[u8], pk: &[u8], tag: Option<u32>) -> (Vec<u8>, bool) {
    let truncated = sec.len() > SECONDARY_TRUNC_BYTES;
    let s = sec
        .get(..SECONDARY_TRUNC_BYTES)
        .filter(|_| truncated)
        .unwrap_or(sec);
    let mut out = Vec::with_capacity(s.len() + pk.len() + 8);
    out.extend_from_slice(s);
    out.extend_from_slice(pk);
    let tag_len = match tag {
        Some(t) => {
            out.extend_from_slice(&t.to_be_bytes());
            4u8
        }
        None => 0,
    };
    out.extend_from_slice(&(pk.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.push(tag_len);
    (out, truncated)
}

/// The parts of an entry key: the (possibly truncated) value, the primary key, the tag.
pub fn split_secondary_entry(key: &[u8]) -> Option<(&[u8], &[u8], Option<u32>)> {
    let n = key.len();
    let tag_len = *key.last()? as usize;
    let pk_len = u16::from_be_bytes([*key.get(n.checked_sub(3)?)?, *key.get(n - 2)?]) as usize;
    let pk_end = n.checked_sub(3 + tag_len)?;
    let pk_start = pk_end.checked_sub(pk_len)?;
    let tag = match tag_len {
        4 => key
            .get(pk_end..pk_end + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes),
        _ => None,
    };
    Some((key.get(..pk_start)?, key.get(pk_start..pk_end)?, tag))
}

/// The lowest entry key whose value is `>= sec` (`inclusive`) or `> sec`, for a range
/// scan; with a truncated `sec` the bound is loose and readers re-check whole values.
pub fn secondary_lower(sec: &[u8], inclusive: bool) -> Vec<u8> {
    if sec.len() > SECONDARY_TRUNC_BYTES {
        return sec.get(..SECONDARY_TRUNC_BYTES).unwrap_or(sec).to_vec();
    }
    let mut out = sec.to_vec();
    if !inclusive {
        out.push(0xFF);
    }
    out
}

/// The entry key above every entry whose value is `<= sec` (`inclusive`) or `< sec`
/// (exclusive upper bound of a range scan); loose for a truncated `sec`.
pub fn secondary_upper(sec: &[u8], inclusive: bool) -> Vec<u8> {
    if sec.len() > SECONDARY_TRUNC_BYTES {
        let mut out = sec.get(..SECONDARY_TRUNC_BYTES).unwrap_or(sec).to_vec();
        out.push(0xFF);
        return out;
    }
    let mut out = sec.to_vec();
    if inclusive {
        out.push(0xFF);
    }
    out
}

/// Decodes an encoded key back into a Datum (times come back in UTC: the encoding keeps
/// only the instant). `None` for bytes that are not one whole encoded value.
pub fn decode(bytes: &[u8]) -> Option<Datum> {
    let (d, rest) = decode_one(bytes)?;
    rest.is_empty().then_some(d)
}

fn decode_one(b: &[u8]) -> Option<(Datum, &[u8])> {
    let (&tag, rest) = b.split_first()?;
    match tag {
        TAG_MIN => Some((Datum::MinVal, rest)),
        TAG_MAX => Some((Datum::MaxVal, rest)),
        TAG_NULL => Some((Datum::Null, rest)),
        TAG_FALSE => Some((Datum::Bool(false), rest)),
        TAG_TRUE => Some((Datum::Bool(true), rest)),
        TAG_NUMBER => {
            let (n, rest) = unsortable_f64(rest)?;
            Some((Datum::Number(n), rest))
        }
        TAG_TIME => {
            let (n, rest) = unsortable_f64(rest)?;
            Some((ptype::make_time(n, "+00:00"), rest))
        }
        TAG_STRING => {
            let (bytes, rest) = unescape_bytes(rest)?;
            Some((Datum::str(&String::from_utf8(bytes).ok()?), rest))
        }
        TAG_BINARY => {
            let (bytes, rest) = unescape_bytes(rest)?;
            Some((ptype::make_binary(&bytes), rest))
        }
        TAG_ARRAY => {
            let mut items = Vec::new();
            let mut rest = rest;
            loop {
                let (&first, tail) = rest.split_first()?;
                if first == 0 {
                    return Some((Datum::array(items), tail));
                }
                let (d, r) = decode_one(rest)?;
                items.push(d);
                rest = r;
            }
        }
        _ => None,
    }
}

fn unsortable_f64(b: &[u8]) -> Option<(f64, &[u8])> {
    let raw: [u8; 8] = b.get(..8)?.try_into().ok()?;
    let bits = u64::from_be_bytes(raw);
    let bits = if bits >> 63 == 1 {
        bits & !(1 << 63)
    } else {
        !bits
    };
    Some((f64::from_bits(bits), b.get(8..)?))
}

fn unescape_bytes(b: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let c = *b.get(i)?;
        if c == 0 {
            match *b.get(i + 1)? {
                0 => return Some((out, b.get(i + 2..)?)),
                0xFF => {
                    out.push(0);
                    i += 2;
                }
                _ => return None,
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
}

/// The length of RethinkDB's printed primary key (`datum_t::print_primary`; it limits
/// that, not our encoding): `S` + the string; `N` + 16 hex digits + `#` + the number
/// in `%.20g`; `Bt`/`Bf`; `PBINARY:` + the bytes (0x00 and 0x01 escaped to two
/// bytes); `PTIME:` + the epoch time's number key; `A` + each item and a NUL.
/// RethinkDB stops appending at `MAX_KEY_SIZE` (250), far above the limit, so that cap
/// never changes whether a key is too long.
fn printed_len(d: &Datum) -> usize {
    // `num_to_str_key` prints -0 as 0.
    let number = |n: f64| 1 + 16 + 1 + fmt_g20(if n == 0.0 { 0.0 } else { n }).len();
    match d {
        Datum::MinVal | Datum::MaxVal => 1,
        Datum::String(s) => 1 + s.len(),
        Datum::Number(n) => number(*n),
        Datum::Bool(_) => 2,
        Datum::Array(a) => 1 + a.iter().map(|x| printed_len(x) + 1).sum::<usize>(),
        Datum::Null => 1,
        Datum::Object(_) => match d.reql_type() {
            Some("TIME") => "PTIME:".len() + number(ptype::time_epoch(d).unwrap_or(0.0)),
            Some("BINARY") => {
                let bytes = ptype::binary_bytes(d).unwrap_or_default();
                "PBINARY:".len() + bytes.len() + bytes.iter().filter(|&&b| b <= 1).count()
            }
            // Not keyable: refused by the encoding before the length matters.
            _ => 1 + d.to_json_string().len(),
        },
    }
}

/// C's `printf("%.20g", x)`, RethinkDB's `PR_RECONSTRUCTABLE_DOUBLE` (number keys,
/// geometry error messages, HTTP parameters): 20 significant digits, trailing zeros
/// dropped, exponent notation when the exponent is below -4 or at least 20.
pub fn fmt_g20(x: f64) -> String {
    const PRECISION: i32 = 20;
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    if !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..PRECISION).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_fraction_zeros(mantissa), exp.abs())
    } else {
        let decimals = usize::try_from(PRECISION - 1 - exp).unwrap_or(0);
        strip_fraction_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

/// `%g`'s removal of trailing zeros (and of a then-bare decimal point).
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn encode_into(d: &Datum, out: &mut Vec<u8>, top: bool, kind: Kind) -> Result<(), KeyError> {
    crate::work::tick();
    match d {
        Datum::MinVal | Datum::MaxVal if kind == Kind::Secondary => {
            return Err(KeyError::BadType(
                "Cannot use `r.minval` or `r.maxval` as a secondary index value.".to_string(),
            ))
        }
        Datum::MinVal => out.push(TAG_MIN),
        Datum::MaxVal => out.push(TAG_MAX),
        Datum::Null => {
            if top {
                return Err(bad_type(d, kind, top));
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
                encode_into(item, out, false, kind)?;
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
            _ => return Err(bad_type(d, kind, top)),
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

/// `b` with each NUL byte followed by 0xFF, then the terminator `00 00`; copied a run
/// of non-NUL bytes at a time (a key is copied for every write).
fn escape_bytes(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(b.len() + 2);
    let mut rest = b;
    while let Some(at) = memchr::memchr(0, rest) {
        let (run, tail) = rest.split_at(at + 1);
        out.extend_from_slice(run);
        out.push(0xFF);
        rest = tail;
    }
    out.extend_from_slice(rest);
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
    fn check_primary_answers_as_encode_primary() {
        let long = Datum::from("x".repeat(200));
        let cases = [
            d(r#""user1""#),
            d(r#""a\u0000b""#),
            long,
            d("12"),
            d("null"),
            d("[1,\"a\"]"),
            d("{}"),
        ];
        for k in cases {
            let want = encode_primary(&k)
                .map(drop)
                .map_err(|e| e.message().to_string());
            let got = check_primary(&k).map_err(|e| e.message().to_string());
            assert_eq!(got, want, "{k:?}");
        }
        assert!(check_primary(&Datum::from("x".repeat(200))).is_err());
        assert!(check_primary(&d(r#""a\u0000b""#)).is_err());
    }

    #[test]
    fn escaping_marks_each_nul_and_terminates() {
        let mut out = vec![7];
        escape_bytes(b"\0ab\0\0c", &mut out);
        assert_eq!(out, [7, 0, 0xFF, b'a', b'b', 0, 0xFF, 0, 0xFF, b'c', 0, 0]);
        let (back, rest) = unescape_bytes(&out[1..]).unwrap();
        assert_eq!((back.as_slice(), rest), (&b"\0ab\0\0c"[..], &[][..]));
        let mut plain = Vec::new();
        escape_bytes(b"", &mut plain);
        assert_eq!(plain, [0, 0]);
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
        let long = Datum::str(&"x".repeat(128));
        assert!(matches!(encode_primary(&long), Err(KeyError::TooLong(_))));
        assert!(encode_primary(&Datum::str(&"x".repeat(127))).is_ok());
    }

    #[test]
    fn fmt_g20_prints_as_c_does() {
        for (n, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (500.0, "500"),
            (-500.0, "-500"),
            (0.1, "0.10000000000000000555"),
            (1.5, "1.5"),
            (1e20, "1e+20"),
            (12345678901234567890.0, "12345678901234567168"),
            (0.0001, "0.00010000000000000000479"),
            (0.00001, "1.0000000000000000818e-05"),
            (-1e300, "-1.0000000000000000525e+300"),
            (5e-324, "4.9406564584124654418e-324"),
        ] {
            assert_eq!(fmt_g20(n), s, "{n}");
        }
    }

    #[test]
    fn key_length_is_measured_as_rethinkdb_prints_the_key() {
        // Each number prints as `N` + 16 hex digits + `#` + "%.20g", each array item
        // takes a NUL more: [1,2,3,4,8,1] is 1 + 6 * 20 = 121 bytes, within the limit.
        let six = d("[1,2,3,4,8,1]");
        assert_eq!(printed_len(&six), 121);
        assert!(encode_primary(&six).is_ok());
        assert!(encode_primary(&d("[1,2,3,4,8,1,2]")).is_err());
        // Times print as `PTIME:` + the number key of their epoch time.
        let t = ptype::make_time(0.0, "+00:00");
        assert_eq!(printed_len(&t), 6 + 19);
        let times = Datum::array(vec![Datum::Number(1.0), Datum::Number(3.0), t.clone(), t]);
        assert!(encode_primary(&times).is_ok());
        // Binary: `PBINARY:` + the bytes, 0x00 and 0x01 escaped to two bytes.
        assert_eq!(printed_len(&ptype::make_binary(&[0, 1, 2])), 8 + 5);
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
            let a = encode_bound(&d(w[0])).unwrap();
            let b = encode_bound(&d(w[1])).unwrap();
            assert!(a < b, "{} < {}", w[0], w[1]);
        }
        // Order holds for bounds; a NUL byte is refused in a stored primary key.
        assert!(encode_primary(&d("\"a\\u0000\"")).is_err());
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

        #[test]
        fn decode_inverts_encode(a in key()) {
            prop_assert_eq!(decode(&encode_bound(&a).unwrap()), Some(a));
        }

        #[test]
        fn entries_order_by_value_then_primary_key(
            a in key(), b in key(), pa in -5i32..5, pb in -5i32..5
        ) {
            let pka = encode_primary(&Datum::Number(f64::from(pa))).unwrap();
            let pkb = encode_primary(&Datum::Number(f64::from(pb))).unwrap();
            let (ka, _) = secondary_entry(&encode_secondary(&a).unwrap(), &pka, None);
            let (kb, _) = secondary_entry(&encode_secondary(&b).unwrap(), &pkb, None);
            let want = a.cmp(&b).then(pa.cmp(&pb));
            prop_assert_eq!(ka.cmp(&kb), want);
        }
    }

    #[test]
    fn secondary_rules_and_entries() {
        assert!(encode_secondary(&Datum::Null).is_err());
        assert!(encode_secondary(&d(r#"{"a":1}"#)).is_err());
        assert!(encode_secondary(&d(r#"[1,null]"#)).is_ok());
        assert!(encode_secondary(&d(r#"[{"a":1}]"#)).is_err());
        let long = Datum::str(&"x".repeat(1000));
        assert!(encode_secondary(&long).is_ok());
        let pk = encode_primary(&Datum::str("k\u{1}")).unwrap();
        let sec = encode_secondary(&long).unwrap();
        let (key, truncated) = secondary_entry(&sec, &pk, Some(7));
        assert!(truncated);
        let (s, p, t) = split_secondary_entry(&key).unwrap();
        assert_eq!(s.len(), SECONDARY_TRUNC_BYTES);
        assert_eq!(p, &pk[..]);
        assert_eq!(t, Some(7));
        // Bounds: a truncated value's entries lie within its loose bounds.
        assert!(secondary_lower(&sec, true) <= key && key < secondary_upper(&sec, true));
        let short = encode_secondary(&Datum::str("ab")).unwrap();
        let (k2, tr) = secondary_entry(&short, &pk, None);
        assert!(!tr);
        assert!(secondary_lower(&short, true) <= k2 && k2 < secondary_upper(&short, true));
        assert!(k2 < secondary_lower(&short, false));
        assert!(k2 >= secondary_upper(&short, false));
        // Nulls inside strings are escaped: ["a","b"] and ["a\0Sb"] differ.
        let x = encode_secondary(&d(r#"["a","b"]"#)).unwrap();
        let y = encode_secondary(&d(r#"["a\u0000Sb"]"#)).unwrap();
        assert_ne!(x, y);
    }
}
