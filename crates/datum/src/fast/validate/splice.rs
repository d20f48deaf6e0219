//! Top-level members put into canonical object text without decoding it
//! ([`with_members`]): an update that sets a few fields of a stored document to plain
//! values (YCSB's `update({field: value})`) then costs a scan and a copy of the text
//! instead of decoding the document, copying its map and printing it again.
//!
//! Invariant: the result is exactly the text `write_json` prints for the old map with
//! those members inserted (members in key order, the old ones copied byte for byte);
//! the caller validates it again before keeping it undecoded (`Object::with_members`).

use std::cmp::Ordering;

use super::{skip_string, Key, Unescape, Validator};
use crate::fast::MAX_DEPTH;

/// How an old member's key orders against a new member's key (`str` order on the
/// decoded keys, as the canonical text's members are ordered).
fn order(old: Key<'_>, new: &str) -> Ordering {
    match old.escaped {
        false => old.text.cmp(new.as_bytes()),
        true => Unescape(old.text.iter()).cmp(new.bytes()),
    }
}

/// The canonical text of object text `old` (canonical: validated or stored) with the
/// members `new` put in: `(key, its canonical JSON string, the value's canonical text)`,
/// keys strictly ascending. A member of `old` with the same key is replaced, the others
/// are added in key order. `None` when `old` is not such text or has a `$reql_type$`
/// member (a pseudo-type does not take members one by one).
pub(crate) fn with_members(old: &[u8], new: &[(&str, Vec<u8>, Vec<u8>)]) -> Option<Vec<u8>> {
    let extra: usize = new.iter().map(|(_, k, v)| k.len() + v.len() + 2).sum();
    let mut out = Vec::with_capacity(old.len() + extra);
    out.push(b'{');
    let put = |out: &mut Vec<u8>, member: &[u8]| {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(member);
    };
    let put_new = |out: &mut Vec<u8>, key: &[u8], value: &[u8]| {
        put(out, key);
        out.push(b':');
        out.extend_from_slice(value);
    };
    let mut next = new.iter().peekable();
    let mut v = Validator::at(old, 0, MAX_DEPTH, false);
    v.expect(b'{')?;
    v.depth = 1;
    if v.peek()? == b'}' {
        v.i += 1;
    } else {
        loop {
            let start = v.i;
            v.expect(b'"')?;
            let k = v.string()?;
            // A canonical escape stands for a control byte: an escaped key is never it.
            if k.text == b"$reql_type$" {
                return None;
            }
            v.expect(b':')?;
            let mut replaced = false;
            while let Some((key, text, value)) = next.peek() {
                match order(k, key) {
                    Ordering::Less => break,
                    ordering => {
                        put_new(&mut out, text, value);
                        next.next();
                        if ordering == Ordering::Equal {
                            replaced = true;
                            break;
                        }
                    }
                }
            }
            if v.peek()? == b'"' {
                v.i = skip_string(old, v.i + 1)?;
            } else {
                v.value()?;
            }
            if !replaced {
                put(&mut out, old.get(start..v.i)?);
            }
            match v.peek()? {
                b',' => v.i += 1,
                b'}' => {
                    v.i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if v.i != old.len() {
        return None;
    }
    for (_, text, value) in next {
        put_new(&mut out, text, value);
    }
    out.push(b'}');
    Some(out)
}
