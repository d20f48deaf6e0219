//! JSON in and out: a direct serde deserializer into `Datum` (no intermediate
//! `serde_json::Value`) and a hand-written writer that prints numbers the way RethinkDB
//! does (integral values without a fraction) and objects in key order.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::value::{Datum, Object, Str};

/// A document that is not valid JSON for ReQL.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonError(pub String);

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JsonError {}

/// Parses JSON text into a Datum.
///
/// The hand-written decoder (`fast.rs`) takes every input it is sure about; the rest
/// (invalid JSON above all) goes through serde, whose error messages we keep.
pub fn from_json_slice(bytes: &[u8]) -> Result<Datum, JsonError> {
    if let Some((d, _)) = crate::fast::parse(bytes) {
        return Ok(d);
    }
    from_json_slice_serde(bytes)
}

/// Parses JSON text that the caller hands over. When the text is an object in
/// canonical form (what `to_json_bytes` prints — stored documents are), the object
/// keeps it (`Object::raw_json`), so writing the document out again unchanged is a
/// copy, and is not decoded until its map is first accessed: the validation pass
/// allocates nothing, so a document that is only passed through costs a scan and
/// two small allocations. The bytes are not copied.
pub fn from_json_owned(bytes: Vec<u8>) -> Result<Datum, JsonError> {
    if crate::fast::validate_canonical(&bytes) {
        return Ok(Datum::Object(Arc::new(Object::lazy(Bytes::from(bytes)))));
    }
    // Not provably canonical (or not an object): decoded now, as `from_json_slice`
    // does; a canonical object the validator was too strict for still keeps its text.
    match crate::fast::parse(&bytes) {
        Some((Datum::Object(mut o), true)) => {
            if let Some(obj) = Arc::get_mut(&mut o) {
                obj.set_raw(Bytes::from(bytes));
            }
            Ok(Datum::Object(o))
        }
        Some((d, _)) => Ok(d),
        None => from_json_slice_serde(&bytes),
    }
}

/// A document as Ponder stored it. Stored text was printed by `to_json_bytes` (canonical
/// compact JSON) and is checksummed by the storage engine, so it is trusted: an object
/// is kept undecoded and unvalidated, and costs nothing until a member is read (a scan
/// that reads one field of each document touches only the text up to that field). The
/// bytes are shared, not copied. Anything that does not start as an object is decoded
/// now. (Only the first byte is looked at: reading the last would touch the end of every
/// document, a cache miss a scan otherwise never pays.)
pub fn from_stored(bytes: Bytes) -> Result<Datum, JsonError> {
    if bytes.first() == Some(&b'{') {
        return Ok(Datum::Object(Arc::new(Object::lazy(bytes))));
    }
    from_json_owned(bytes.into())
}

/// Parses JSON text with serde only (the reference the fast decoder is tested against).
/// Nesting is bounded by `MAX_NESTING`, checked by a byte scan first (serde's own limit
/// of 128 is lifted, so both decoders accept the same depths).
#[doc(hidden)]
pub fn from_json_slice_serde(bytes: &[u8]) -> Result<Datum, JsonError> {
    if crate::nesting::text_nesting_exceeds(bytes, crate::MAX_NESTING) {
        return Err(JsonError(format!(
            "nesting deeper than {} levels",
            crate::MAX_NESTING
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let d = Datum::deserialize(&mut de).map_err(|e| JsonError(e.to_string()))?;
    de.end().map_err(|e| JsonError(e.to_string()))?;
    Ok(d)
}

/// Converts an already-parsed JSON value into a Datum.
pub fn from_json_value(v: &serde_json::Value) -> Result<Datum, JsonError> {
    Ok(match v {
        serde_json::Value::Null => Datum::Null,
        serde_json::Value::Bool(b) => Datum::Bool(*b),
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => Datum::Number(f),
            _ => return Err(JsonError(format!("Non-finite number: {n}"))),
        },
        serde_json::Value::String(s) => Datum::str(s),
        serde_json::Value::Array(a) => {
            Datum::array(a.iter().map(from_json_value).collect::<Result<_, _>>()?)
        }
        serde_json::Value::Object(o) => {
            let mut m = Object::new();
            for (k, v) in o {
                m.insert(Str::from(k.as_str()), from_json_value(v)?);
            }
            Datum::object(m)
        }
    })
}

/// Converts a Datum into a `serde_json::Value` (MinVal/MaxVal become null).
pub fn to_json_value(d: &Datum) -> serde_json::Value {
    match d {
        Datum::MinVal | Datum::MaxVal | Datum::Null => serde_json::Value::Null,
        Datum::Bool(b) => serde_json::Value::Bool(*b),
        Datum::Number(n) => number_value(*n),
        Datum::String(s) => serde_json::Value::String(s.to_string()),
        Datum::Array(a) => serde_json::Value::Array(a.iter().map(to_json_value).collect()),
        Datum::Object(o) => serde_json::Value::Object(
            o.iter()
                .map(|(k, v)| (k.to_string(), to_json_value(v)))
                .collect(),
        ),
    }
}

fn number_value(n: f64) -> serde_json::Value {
    if let Some(i) = as_exact_int(n) {
        serde_json::Value::from(i)
    } else {
        serde_json::Number::from_f64(n)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null)
    }
}

/// The integer a double holds exactly, when it is integral and within ±2^53.
pub(crate) fn as_exact_int(n: f64) -> Option<i64> {
    const LIMIT: f64 = 9_223_372_036_854_775_807.0;
    if n.fract() == 0.0 && n.abs() < LIMIT {
        if n == 0.0 && n.is_sign_negative() {
            return None;
        }
        Some(n as i64)
    } else {
        None
    }
}

impl Datum {
    /// Appends compact JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_json(self, out, false);
    }

    /// Compact JSON bytes.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        if let Some(raw) = self.as_object().and_then(Object::raw_json) {
            return raw.to_vec();
        }
        let mut out = Vec::with_capacity(64);
        write_json(self, &mut out, false);
        out
    }

    /// Compact JSON bytes, which an object also keeps (`Object::raw_json`, when no one
    /// else shares it) so that writing it out again is a copy. For documents about to
    /// be stored and cached.
    pub fn to_json_bytes_kept(&mut self) -> Vec<u8> {
        let out = self.to_json_bytes();
        if let Datum::Object(o) = self {
            if let Some(obj) = Arc::get_mut(o) {
                if obj.raw_json().is_none() {
                    obj.set_raw(Bytes::copy_from_slice(&out));
                }
            }
        }
        out
    }
}

pub(crate) fn write_json(d: &Datum, out: &mut Vec<u8>, _pretty: bool) {
    crate::work::tick();
    match d {
        Datum::MinVal | Datum::MaxVal | Datum::Null => out.extend_from_slice(b"null"),
        Datum::Bool(true) => out.extend_from_slice(b"true"),
        Datum::Bool(false) => out.extend_from_slice(b"false"),
        Datum::Number(n) => write_number(*n, out),
        Datum::String(s) => write_string(s, out),
        Datum::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(v, out, false);
            }
            out.push(b']');
        }
        Datum::Object(o) => {
            if let Some(raw) = o.raw_json() {
                out.extend_from_slice(raw);
                return;
            }
            out.push(b'{');
            for (i, (k, v)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write_json(v, out, false);
            }
            out.push(b'}');
        }
    }
}

pub(crate) fn write_number(n: f64, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = write_number_to(n, out);
}

/// Whether `write_number` prints `n` as exactly `text`, without allocating (the
/// decoders' canonical-form check).
pub(crate) fn prints_as(n: f64, text: &[u8]) -> bool {
    // Longer than any number we print (at most 24 bytes).
    let mut buf = [0u8; 40];
    let mut rest: &mut [u8] = &mut buf;
    if write_number_to(n, &mut rest).is_err() {
        return false;
    }
    let len = 40 - rest.len();
    buf.get(..len) == Some(text)
}

fn write_number_to<W: std::io::Write>(n: f64, out: &mut W) -> std::io::Result<()> {
    if let Some(i) = as_exact_int(n) {
        out.write_all(itoa::Buffer::new().format(i).as_bytes())
    } else if n.is_finite() {
        // serde_json prints the shortest representation that round-trips.
        serde_json::to_writer(out, &n).map_err(std::io::Error::other)
    } else {
        out.write_all(b"null")
    }
}

/// Writes a JSON string exactly as serde_json does: quote and backslash escaped, the
/// control characters as their short escapes (`b t n f r`) or `u00xx` with lower-case
/// hex, nothing else. Runs of bytes that need no escape are found eight at a time
/// (`next_escape`) and copied whole: documents are mostly such runs.
pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(i) = next_escape(bytes, start) {
        let c = bytes[i];
        let short: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            _ => b"",
        };
        out.extend_from_slice(&bytes[start..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The position of the first byte at or after `from` that JSON must escape (a quote, a
/// backslash or a control character below 0x20).
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // A byte's high bit is set where it is below 0x20, a quote or a backslash. The
        // "has a zero byte" trick can flag a byte after a true hit (a borrow), never
        // before one, so the lowest flag is exact.
        let quote = w ^ (LO * u64::from(b'"'));
        let slash = w ^ (LO * u64::from(b'\\'));
        let hits =
            (w.wrapping_sub(LO * 0x20) | quote.wrapping_sub(LO) | slash.wrapping_sub(LO)) & !w & HI;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes
        .get(i..)?
        .iter()
        .position(|&c| c < 0x20 || c == b'"' || c == b'\\')
        .map(|p| i + p)
}

/// RethinkDB's pretty layout for values quoted in error messages.
pub(crate) fn write_pretty(d: &Datum, out: &mut String, depth: usize) {
    crate::work::tick();
    match d {
        Datum::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_pretty(v, out, depth);
            }
            out.push(']');
        }
        Datum::Object(o) if !o.is_empty() => {
            out.push_str("{\n");
            for (i, (k, v)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                for _ in 0..=depth {
                    out.push('\t');
                }
                out.push_str(&serde_json::to_string(&**k).unwrap_or_default());
                out.push_str(":\t");
                write_pretty(v, out, depth + 1);
            }
            out.push('\n');
            for _ in 0..depth {
                out.push('\t');
            }
            out.push('}');
        }
        Datum::MinVal => out.push_str("r.minval"),
        Datum::MaxVal => out.push_str("r.maxval"),
        other => out.push_str(&other.to_json_string()),
    }
}

impl<'de> Deserialize<'de> for Datum {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DatumVisitor)
    }
}

struct DatumVisitor;

impl<'de> Visitor<'de> for DatumVisitor {
    type Value = Datum;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Datum, E> {
        Ok(Datum::Null)
    }
    fn visit_none<E>(self) -> Result<Datum, E> {
        Ok(Datum::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Datum, E> {
        Ok(Datum::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Datum, E> {
        Ok(Datum::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Datum, E> {
        Ok(Datum::Number(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Datum, E> {
        if v.is_finite() {
            Ok(Datum::Number(v))
        } else {
            Err(E::custom("non-finite number"))
        }
    }
    fn visit_str<E>(self, v: &str) -> Result<Datum, E> {
        Ok(Datum::str(v))
    }
    fn visit_string<E>(self, v: String) -> Result<Datum, E> {
        Ok(Datum::from(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Datum, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element::<Datum>()? {
            v.push(x);
        }
        Ok(Datum::array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Datum, A::Error> {
        let mut m: BTreeMap<Str, Datum> = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<std::borrow::Cow<'de, str>, Datum>()? {
            m.insert(Str::from(&*k), v);
        }
        Ok(Datum::Object(Arc::new(Object::from(m))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_integers() {
        let d = from_json_slice(br#"{"b":[1,2.5,"x",null,true],"a":{"c":-0.5}}"#).unwrap();
        assert_eq!(
            String::from_utf8(d.to_json_bytes()).unwrap(),
            r#"{"a":{"c":-0.5},"b":[1,2.5,"x",null,true]}"#
        );
        assert_eq!(Datum::Number(1e20).to_json_string(), "1e+20");
        assert_eq!(Datum::Number(3.0).to_json_string(), "3");
    }

    #[test]
    fn pretty_matches_rethinkdb() {
        let d = from_json_slice(br#"{"id":1,"a":{"b":[1,2]}}"#).unwrap();
        assert_eq!(
            d.to_pretty_string(),
            "{\n\t\"a\":\t{\n\t\t\"b\":\t[1, 2]\n\t},\n\t\"id\":\t1\n}"
        );
        assert_eq!(Datum::object(Object::new()).to_pretty_string(), "{}");
    }

    #[test]
    fn rejects_bad_json() {
        assert!(from_json_slice(b"{\"a\":").is_err());
    }

    /// The fast decoder agrees with serde on everything serde accepts, and serde's
    /// errors come through for the rest.
    #[test]
    fn fast_decoder_matches_serde() {
        let cases: &[&str] = &[
            r#"{"b":1,"a":2,"a":3}"#,
            r#" [ 1 , -0 , -0.0 , 0.1 , 1e3 , 1E-3 , 12345678901234567890 , -9007199254740993 ] "#,
            r#""\u00e9\ud83d\ude00\n\"\\\/\b\f\r\t""#,
            r#"{"":{"x":[[],{}]},"é":null,"z":true,"y":false}"#,
            "1e400",
            "01",
            "1.",
            ".5",
            "-",
            "+1",
            "[1,]",
            "{\"a\":1,}",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\u{1}\"",
            "\"a\u{7f}\"",
            "nul",
            "[1] x",
            "",
            "123456789012345678",
            "-123456789012345678",
            "1234567890123456789",
        ];
        for c in cases {
            let fast = from_json_slice(c.as_bytes());
            let slow = from_json_slice_serde(c.as_bytes());
            match (&fast, &slow) {
                (Ok(a), Ok(b)) => assert_eq!(
                    (a.to_json_bytes(), format!("{a:?}")),
                    (b.to_json_bytes(), format!("{b:?}")),
                    "{c}"
                ),
                _ => assert_eq!(fast, slow, "{c}"),
            }
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            from_json_slice(deep.as_bytes()),
            from_json_slice_serde(deep.as_bytes())
        );
    }

    /// Our string writer is byte-for-byte serde_json's.
    #[test]
    fn string_writer_matches_serde() {
        let all: String = (0u32..0x100).filter_map(char::from_u32).collect();
        for s in [all.as_str(), "", "plain", "a\"b\\c\u{1f}\u{7f}é😀"] {
            let mut ours = Vec::new();
            write_string(s, &mut ours);
            assert_eq!(ours, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    /// Every byte that needs an escape is found at every position of the eight-byte
    /// scan, next to bytes that look like it (0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f,
    /// multi-byte characters whose bytes differ from `"` or `\\` only in the high bit).
    #[test]
    fn string_writer_finds_escapes_at_every_position() {
        let fillers = [
            "a", " ", "!", "#", "[", "]", "\u{7f}", "é", "\u{a2}", "\u{dc}", "😀",
        ];
        let specials = ["\"", "\\", "\u{0}", "\u{1f}", "\n", "\u{8}"];
        for filler in fillers {
            for special in specials {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut s = filler.repeat(len);
                        let at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
                        s.insert_str(at, special);
                        let mut ours = Vec::new();
                        write_string(&s, &mut ours);
                        assert_eq!(ours, serde_json::to_vec(&s).unwrap(), "{s:?}");
                    }
                }
            }
        }
    }

    /// Canonical text is kept and written back as is; anything else is re-encoded.
    #[test]
    fn owned_objects_keep_only_canonical_text() {
        let canonical = [
            r#"{"a":1,"b":[1.5,-2,"x\"\\\n\u001f"],"c":{"d":null},"e":-0.0,"f":1e+20}"#,
            "{\"a\":\"\u{7f}\"}",
            r#"{}"#,
            r#"{"id":"user1","s":"é😀"}"#,
        ];
        for c in canonical {
            let d = from_json_owned(c.as_bytes().to_vec()).unwrap();
            let o = d.as_object().unwrap();
            assert_eq!(o.raw_json(), Some(c.as_bytes()), "{c}");
            // Kept undecoded until the map is first looked at.
            assert!(crate::fast::validate_canonical(c.as_bytes()), "{c}");
            assert_eq!(
                from_json_slice(c.as_bytes()).unwrap().to_json_bytes(),
                c.as_bytes()
            );
        }
        let other = [
            r#"{"a": 1}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\u0008"}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e3}"#,
            r#"{"a":-0}"#,
            r#"{"a":12345678901234567}"#,
            r#"{"a":12345678901234567890}"#,
            " {}",
        ];
        for c in other {
            let d = from_json_owned(c.as_bytes().to_vec()).unwrap();
            assert_eq!(d.as_object().unwrap().raw_json(), None, "{c}");
            assert!(!crate::fast::validate_canonical(c.as_bytes()), "{c}");
            assert_eq!(
                d.to_json_bytes(),
                from_json_slice_serde(c.as_bytes()).unwrap().to_json_bytes()
            );
        }
        let mut kept = Datum::from_pairs([("b", Datum::Number(2.5)), ("a", Datum::Null)]);
        let bytes = kept.to_json_bytes_kept();
        assert_eq!(kept.as_object().unwrap().raw_json(), Some(bytes.as_slice()));
        assert_eq!(bytes, br#"{"a":null,"b":2.5}"#);
        // Mutation drops the text.
        let mut d = from_json_owned(br#"{"a":1}"#.to_vec()).unwrap();
        if let Datum::Object(o) = &mut d {
            Arc::make_mut(o).insert(Str::from("b"), Datum::Null);
        }
        assert_eq!(d.to_json_bytes(), br#"{"a":1,"b":null}"#);
        assert!(from_json_owned(b"[1]".to_vec())
            .unwrap()
            .as_array()
            .is_some());
        assert!(from_json_owned(b"{".to_vec()).is_err());
    }

    #[test]
    fn stored_documents_are_lazy_and_unvalidated() {
        // Canonical text: a member is read without building the map.
        let text = br#"{"a":"x.y","b":[1,{"c":null}],"id":7}"#;
        let d = from_stored(Bytes::from_static(text)).unwrap();
        let o = d.as_object().unwrap();
        assert_eq!(o.field("a"), Some(Datum::str("x.y")));
        assert_eq!(o.raw_json(), Some(&text[..]));
        assert_eq!(d, from_json_slice(text).unwrap());
        // Text an older writer printed otherwise still decodes (the map from serde).
        let d = from_stored(Bytes::from_static(br#"{"b":1.0, "a":2}"#)).unwrap();
        assert_eq!(d.as_object().unwrap().get("b"), Some(&Datum::Number(1.0)));
        assert_eq!(d.as_object().unwrap().len(), 2);
        // Not an object: decoded at once, errors reported.
        assert!(from_stored(Bytes::from_static(b"[1]"))
            .unwrap()
            .as_array()
            .is_some());
        assert!(from_stored(Bytes::from_static(b"")).is_err());
    }

    #[test]
    #[should_panic(expected = "the data is corrupt")]
    fn corrupt_stored_text_fails_when_read() {
        let d = from_stored(Bytes::from_static(b"{\"a\":1,")).unwrap();
        let _ = d.as_object().unwrap().len();
    }

    proptest::proptest! {
        #[test]
        fn fast_decoder_round_trips(s in "\\PC*", n in proptest::num::f64::NORMAL, i in -1_000_000_000_000i64..1_000_000_000_000) {
            let doc = Datum::from_pairs([
                ("s", Datum::str(&s)),
                ("n", Datum::Number(n)),
                ("i", Datum::Number(i as f64)),
                ("a", Datum::array(vec![Datum::str(&s), Datum::Null])),
            ]);
            let bytes = doc.to_json_bytes();
            let fast = from_json_slice(&bytes).unwrap();
            let slow = from_json_slice_serde(&bytes).unwrap();
            proptest::prop_assert_eq!(fast.to_json_bytes(), slow.to_json_bytes());
            proptest::prop_assert_eq!(fast.to_json_bytes(), bytes.clone());
            proptest::prop_assert!(crate::fast::validate_canonical(&bytes));
            let owned = from_json_owned(bytes.clone()).unwrap();
            proptest::prop_assert_eq!(owned.as_object().unwrap().raw_json(), Some(bytes.as_slice()));
            let mut w = Vec::new();
            write_string(&s, &mut w);
            proptest::prop_assert_eq!(w, serde_json::to_vec(&s).unwrap());
        }
    }
}
