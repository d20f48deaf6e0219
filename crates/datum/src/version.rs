//! `Version`: what a conditional write expects to find under a key.
//!
//! A write is evaluated against the document it read and applied only if the key still
//! holds that version (`store::Shard::apply`). The version is a 64-bit XXH3 hash of the
//! document's compact JSON, or `ABSENT` for a missing document: it is a pure function of
//! the stored bytes, so every replica applying the same log computes the same one, and
//! nothing extra is stored. Two writes that leave identical bytes share a version (an
//! ABA change is not a conflict): a write evaluated against equal content has the same
//! outcome, so treating it as current is still serialisable.

use crate::Datum;

/// The version of a stored document (see the module note).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version(pub u64);

impl Version {
    /// The version of a key that holds no document.
    pub const ABSENT: Version = Version(0);

    /// The version of a document as it is (or would be) stored.
    pub fn of(doc: Option<&Datum>) -> Version {
        match doc {
            None => Version::ABSENT,
            Some(d) => match d.as_object().and_then(crate::Object::raw_json) {
                Some(raw) => Version::of_bytes(raw),
                None => Version::of_bytes(&d.to_json_bytes()),
            },
        }
    }

    /// The version of stored document bytes (never `ABSENT`).
    pub fn of_bytes(bytes: &[u8]) -> Version {
        Version(xxhash_rust::xxh3::xxh3_64(bytes).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_stored_bytes() {
        let a = crate::from_json_slice(br#"{"id":1,"v":2}"#).unwrap();
        let b = Datum::from_pairs([("id", Datum::Number(1.0)), ("v", Datum::Number(2.0))]);
        let c = Datum::from_pairs([("id", Datum::Number(1.0)), ("v", Datum::Number(3.0))]);
        assert_eq!(Version::of(Some(&a)), Version::of(Some(&b)));
        assert_ne!(Version::of(Some(&a)), Version::of(Some(&c)));
        assert_ne!(Version::of(Some(&a)), Version::ABSENT);
        assert_eq!(Version::of(None), Version::ABSENT);
    }
}
