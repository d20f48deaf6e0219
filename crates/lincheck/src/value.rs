//! Register values: small JSON values compared by a canonical text, and the per-key
//! interner that turns them into dense ids for the search.
//!
//! Invariants: two values are equal exactly when their canonical texts are equal
//! (object members sorted by name; a number with an integral value in the exact range of
//! an `f64` is written as an integer, so `1` and `1.0` are the same value, as in ReQL);
//! id 0 is always `null`, the value of a key that was never written.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

/// Largest integer an `f64` holds exactly (2^53).
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// The canonical text of `v` (see the module note).
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&v.to_string()),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() <= EXACT_INT => {
                // Integral and exact: print without a fraction so 1 == 1.0.
                let _ = write!(out, "{}", f as i64);
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut members: Vec<(&String, &Value)> = o.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(x, out);
            }
            out.push('}');
        }
    }
}

/// Dense ids for the values seen on one key; id 0 is `null`.
#[derive(Debug, Clone)]
pub struct Interner {
    ids: HashMap<String, u32>,
    values: Vec<Value>,
}

impl Default for Interner {
    fn default() -> Self {
        let mut ids = HashMap::new();
        ids.insert(canonical(&Value::Null), 0);
        Self {
            ids,
            values: vec![Value::Null],
        }
    }
}

impl Interner {
    /// The id of `v`, assigning the next one if it is new.
    pub fn intern(&mut self, v: &Value) -> u32 {
        let text = canonical(v);
        if let Some(&id) = self.ids.get(&text) {
            return id;
        }
        let id = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        self.ids.insert(text, id);
        self.values.push(v.clone());
        id
    }

    /// The value with id `id` (`null` for an unknown id).
    pub fn value(&self, id: u32) -> &Value {
        self.values.get(id as usize).unwrap_or(&Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_members_and_unifies_integral_numbers() {
        assert_eq!(
            canonical(&json!({"b": 1.0, "a": [2, "x"]})),
            r#"{"a":[2,"x"],"b":1}"#
        );
        assert_eq!(canonical(&json!(1.5)), "1.5");
        assert_ne!(canonical(&json!("1")), canonical(&json!(1)));
    }

    #[test]
    fn interner_gives_null_id_zero() {
        let mut i = Interner::default();
        assert_eq!(i.intern(&Value::Null), 0);
        let a = i.intern(&json!(7));
        assert_eq!(i.intern(&json!(7.0)), a);
        assert_ne!(i.intern(&json!(8)), a);
        assert_eq!(i.value(a), &json!(7));
    }
}
