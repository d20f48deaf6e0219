//! `Users`: the users and their permissions as the catalog holds them, and the
//! validation of changes to them, applied as catalog commands (`crate::catalog`). The
//! records live in the `users` storage space, written only by the catalog's applier.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use datum::{Datum, Object, Str};
use proto::handshake::{OsRandom, ScramCredentials, UserLookup};

use super::perms::{Perm, Perms};
use crate::catalog::{message, Catalog, CatalogCommand};

/// The administrator's name.
pub const ADMIN: &str = "admin";

/// Where a permission set applies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Scope {
    /// Everything (the only scope with `connect`).
    Global,
    /// One database, by id.
    Db(String),
    /// One table, by id.
    Table(String),
}

/// One user: credentials and permissions (the catalog's state holds them).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct User {
    pub(crate) creds: ScramCredentials,
    pub(crate) has_password: bool,
    pub(crate) global: Perms,
    pub(crate) dbs: BTreeMap<String, Perms>,
    pub(crate) tables: BTreeMap<String, Perms>,
}

impl User {
    pub(crate) fn new(password: Option<&str>) -> User {
        User {
            creds: ScramCredentials::generate(password.unwrap_or(""), &mut OsRandom),
            has_password: password.is_some(),
            global: Perms::default(),
            dbs: BTreeMap::new(),
            tables: BTreeMap::new(),
        }
    }

    pub(crate) fn scope(&self, s: &Scope) -> Perms {
        match s {
            Scope::Global => self.global,
            Scope::Db(id) => self.dbs.get(id).copied().unwrap_or_default(),
            Scope::Table(id) => self.tables.get(id).copied().unwrap_or_default(),
        }
    }

    pub(crate) fn set_scope(&mut self, s: &Scope, p: Perms) {
        match s {
            Scope::Global => self.global = p,
            Scope::Db(id) | Scope::Table(id) => {
                let map = if matches!(s, Scope::Db(_)) {
                    &mut self.dbs
                } else {
                    &mut self.tables
                };
                if p.is_empty() {
                    map.remove(id);
                } else {
                    map.insert(id.clone(), p);
                }
            }
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let b = |x: &[u8]| Datum::from(base64::engine::general_purpose::STANDARD.encode(x));
        let scopes = |m: &BTreeMap<String, Perms>| {
            let o: Object = m
                .iter()
                .map(|(k, p)| (Str::from(k.as_str()), p.to_datum()))
                .collect();
            Datum::object(o)
        };
        Datum::from_pairs([
            ("salt", b(&self.creds.salt)),
            ("iterations", Datum::from(f64::from(self.creds.iterations))),
            ("stored_key", b(&self.creds.stored_key)),
            ("server_key", b(&self.creds.server_key)),
            ("password", Datum::Bool(self.has_password)),
            ("global", self.global.to_datum()),
            ("dbs", scopes(&self.dbs)),
            ("tables", scopes(&self.tables)),
        ])
        .to_json_bytes()
    }

    pub(crate) fn decode(bytes: &[u8], admin: bool) -> Option<User> {
        let d = datum::from_json_slice(bytes).ok()?;
        let b64 = |k: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(d.get(k)?.as_str()?)
                .ok()
        };
        let creds = ScramCredentials {
            salt: b64("salt")?,
            iterations: d.get("iterations")?.as_f64()? as u32,
            stored_key: b64("stored_key")?.try_into().ok()?,
            server_key: b64("server_key")?.try_into().ok()?,
        };
        let has_password = match d.get("password").and_then(Datum::as_bool) {
            Some(b) => b,
            // Records written before user management: only `admin`, maybe passwordless.
            None => !creds.verify_password(""),
        };
        let scopes = |k: &str| -> BTreeMap<String, Perms> {
            d.get(k)
                .and_then(Datum::as_object)
                .map(|o| {
                    o.iter()
                        .map(|(id, p)| (id.to_string(), Perms::from_stored(p)))
                        .filter(|(_, p)| !p.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(User {
            creds,
            has_password,
            global: if admin {
                Perms::ALL
            } else {
                d.get("global").map(Perms::from_stored).unwrap_or_default()
            },
            dbs: scopes("dbs"),
            tables: scopes("tables"),
        })
    }
}

/// The users known to this server: a view of the catalog's users
/// (`crate::catalog::Catalog`), changed only through its commands.
pub struct Users {
    catalog: Arc<Catalog>,
}

impl Users {
    /// The users of `catalog`.
    pub(crate) fn new(catalog: Arc<Catalog>) -> Users {
        Users { catalog }
    }

    /// Every user as a `rethinkdb.users` row `{id, password}`, by name.
    pub fn rows(&self) -> Vec<Datum> {
        self.catalog
            .read_state()
            .users
            .iter()
            .map(|(n, u)| user_row(n, u.has_password))
            .collect()
    }

    /// One user's row, if the user exists.
    pub fn row(&self, name: &str) -> Option<Datum> {
        self.catalog
            .read_state()
            .users
            .get(name)
            .map(|u| user_row(name, u.has_password))
    }

    /// Whether `name` exists and has a password (for `admin`: whether logging in to
    /// the HTTP admin is required).
    pub fn has_password(&self, name: &str) -> bool {
        self.catalog
            .read_state()
            .users
            .get(name)
            .is_some_and(|u| u.has_password)
    }

    /// Whether `password` is `name`'s (a user without a password has ""), checked
    /// against the stored SCRAM credentials in constant time. Costs one PBKDF2
    /// derivation: call it off the async workers.
    pub fn check_password(&self, name: &str, password: &str) -> bool {
        let creds = self
            .catalog
            .read_state()
            .users
            .get(name)
            .map(|u| u.creds.clone());
        match creds {
            Some(c) => c.verify_password(password),
            None => false,
        }
    }

    /// Whether `name` exists.
    pub fn exists(&self, name: &str) -> bool {
        self.catalog.read_state().users.contains_key(name)
    }

    /// Applies a write to `rethinkdb.users`: `new` is the whole new row, or `None` to
    /// delete. Errors are RethinkDB's messages.
    pub fn write_row(&self, name: &str, new: Option<&Datum>) -> Result<(), String> {
        let Some(new) = new else {
            // The applier refuses `admin` and unknown users with RethinkDB's messages.
            return self
                .catalog
                .apply(CatalogCommand::DeleteUser {
                    name: name.to_string(),
                })
                .map(|_| ())
                .map_err(message);
        };
        let mut g = self.catalog.lock();
        let old = g.state().users.get(name).cloned();
        let Some(obj) = new.as_object() else {
            return Err(format!(
                "Expected an object, got {}.",
                new.to_pretty_string()
            ));
        };
        if !obj.contains_key("id") {
            return Err("Expected a field named `id`.".into());
        }
        let Some(password) = obj.get("password") else {
            return Err("Expected a field named `password`.".into());
        };
        let extra: Vec<&str> = obj
            .keys()
            .map(|k| &**k)
            .filter(|k| *k != "id" && *k != "password")
            .collect();
        if !extra.is_empty() {
            return Err(format!("Unexpected key(s) `{}`.", extra.join("`, `")));
        }
        let mut user = old.clone().unwrap_or_else(|| User::new(None));
        match password {
            Datum::String(s) => user = with_password(user, Some(s), None),
            Datum::Object(_) => {
                let pw = password.get("password").and_then(Datum::as_str);
                let it = password.get("iterations").and_then(Datum::as_f64);
                match (pw, it) {
                    (Some(pw), it) if it.is_none_or(|n| n >= 1.0 && n.fract() == 0.0) => {
                        user = with_password(user, Some(pw), it.map(|n| n as u32))
                    }
                    _ => {
                        return Err(format!(
                            "Expected an object with a string `password` and an optional \
                             positive integer `iterations`, got {}.",
                            password.to_pretty_string()
                        ))
                    }
                }
            }
            Datum::Bool(true) => {
                if !user.has_password {
                    return Err(format!(
                        "Expected an object or string to set the password, or `false` to \
                         keep it unset, got {}.",
                        password.to_pretty_string()
                    ));
                }
            }
            Datum::Bool(false) => {
                if user.has_password {
                    user = with_password(user, None, None);
                }
            }
            other => {
                return Err(format!(
                    "Expected an object, string or boolean for `password`, got {}.",
                    other.to_pretty_string()
                ))
            }
        }
        g.apply(CatalogCommand::PutUser {
            name: name.to_string(),
            credentials: (&user.creds).into(),
            has_password: user.has_password,
        })
        .map_err(message)?;
        Ok(())
    }

    /// The permissions `name` holds at one scope.
    pub fn scope(&self, name: &str, scope: &Scope) -> Option<Perms> {
        self.catalog
            .read_state()
            .users
            .get(name)
            .map(|u| u.scope(scope))
    }

    /// Every non-empty scope of every user: `(user, scope, perms)`.
    pub fn all_scopes(&self) -> Vec<(String, Scope, Perms)> {
        let mut out = Vec::new();
        for (n, u) in self.catalog.read_state().users.iter() {
            if !u.global.is_empty() {
                out.push((n.clone(), Scope::Global, u.global));
            }
            for (id, p) in &u.dbs {
                out.push((n.clone(), Scope::Db(id.clone()), *p));
            }
            for (id, p) in &u.tables {
                out.push((n.clone(), Scope::Table(id.clone()), *p));
            }
        }
        out
    }

    /// Replaces one scope of a user (`Perms::default()` clears it). Returns the old and
    /// new sets. `admin`'s permissions can't be modified.
    pub fn set_scope(
        &self,
        name: &str,
        scope: &Scope,
        f: impl FnOnce(&mut Perms) -> Result<(), String>,
    ) -> Result<(Perms, Perms), String> {
        if name == ADMIN {
            return Err(format!(
                "The permissions of the user `{name}` can't be modified."
            ));
        }
        let mut g = self.catalog.lock();
        let Some(old) = g.state().users.get(name).map(|u| u.scope(scope)) else {
            return Err(format!("User `{name}` not found."));
        };
        let mut new = old;
        f(&mut new)?;
        let out = g
            .apply(CatalogCommand::SetPermissions {
                user: name.to_string(),
                scope: scope.clone(),
                perms: new,
            })
            .map_err(message)?;
        Ok(out.perms.unwrap_or((old, new)))
    }

    /// Whether `name` may use `perm` on a table (`table` = `(db id, table id)`), a
    /// database (`db` only) or globally. `system` marks the `rethinkdb` database, where
    /// global `read`/`write` do not apply.
    pub fn allowed(
        &self,
        name: &str,
        perm: Perm,
        db: Option<&str>,
        table: Option<&str>,
        system: bool,
    ) -> bool {
        if name == ADMIN {
            return true;
        }
        let st = self.catalog.read_state();
        let Some(u) = st.users.get(name) else {
            return false;
        };
        let one = |p: Perm| -> bool {
            if let Some(v) = table.and_then(|t| u.tables.get(t)).and_then(|s| s.get(p)) {
                return v;
            }
            if let Some(v) = db.and_then(|d| u.dbs.get(d)).and_then(|s| s.get(p)) {
                return v;
            }
            if system && matches!(p, Perm::Read | Perm::Write) {
                return false;
            }
            u.global.get(p) == Some(true)
        };
        match perm {
            Perm::Write => one(Perm::Read) && one(Perm::Write),
            Perm::Connect => u.global.connect == Some(true),
            p => one(p),
        }
    }
}

fn with_password(mut u: User, pw: Option<&str>, iterations: Option<u32>) -> User {
    u.creds = match iterations {
        Some(n) => {
            let fresh = ScramCredentials::generate("", &mut OsRandom);
            ScramCredentials::derive(pw.unwrap_or(""), &fresh.salt, n)
        }
        None => ScramCredentials::generate(pw.unwrap_or(""), &mut OsRandom),
    };
    u.has_password = pw.is_some();
    u
}

fn user_row(name: &str, has_password: bool) -> Datum {
    Datum::from_pairs([
        ("id", Datum::str(name)),
        ("password", Datum::Bool(has_password)),
    ])
}

impl UserLookup for Users {
    fn credentials(&self, user: &str) -> Option<ScramCredentials> {
        self.catalog
            .read_state()
            .users
            .get(user)
            .map(|u| u.creds.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        let e: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        Users::new(Arc::new(Catalog::open(e, "").unwrap()))
    }

    #[test]
    fn passwords_are_checked_against_the_stored_credentials() {
        let u = users();
        assert!(!u.has_password(ADMIN));
        assert!(u.check_password(ADMIN, ""));
        assert!(!u.check_password(ADMIN, "x"));
        assert!(!u.check_password("nobody", ""));
    }

    #[test]
    fn insert_update_delete_and_admin_rules() {
        let u = users();
        assert_eq!(u.rows().len(), 1);
        assert_eq!(
            u.row(ADMIN).unwrap().get("password"),
            Some(&Datum::Bool(false))
        );
        let row = Datum::from_pairs([("id", Datum::str("bob")), ("password", Datum::str("pw"))]);
        u.write_row("bob", Some(&row)).unwrap();
        assert_eq!(
            u.row("bob").unwrap().get("password"),
            Some(&Datum::Bool(true))
        );
        assert!(u.credentials("bob").unwrap().verify_password("pw"));
        let row = Datum::from_pairs([("id", Datum::str("bob")), ("password", Datum::Bool(false))]);
        u.write_row("bob", Some(&row)).unwrap();
        assert!(u.credentials("bob").unwrap().verify_password(""));
        assert_eq!(
            u.write_row(ADMIN, None).unwrap_err(),
            "The user `admin` can't be deleted"
        );
        let bad = Datum::from_pairs([("id", Datum::str("x"))]);
        assert_eq!(
            u.write_row("x", Some(&bad)).unwrap_err(),
            "Expected a field named `password`."
        );
        u.write_row("bob", None).unwrap();
        assert!(!u.exists("bob"));
    }

    #[test]
    fn permission_inheritance() {
        let u = users();
        let row = Datum::from_pairs([("id", Datum::str("bob")), ("password", Datum::Bool(false))]);
        u.write_row("bob", Some(&row)).unwrap();
        assert!(!u.allowed("bob", Perm::Read, Some("d"), Some("t"), false));
        u.set_scope("bob", &Scope::Global, |p| {
            p.read = Some(true);
            Ok(())
        })
        .unwrap();
        assert!(u.allowed("bob", Perm::Read, Some("d"), Some("t"), false));
        assert!(!u.allowed("bob", Perm::Read, Some("d"), Some("t"), true));
        assert!(!u.allowed("bob", Perm::Write, Some("d"), Some("t"), false));
        u.set_scope("bob", &Scope::Db("d".into()), |p| {
            p.write = Some(true);
            Ok(())
        })
        .unwrap();
        assert!(u.allowed("bob", Perm::Write, Some("d"), Some("t"), false));
        u.set_scope("bob", &Scope::Table("t".into()), |p| {
            p.read = Some(false);
            Ok(())
        })
        .unwrap();
        assert!(!u.allowed("bob", Perm::Write, Some("d"), Some("t"), false));
        assert!(u.allowed("bob", Perm::Write, Some("d"), Some("t2"), false));
        assert!(u.allowed(ADMIN, Perm::Config, None, None, true));
        assert!(u
            .set_scope(ADMIN, &Scope::Global, |_| Ok(()))
            .unwrap_err()
            .contains("can't be modified"));
    }
}
