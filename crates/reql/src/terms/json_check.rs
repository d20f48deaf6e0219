//! RethinkDB refuses JSON text whose objects repeat a key (`r.json('{"a":1,"a":2}')`:
//! "Duplicate key "a" in JSON."); serde_json keeps the last value, so `r.json` asks
//! this walker first.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The first key repeated within one object of `text`, if any (None also when the text
/// is not JSON: the parser reports that).
pub fn duplicate_key(text: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(text);
    Walk.deserialize(&mut de).ok().flatten()
}

/// Walks one value; yields the first duplicate key found in it.
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Walk)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(dup) = seq.next_element_seed(Walk)? {
            if found.is_none() {
                found = dup;
            }
        }
        Ok(found)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut found = None;
        while let Some(k) = map.next_key::<String>()? {
            let inner = map.next_value_seed(Walk)?;
            if found.is_none() {
                found = if seen.contains(&k) {
                    Some(k.clone())
                } else {
                    inner
                };
            }
            seen.insert(k);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::duplicate_key;

    #[test]
    fn finds_repeated_keys_at_any_depth() {
        assert_eq!(duplicate_key(br#"{"a":1,"a":2}"#), Some("a".into()));
        assert_eq!(
            duplicate_key(br#"[1,{"b":{"c":1,"c":1}}]"#),
            Some("c".into())
        );
        assert_eq!(duplicate_key(br#"{"a":{"a":1}}"#), None);
        assert_eq!(duplicate_key(b"[1,2"), None);
    }
}
