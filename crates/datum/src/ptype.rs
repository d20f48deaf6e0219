//! Typed access to the pseudo-types carried as `$reql_type$` objects.

use base64::Engine as _;

use crate::value::{Datum, Object, Str, REQL_TYPE};

/// The `epoch_time` of a TIME pseudo-type.
pub fn time_epoch(d: &Datum) -> Option<f64> {
    if d.reql_type() != Some("TIME") {
        return None;
    }
    d.get("epoch_time").and_then(Datum::as_f64)
}

/// The `timezone` of a TIME pseudo-type (`"+00:00"` form).
pub fn time_zone(d: &Datum) -> Option<&str> {
    if d.reql_type() != Some("TIME") {
        return None;
    }
    d.get("timezone").and_then(Datum::as_str)
}

/// Builds a TIME pseudo-type.
pub fn make_time(epoch: f64, timezone: &str) -> Datum {
    let mut m = Object::new();
    m.insert(Str::from(REQL_TYPE), Datum::str("TIME"));
    m.insert(Str::from("epoch_time"), Datum::Number(epoch));
    m.insert(Str::from("timezone"), Datum::str(timezone));
    Datum::object(m)
}

/// The bytes of a BINARY pseudo-type.
pub fn binary_bytes(d: &Datum) -> Option<Vec<u8>> {
    if d.reql_type() != Some("BINARY") {
        return None;
    }
    let data = d.get("data").and_then(Datum::as_str)?;
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

/// Builds a BINARY pseudo-type.
pub fn make_binary(bytes: &[u8]) -> Datum {
    let mut m = Object::new();
    m.insert(Str::from(REQL_TYPE), Datum::str("BINARY"));
    m.insert(
        Str::from("data"),
        Datum::str(&base64::engine::general_purpose::STANDARD.encode(bytes)),
    );
    Datum::object(m)
}
