//! Permission sets and RethinkDB's rules for reading and merging them.
//!
//! A permission is a tri-state: granted (`Some(true)`), denied (`Some(false)`) or not
//! set (`None`), so a narrower scope can override a wider one and unset falls through.
//! `connect` exists only at the global scope. Invariant: a `Perms` equal to
//! `Perms::default()` is never stored (RethinkDB treats it as a deletion).

use datum::{Datum, Object, Str};

/// The four permissions RethinkDB knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Perm {
    /// Reading documents.
    Read,
    /// Writing documents (requires `Read` too).
    Write,
    /// Creating, dropping and reconfiguring tables and indexes.
    Config,
    /// `r.http` (global scope only).
    Connect,
}

impl Perm {
    /// The permission's name in documents and errors.
    pub fn name(self) -> &'static str {
        match self {
            Perm::Read => "read",
            Perm::Write => "write",
            Perm::Config => "config",
            Perm::Connect => "connect",
        }
    }
}

/// One scope's permissions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Perms {
    /// `read`.
    pub read: Option<bool>,
    /// `write`.
    pub write: Option<bool>,
    /// `config`.
    pub config: Option<bool>,
    /// `connect` (global scope only).
    pub connect: Option<bool>,
}

impl Perms {
    /// Every permission granted (the admin user).
    pub const ALL: Perms = Perms {
        read: Some(true),
        write: Some(true),
        config: Some(true),
        connect: Some(true),
    };

    /// The tri-state of one permission.
    pub fn get(&self, p: Perm) -> Option<bool> {
        match p {
            Perm::Read => self.read,
            Perm::Write => self.write,
            Perm::Config => self.config,
            Perm::Connect => self.connect,
        }
    }

    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Perms::default()
    }

    /// RethinkDB's document form: only the set permissions, or null when none is.
    pub fn to_datum(&self) -> Datum {
        let mut m = Object::new();
        for (k, v) in [
            ("read", self.read),
            ("write", self.write),
            ("config", self.config),
            ("connect", self.connect),
        ] {
            if let Some(b) = v {
                m.insert(Str::from(k), Datum::Bool(b));
            }
        }
        if m.is_empty() {
            Datum::Null
        } else {
            Datum::object(m)
        }
    }

    /// Reads the stored form (the same as `to_datum`); unknown keys are ignored.
    pub fn from_stored(d: &Datum) -> Perms {
        let b = |k: &str| d.get(k).and_then(Datum::as_bool);
        Perms {
            read: b("read"),
            write: b("write"),
            config: b("config"),
            connect: b("connect"),
        }
    }

    /// Merges a `grant` or permissions-row object into this scope with RethinkDB's
    /// validation: booleans set, null clears, `connect` only when `global`.
    pub fn merge(&mut self, d: &Datum, global: bool) -> Result<(), String> {
        let Some(obj) = d.as_object() else {
            return Err(format!("Expected an object, got {}.", d.to_pretty_string()));
        };
        let mut unexpected: Vec<&str> = Vec::new();
        let mut next = *self;
        for (k, v) in obj.iter() {
            let slot = match &**k {
                "read" => &mut next.read,
                "write" => &mut next.write,
                "config" => &mut next.config,
                "connect" if global => &mut next.connect,
                "connect" => {
                    return Err(
                        "The `connect` permission is only valid at the global scope.".into(),
                    )
                }
                other => {
                    unexpected.push(other);
                    continue;
                }
            };
            *slot = match v {
                Datum::Bool(b) => Some(*b),
                Datum::Null => None,
                other => {
                    return Err(format!(
                        "Expected a boolean or null for `{k}`, got {}.",
                        other.to_pretty_string()
                    ))
                }
            };
        }
        if !unexpected.is_empty() {
            return Err(format!("Unexpected key(s) `{}`.", unexpected.join("`, `")));
        }
        *self = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(pairs: &[(&'static str, Datum)]) -> Datum {
        Datum::from_pairs(pairs.iter().cloned())
    }

    #[test]
    fn merge_sets_clears_and_validates() {
        let mut p = Perms::default();
        p.merge(&obj(&[("read", Datum::Bool(true))]), false)
            .unwrap();
        assert_eq!(p.read, Some(true));
        p.merge(&obj(&[("read", Datum::Null)]), false).unwrap();
        assert!(p.is_empty());
        assert_eq!(p.to_datum(), Datum::Null);
        let e = p
            .merge(&obj(&[("read", Datum::Number(1.0))]), false)
            .unwrap_err();
        assert_eq!(e, "Expected a boolean or null for `read`, got 1.");
        let e = p
            .merge(&obj(&[("connect", Datum::Bool(true))]), false)
            .unwrap_err();
        assert_eq!(
            e,
            "The `connect` permission is only valid at the global scope."
        );
        let e = p
            .merge(&obj(&[("invalid", Datum::str("invalid"))]), true)
            .unwrap_err();
        assert_eq!(e, "Unexpected key(s) `invalid`.");
        p.merge(&obj(&[("connect", Datum::Bool(false))]), true)
            .unwrap();
        assert_eq!(p.connect, Some(false));
    }
}
