//! SCRAM-SHA-256 (RFC 5802 / RFC 7677) server logic, following RethinkDB
//! 2.4's `scram_authenticator_t`
//! (`src/clustering/administration/auth/scram_authenticator.cc`).
//!
//! Invariants: only the derived `StoredKey`/`ServerKey` are ever needed (the
//! password and salted password are never stored); the client proof is checked
//! in constant time; attributes are examined in the same (sorted-key) order as
//! RethinkDB's `std::map`, so the same malformed message yields the same
//! error; an unknown user still gets a plausible server-first message (random
//! salt) and is only rejected at the final message, as RethinkDB does.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::HandshakeFailure;

/// RethinkDB's default PBKDF2 iteration count for stored passwords.
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// RethinkDB's salt length for stored passwords, in bytes.
pub const DEFAULT_SALT_LEN: usize = 16;
/// Length of RethinkDB's random server nonce before base64 (18 bytes → 24 chars).
pub const SERVER_NONCE_LEN: usize = 18;

/// What the server keeps for a user: enough to run SCRAM, not the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentials {
    /// PBKDF2 salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iteration count.
    pub iterations: u32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: [u8; 32],
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: [u8; 32],
}

impl std::fmt::Debug for ScramCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentials")
            .field("salt", &STANDARD.encode(&self.salt))
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// `HMAC-SHA-256(key, data)`.
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail; the key is always
    // server-side material, never client input.
    #[allow(clippy::expect_used)]
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

impl ScramCredentials {
    /// Derives credentials from a password (no SASLprep is applied, matching
    /// RethinkDB for ASCII passwords). The empty password is hashed like any
    /// other. An iteration count of 0 is treated as 1.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> Self {
        let iterations = iterations.max(1);
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut salted);
        let client_key = hmac_sha256(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let server_key = hmac_sha256(&salted, b"Server Key");
        Self {
            salt: salt.to_vec(),
            iterations,
            stored_key,
            server_key,
        }
    }

    /// Derives credentials with a fresh random 16-byte salt and 4096
    /// iterations, as RethinkDB does when a password is set.
    pub fn generate(password: &str, rng: &mut dyn NonceSource) -> Self {
        let mut salt = [0u8; DEFAULT_SALT_LEN];
        rng.fill(&mut salt);
        Self::derive(password, &salt, DEFAULT_ITERATIONS)
    }

    /// Checks a plaintext password (legacy auth-key handshake) in constant time.
    pub fn verify_password(&self, password: &str) -> bool {
        let other = Self::derive(password, &self.salt, self.iterations);
        bool::from(other.stored_key.ct_eq(&self.stored_key))
    }
}

/// Source of user credentials for the handshake.
pub trait UserLookup {
    /// The credentials of `user`, or `None` if no such user exists.
    fn credentials(&self, user: &str) -> Option<ScramCredentials>;
}

impl<S: std::hash::BuildHasher> UserLookup
    for std::collections::HashMap<String, ScramCredentials, S>
{
    fn credentials(&self, user: &str) -> Option<ScramCredentials> {
        self.get(user).cloned()
    }
}

/// Source of randomness for nonces and salts.
pub trait NonceSource {
    /// Fills `buf` with cryptographically secure random bytes.
    fn fill(&mut self, buf: &mut [u8]);

    /// The server's nonce suffix; RethinkDB uses base64 of 18 random bytes.
    fn server_nonce(&mut self) -> String {
        let mut b = [0u8; SERVER_NONCE_LEN];
        self.fill(&mut b);
        STANDARD.encode(b)
    }
}

/// [`NonceSource`] backed by the operating system's CSPRNG.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsRandom;

impl NonceSource for OsRandom {
    fn fill(&mut self, buf: &mut [u8]) {
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, buf);
    }
}

/// Splits `k=v,k=v` like RethinkDB's `split_attributes` (one-char keys, no
/// duplicates), returning the attributes sorted by key.
fn split_attributes(message: &str) -> Result<BTreeMap<u8, &str>, HandshakeFailure> {
    let mut out = BTreeMap::new();
    let mut offset = 0;
    while offset < message.len() {
        let rest = message
            .get(offset..)
            .ok_or(HandshakeFailure::InvalidEncoding)?;
        let eq = rest.find('=').ok_or(HandshakeFailure::InvalidEncoding)?;
        if eq != 1 {
            return Err(HandshakeFailure::InvalidEncoding);
        }
        let key = *rest
            .as_bytes()
            .first()
            .ok_or(HandshakeFailure::InvalidEncoding)?;
        if out.contains_key(&key) {
            return Err(HandshakeFailure::InvalidEncoding);
        }
        let value_rest = rest.get(2..).ok_or(HandshakeFailure::InvalidEncoding)?;
        match value_rest.find(',') {
            None => {
                out.insert(key, value_rest);
                offset = message.len();
            }
            Some(c) => {
                out.insert(
                    key,
                    value_rest
                        .get(..c)
                        .ok_or(HandshakeFailure::InvalidEncoding)?,
                );
                offset += 2 + c + 1;
            }
        }
    }
    Ok(out)
}

/// Decodes a SCRAM `saslname` (`=2C` → `,`, `=3D` → `=`).
///
/// RethinkDB 2.4 has a fall-through bug here that also keeps the `C`/`D`;
/// we decode per RFC 5802 instead. SASLprep is not applied.
fn saslname_decode(name: &str) -> Result<String, HandshakeFailure> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(
            rest.get(..i)
                .ok_or(HandshakeFailure::InvalidUsernameEncoding)?,
        );
        let code = rest
            .get(i + 1..i + 3)
            .ok_or(HandshakeFailure::InvalidUsernameEncoding)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return Err(HandshakeFailure::InvalidUsernameEncoding),
        });
        rest = rest
            .get(i + 3..)
            .ok_or(HandshakeFailure::InvalidUsernameEncoding)?;
    }
    out.push_str(rest);
    Ok(out)
}

/// Server state between the server-first and client-final messages.
#[derive(Debug)]
pub(crate) struct ScramServer {
    username: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    /// `None` for an unknown user (rejected at the final message).
    credentials: Option<ScramCredentials>,
}

impl ScramServer {
    /// Handles the client-first message; returns the state and the
    /// server-first message `r=<nonce>,s=<salt>,i=<iterations>`.
    pub(crate) fn start(
        message: &str,
        users: &dyn UserLookup,
        rng: &mut dyn NonceSource,
    ) -> Result<(Self, String), HandshakeFailure> {
        if !message.starts_with("n,") {
            return Err(HandshakeFailure::ChannelBindingNotSupported);
        }
        let after_gs2 = message.get(2..).ok_or(HandshakeFailure::InvalidEncoding)?;
        let comma = after_gs2
            .find(',')
            .ok_or(HandshakeFailure::InvalidEncoding)?;
        let bare = after_gs2
            .get(comma + 1..)
            .ok_or(HandshakeFailure::InvalidEncoding)?;

        let attributes = split_attributes(bare)?;
        let mut username = None;
        let mut client_nonce = None;
        for (&key, &value) in &attributes {
            match key {
                b'n' => username = Some(saslname_decode(value)?),
                b'r' => client_nonce = Some(value),
                b'm' => return Err(HandshakeFailure::ExtensionsNotSupported),
                _ => return Err(HandshakeFailure::InvalidEncoding),
            }
        }
        let (Some(username), Some(client_nonce)) = (username, client_nonce) else {
            return Err(HandshakeFailure::InvalidEncoding);
        };

        let credentials = users.credentials(&username);
        let (salt, iterations) = match &credentials {
            Some(c) => (c.salt.clone(), c.iterations),
            None => {
                // Like `password_t::generate_password_for_unknown_user`.
                let mut salt = vec![0u8; DEFAULT_SALT_LEN];
                rng.fill(&mut salt);
                (salt, DEFAULT_ITERATIONS)
            }
        };
        let nonce = format!("{client_nonce}{}", rng.server_nonce());
        let server_first = format!("r={nonce},s={},i={iterations}", STANDARD.encode(&salt));
        let state = Self {
            username,
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
            credentials,
        };
        Ok((state, server_first))
    }

    /// Handles the client-final message; on success returns the
    /// authenticated user name and the server-final message `v=<signature>`.
    pub(crate) fn finish(self, message: &str) -> Result<(String, String), HandshakeFailure> {
        let Some(creds) = &self.credentials else {
            return Err(HandshakeFailure::UnknownUser);
        };
        let without_proof = message
            .find(",p=")
            .and_then(|i| message.get(..i))
            .unwrap_or(message);
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );

        let attributes = split_attributes(message)?;
        let mut seen = (false, false, false);
        for (&key, &value) in &attributes {
            match key {
                b'c' => {
                    if value != "biws" {
                        return Err(HandshakeFailure::InvalidEncoding);
                    }
                    seen.0 = true;
                }
                b'm' => return Err(HandshakeFailure::ExtensionsNotSupported),
                b'p' => {
                    if !verify_proof(creds, &auth_message, value) {
                        return Err(HandshakeFailure::WrongPassword);
                    }
                    seen.1 = true;
                }
                b'r' => {
                    if value != self.nonce {
                        return Err(HandshakeFailure::OtherError);
                    }
                    seen.2 = true;
                }
                _ => return Err(HandshakeFailure::InvalidEncoding),
            }
        }
        if seen != (true, true, true) {
            return Err(HandshakeFailure::InvalidEncoding);
        }
        let signature = hmac_sha256(&creds.server_key, auth_message.as_bytes());
        Ok((self.username, format!("v={}", STANDARD.encode(signature))))
    }
}

/// Checks a base64 client proof: `ClientKey = proof XOR HMAC(StoredKey,
/// AuthMessage)` must hash to `StoredKey` (compared in constant time).
fn verify_proof(creds: &ScramCredentials, auth_message: &str, proof_b64: &str) -> bool {
    let Ok(proof) = STANDARD.decode(proof_b64) else {
        return false;
    };
    let Ok(proof) = <[u8; 32]>::try_from(proof.as_slice()) else {
        return false;
    };
    let signature = hmac_sha256(&creds.stored_key, auth_message.as_bytes());
    let mut client_key = [0u8; 32];
    for ((k, p), s) in client_key.iter_mut().zip(proof).zip(signature) {
        *k = p ^ s;
    }
    let candidate: [u8; 32] = Sha256::digest(client_key).into();
    bool::from(candidate.ct_eq(&creds.stored_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_attributes_like_rethinkdb() {
        let a = split_attributes("n=user,r=abc").unwrap();
        assert_eq!(a.get(&b'n'), Some(&"user"));
        assert_eq!(a.get(&b'r'), Some(&"abc"));
        assert_eq!(
            split_attributes("nn=x"),
            Err(HandshakeFailure::InvalidEncoding)
        );
        assert_eq!(
            split_attributes("n=x,n=y"),
            Err(HandshakeFailure::InvalidEncoding)
        );
        assert_eq!(
            split_attributes("n"),
            Err(HandshakeFailure::InvalidEncoding)
        );
        assert_eq!(split_attributes("r=a=b").unwrap().get(&b'r'), Some(&"a=b"));
        assert!(split_attributes("").unwrap().is_empty());
        assert_eq!(
            split_attributes("é=x"),
            Err(HandshakeFailure::InvalidEncoding)
        );
    }

    #[test]
    fn saslname() {
        assert_eq!(saslname_decode("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert_eq!(
            saslname_decode("a=2"),
            Err(HandshakeFailure::InvalidUsernameEncoding)
        );
        assert_eq!(
            saslname_decode("a=XYb"),
            Err(HandshakeFailure::InvalidUsernameEncoding)
        );
        assert_eq!(
            saslname_decode("=é"),
            Err(HandshakeFailure::InvalidUsernameEncoding)
        );
    }

    #[test]
    fn verify_password_works() {
        let c = ScramCredentials::derive("", b"0123456789abcdef", 16);
        assert!(c.verify_password(""));
        assert!(!c.verify_password("x"));
    }
}
