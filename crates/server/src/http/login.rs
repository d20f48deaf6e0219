//! Logins to the HTTP admin (a Ponder addition: RethinkDB runs every HTTP query as
//! `admin` without a password). While `admin` has a password, a browser logs in with
//! `POST /ajax/login` (`{"user", "password"}`, checked against the users' stored SCRAM
//! credentials) and gets a session: a cookie `ponder_session` (`HttpOnly;
//! SameSite=Strict`) and a CSRF token that every state-changing request must echo in
//! the `X-Ponder-Token` header. Both are 32 bytes from the OS's CSPRNG.
//!
//! Pure: the table of sessions takes the time as an argument. Sessions expire after
//! `LOGIN_IDLE` unused; at most `MAX_LOGINS` live at once (the least recently used is
//! dropped to make room).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use proto::handshake::{NonceSource, OsRandom};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "ponder_session";
/// The header carrying the CSRF token.
pub const TOKEN_HEADER: &str = "x-ponder-token";
/// How long an unused login lasts.
pub const LOGIN_IDLE: Duration = Duration::from_secs(8 * 3600);
/// Most logins kept at once.
pub const MAX_LOGINS: usize = 1024;

/// One logged-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The user.
    pub user: String,
    /// The CSRF token the page must echo in `X-Ponder-Token`.
    pub csrf: String,
}

struct Entry {
    login: Login,
    last_used: Instant,
}

/// The live logins, by session cookie.
#[derive(Default)]
pub struct Logins {
    by_cookie: HashMap<String, Entry>,
}

/// 32 random bytes from the OS, base64url without padding.
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    OsRandom.fill(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

impl Logins {
    /// Starts a login of `user` at `now`: its cookie value and the login.
    pub fn create(&mut self, user: &str, now: Instant) -> (String, Login) {
        self.expire(now);
        if self.by_cookie.len() >= MAX_LOGINS {
            let oldest = self
                .by_cookie
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.by_cookie.remove(&k);
            }
        }
        let cookie = random_token();
        let login = Login {
            user: user.to_string(),
            csrf: random_token(),
        };
        self.by_cookie.insert(
            cookie.clone(),
            Entry {
                login: login.clone(),
                last_used: now,
            },
        );
        (cookie, login)
    }

    /// The login of a session cookie, marked used at `now`.
    pub fn get(&mut self, cookie: &str, now: Instant) -> Option<Login> {
        let e = self.by_cookie.get_mut(cookie)?;
        if now.saturating_duration_since(e.last_used) > LOGIN_IDLE {
            self.by_cookie.remove(cookie);
            return None;
        }
        e.last_used = now;
        Some(e.login.clone())
    }

    /// Ends the login of a session cookie.
    pub fn remove(&mut self, cookie: &str) {
        self.by_cookie.remove(cookie);
    }

    /// Drops the logins unused for longer than `LOGIN_IDLE`.
    fn expire(&mut self, now: Instant) {
        self.by_cookie
            .retain(|_, e| now.saturating_duration_since(e.last_used) <= LOGIN_IDLE);
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// The `Set-Cookie` value starting a session (`Secure` over TLS).
pub fn set_cookie(value: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value ending a session.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Whether `given` is the login's CSRF token, compared in constant time.
pub fn token_matches(login: &Login, given: Option<&str>) -> bool {
    given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(login.csrf.as_bytes())))
}

/// `(user, password)` of an `Authorization: Basic` header (for `/metrics` scrapers).
pub fn basic_auth(header: &str) -> Option<(String, String)> {
    let b64 = header.strip_prefix("Basic ")?.trim();
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_live_while_used_and_expire_when_idle() {
        let t0 = Instant::now();
        let mut l = Logins::default();
        let (cookie, login) = l.create("bob", t0);
        assert_eq!(login.user, "bob");
        assert_ne!(cookie, login.csrf);
        assert_eq!(cookie.len(), 43);
        assert_eq!(l.get(&cookie, t0 + LOGIN_IDLE), Some(login.clone()));
        assert_eq!(l.get(&cookie, t0 + LOGIN_IDLE * 2), Some(login));
        assert_eq!(
            l.get(&cookie, t0 + LOGIN_IDLE * 3 + Duration::from_secs(1)),
            None
        );
        let (c2, _) = l.create("x", t0);
        l.remove(&c2);
        assert_eq!(l.get(&c2, t0), None);
        assert_eq!(l.get("forged", t0), None);
    }

    #[test]
    fn logins_are_bounded() {
        let t0 = Instant::now();
        let mut l = Logins::default();
        let (first, _) = l.create("u", t0);
        for i in 0..MAX_LOGINS {
            l.create("u", t0 + Duration::from_millis(i as u64 + 1));
        }
        assert_eq!(l.by_cookie.len(), MAX_LOGINS);
        assert_eq!(l.get(&first, t0), None, "the least recently used went");
    }

    #[test]
    fn cookies_tokens_and_basic_auth_parse() {
        assert_eq!(
            cookie_value("a=1; ponder_session=XYZ; b=2", COOKIE),
            Some("XYZ")
        );
        assert_eq!(cookie_value("a=1", COOKIE), None);
        let s = set_cookie("v", false);
        assert!(s.contains("HttpOnly") && s.contains("SameSite=Strict"));
        assert!(set_cookie("v", true).ends_with("; Secure"));
        let login = Login {
            user: "u".into(),
            csrf: "tok".into(),
        };
        assert!(token_matches(&login, Some("tok")));
        assert!(!token_matches(&login, Some("tok2")));
        assert!(!token_matches(&login, None));
        assert_eq!(
            basic_auth("Basic YWRtaW46czNjcjN0"),
            Some(("admin".into(), "s3cr3t".into()))
        );
        assert_eq!(basic_auth("Bearer x"), None);
    }
}
