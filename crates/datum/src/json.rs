//! JSON in and out: a direct serde deserializer into `Datum` (no intermediate
//! `serde_json::Value`) and a hand-written writer that prints numbers the way RethinkDB
//! does (integral values without a fraction) and objects in key order.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

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
pub fn from_json_slice(bytes: &[u8]) -> Result<Datum, JsonError> {
    serde_json::from_slice::<Datum>(bytes).map_err(|e| JsonError(e.to_string()))
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
        let mut out = Vec::with_capacity(64);
        write_json(self, &mut out, false);
        out
    }
}

pub(crate) fn write_json(d: &Datum, out: &mut Vec<u8>, _pretty: bool) {
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

fn write_number(n: f64, out: &mut Vec<u8>) {
    if let Some(i) = as_exact_int(n) {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if n.is_finite() {
        // serde_json prints the shortest representation that round-trips.
        let _ = serde_json::to_writer(&mut *out, &n);
    } else {
        out.extend_from_slice(b"null");
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// RethinkDB's pretty layout for values quoted in error messages.
pub(crate) fn write_pretty(d: &Datum, out: &mut String, depth: usize) {
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
        Ok(Datum::Array(Arc::new(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Datum, A::Error> {
        let mut m: BTreeMap<Str, Datum> = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<std::borrow::Cow<'de, str>, Datum>()? {
            m.insert(Str::from(&*k), v);
        }
        Ok(Datum::Object(Arc::new(m)))
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
}
