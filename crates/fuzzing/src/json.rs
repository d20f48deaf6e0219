//! Target `json`: the datum JSON decoders against serde_json as the oracle.
//!
//! For valid UTF-8 input nested at most 100 levels (serde_json's own recursion limit is
//! 128; Ponder's is `datum::MAX_NESTING`):
//! - `from_json_slice` and `from_json_owned` accept exactly what `serde_json` accepts,
//!   and decode the same value (numbers compared as doubles, so `-0` equals `0`);
//! - deeper than `MAX_NESTING` is refused.
//!
//! For every input:
//! - the two entry points agree with each other, and the hand-written decoder alone
//!   (`parse_fast`), when it answers, agrees with them;
//! - `validate_canonical` accepts only objects the decoder decodes and calls canonical,
//!   and that print back byte for byte; an object kept undecoded answers `field`/`has`
//!   as the decoded map does;
//! - stored text (`from_stored` of what `to_json_bytes` printed — stored text is
//!   trusted, so only text Ponder printed is fed to it) reads back, lazily field by
//!   field and fully, as the value it was printed from; printing then parsing is the
//!   identity.

use bytes::Bytes;
use datum::{
    from_json_owned, from_json_slice, from_json_value, from_stored, parse_fast, validate_canonical,
    Datum, MAX_NESTING,
};

/// Runs one input.
pub fn check(data: &[u8]) {
    let ours = from_json_slice(data);
    let owned = from_json_owned(data.to_vec());
    assert_eq!(ours.is_ok(), owned.is_ok(), "slice and owned disagree");
    if let (Ok(a), Ok(b)) = (&ours, &owned) {
        assert_same(a, b, "slice vs owned");
    }
    if let Some((fast, canonical)) = parse_fast(data) {
        let Ok(a) = &ours else {
            panic!("the fast decoder accepts what from_json_slice refuses")
        };
        assert_same(a, &fast, "fast decoder");
        if canonical {
            assert_eq!(
                a.to_json_bytes(),
                data,
                "canonical text does not print back"
            );
        }
    }
    if validate_canonical(data) {
        let Some((Datum::Object(_), true)) = parse_fast(data) else {
            panic!("validate_canonical accepts text parse does not call a canonical object")
        };
    }

    let depth = crate::query::nesting(data);
    if std::str::from_utf8(data).is_ok() && depth <= 100 {
        let oracle = serde_json::from_slice::<serde_json::Value>(data);
        match (&oracle, &ours) {
            (Ok(v), Ok(d)) => match from_json_value(v) {
                Ok(expect) => assert_same(d, &expect, "against serde_json"),
                Err(e) => panic!("serde_json's value does not convert: {e}"),
            },
            (Err(_), Err(_)) => {}
            (o, d) => panic!("accept/reject differs: serde_json {o:?}, datum {d:?}"),
        }
    }
    if depth > MAX_NESTING {
        assert!(ours.is_err(), "accepted nesting {depth}");
    }

    if let Ok(d) = owned {
        lazy_agrees(&d, &ours.unwrap_or(Datum::Null));
        stored(&d);
    }
}

/// An object decoded by `from_json_owned` (possibly kept as text) answers member
/// lookups as the fully decoded `full` does.
fn lazy_agrees(d: &Datum, full: &Datum) {
    let (Datum::Object(o), Datum::Object(f)) = (d, full) else {
        return;
    };
    for (k, v) in f.iter() {
        assert!(o.has(k), "has({k:?}) is false");
        match o.field(k) {
            Some(x) => assert_same(&x, v, "lazy field"),
            None => panic!("field({k:?}) missing"),
        }
        let absent = format!("{k}\u{0}");
        assert_eq!(o.field(&absent).is_some(), f.get(absent.as_str()).is_some());
    }
    for k in ["", "a", "zzz", "\u{7f}"] {
        assert_eq!(o.has(k), f.get(k).is_some(), "has({k:?})");
    }
}

/// Text Ponder printed reads back as what it was printed from.
fn stored(d: &Datum) {
    let text = d.to_json_bytes();
    match from_json_slice(&text) {
        Ok(back) => assert_same(&back, d, "print then parse"),
        Err(e) => panic!("printed text does not parse: {e}"),
    }
    let Datum::Object(full) = d else {
        return;
    };
    let Ok(Datum::Object(lazy)) = from_stored(Bytes::from(text)) else {
        panic!("stored object does not read back as an object")
    };
    for (k, v) in full.iter() {
        match lazy.field(k) {
            Some(x) => assert_same(&x, v, "stored field"),
            None => panic!("stored field({k:?}) missing"),
        }
    }
    assert_same(
        &Datum::Object(lazy),
        &Datum::Object(full.clone()),
        "stored full decode",
    );
}

/// Structural equality with numbers compared as doubles (`-0 == 0`), pseudo-types
/// compared field by field (ReQL's order compares a TIME by its instant alone).
fn assert_same(a: &Datum, b: &Datum, what: &str) {
    assert!(same(a, b), "{what}: {a:?} != {b:?}");
}

fn same(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Null, Datum::Null) => true,
        (Datum::Bool(x), Datum::Bool(y)) => x == y,
        (Datum::Number(x), Datum::Number(y)) => x == y,
        (Datum::String(x), Datum::String(y)) => x.as_bytes() == y.as_bytes(),
        (Datum::Array(x), Datum::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Datum::Object(x), Datum::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka.as_bytes() == kb.as_bytes() && same(va, vb))
        }
        _ => false,
    }
}
