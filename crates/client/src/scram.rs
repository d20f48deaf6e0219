//! The client side of SCRAM-SHA-256 (RFC 5802 / RFC 7677) as a pure state
//! machine: no sockets, so it is tested against RFC 7677's example exchange.
//!
//! Flow: [`ScramClient::new`] → [`ScramClient::client_first`] (sent) →
//! [`ScramClient::handle_server_first`] returns the client-final message and a
//! [`ScramVerifier`] → [`ScramVerifier::verify_server_final`] checks the
//! server's signature, so the client knows it talked to a server that holds
//! the password's keys.
//!
//! Channel binding is not used (GS2 header `n,,`), as with RethinkDB's drivers.
//! SASLprep is not applied to the password (RethinkDB does not apply it either).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::Error;

/// GS2 header for "no channel binding", and its base64 form sent as `c=`.
const GS2_HEADER: &str = "n,,";
const GS2_HEADER_B64: &str = "biws";

/// Largest PBKDF2 iteration count accepted from a server (a guard against a
/// hostile server making the client spin).
pub const MAX_ITERATIONS: u32 = 1_000_000;

/// `HMAC-SHA-256(key, data)`.
fn hmac_sha256(key: &[u8], data: &[u8]) -> Result<[u8; 32], Error> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key)
        .map_err(|e| Error::Handshake(format!("HMAC key: {e}")))?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().into())
}

/// Escapes a user name as a SCRAM `saslname` (`,` → `=2C`, `=` → `=3D`).
pub fn saslname_encode(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// A fresh client nonce: base64 of 18 random bytes from the OS CSPRNG.
pub fn random_nonce() -> String {
    let mut b = [0u8; 18];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut b);
    STANDARD.encode(b)
}

/// Client state before the server-first message.
#[derive(Debug, Clone)]
pub struct ScramClient {
    password: String,
    nonce: String,
    client_first_bare: String,
}

impl ScramClient {
    /// Starts an exchange for `user` with `password` and the client nonce
    /// `nonce` (use [`random_nonce`] outside tests; it must not contain `,`).
    pub fn new(user: &str, password: &str, nonce: &str) -> Self {
        Self {
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            client_first_bare: format!("n={},r={}", saslname_encode(user), nonce),
        }
    }

    /// The client-first message, e.g. `n,,n=user,r=<nonce>`.
    pub fn client_first(&self) -> String {
        format!("{GS2_HEADER}{}", self.client_first_bare)
    }

    /// Handles the server-first message `r=<nonce>,s=<salt>,i=<iterations>`,
    /// returning the client-final message `c=biws,r=<nonce>,p=<proof>` and the
    /// verifier for the server-final message.
    pub fn handle_server_first(
        &self,
        server_first: &str,
    ) -> Result<(String, ScramVerifier), Error> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attr in server_first.split(',') {
            let (key, value) = attr.split_once('=').ok_or_else(|| {
                Error::Handshake(format!("malformed server-first: {server_first}"))
            })?;
            match key {
                "r" => nonce = Some(value),
                "s" => salt = Some(value),
                "i" => iterations = Some(value),
                "m" => {
                    return Err(Error::Handshake(
                        "server requires an unsupported SCRAM extension".into(),
                    ))
                }
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(Error::Handshake(format!(
                "server-first lacks r, s or i: {server_first}"
            )));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() <= self.nonce.len() {
            return Err(Error::Handshake(
                "server nonce does not extend the client nonce".into(),
            ));
        }
        let salt = STANDARD
            .decode(salt)
            .map_err(|e| Error::Handshake(format!("salt is not base64: {e}")))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| Error::Handshake(format!("bad iteration count: {iterations}")))?;
        if iterations == 0 || iterations > MAX_ITERATIONS {
            return Err(Error::Handshake(format!(
                "iteration count out of range: {iterations}"
            )));
        }

        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(self.password.as_bytes(), &salt, iterations, &mut salted);
        let client_key = hmac_sha256(&salted, b"Client Key")?;
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let server_key = hmac_sha256(&salted, b"Server Key")?;

        let without_proof = format!("c={GS2_HEADER_B64},r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac_sha256(&stored_key, auth_message.as_bytes())?;
        let mut proof = [0u8; 32];
        for ((p, k), s) in proof.iter_mut().zip(client_key).zip(client_signature) {
            *p = k ^ s;
        }
        let server_signature = hmac_sha256(&server_key, auth_message.as_bytes())?;
        let client_final = format!("{without_proof},p={}", STANDARD.encode(proof));
        Ok((client_final, ScramVerifier { server_signature }))
    }
}

/// Checks the server-final message of one exchange.
#[derive(Debug, Clone)]
pub struct ScramVerifier {
    server_signature: [u8; 32],
}

impl ScramVerifier {
    /// Accepts `v=<base64 server signature>` if it is the expected signature;
    /// an `e=<error>` message or a wrong signature is an error.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), Error> {
        for attr in server_final.split(',') {
            if let Some(err) = attr.strip_prefix("e=") {
                return Err(Error::Handshake(format!("server rejected SCRAM: {err}")));
            }
            if let Some(v) = attr.strip_prefix("v=") {
                let sig = STANDARD.decode(v).map_err(|e| {
                    Error::Handshake(format!("server signature is not base64: {e}"))
                })?;
                // Not secret: comparing the server's signature needs no constant time.
                return if sig == self.server_signature {
                    Ok(())
                } else {
                    Err(Error::Handshake("server signature mismatch".into()))
                };
            }
        }
        Err(Error::Handshake(format!(
            "server-final lacks v=: {server_final}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677, section 3.
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    #[test]
    fn rfc7677_client_first() {
        let c = ScramClient::new("user", "pencil", NONCE);
        assert_eq!(c.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    }

    #[test]
    fn rfc7677_client_final_and_server_signature() {
        let c = ScramClient::new("user", "pencil", NONCE);
        let (fin, verifier) = c.handle_server_first(SERVER_FIRST).unwrap();
        assert_eq!(fin, CLIENT_FINAL);
        verifier.verify_server_final(SERVER_FINAL).unwrap();
    }

    #[test]
    fn wrong_server_signature_rejected() {
        let c = ScramClient::new("user", "pencil", NONCE);
        let (_, verifier) = c.handle_server_first(SERVER_FIRST).unwrap();
        assert!(verifier
            .verify_server_final("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
            .is_err());
        assert!(verifier.verify_server_final("e=invalid-proof").is_err());
        assert!(verifier.verify_server_final("x=1").is_err());
    }

    #[test]
    fn wrong_password_gives_different_proof() {
        let c = ScramClient::new("user", "pencil2", NONCE);
        let (fin, _) = c.handle_server_first(SERVER_FIRST).unwrap();
        assert_ne!(fin, CLIENT_FINAL);
    }

    #[test]
    fn server_nonce_must_extend_client_nonce() {
        let c = ScramClient::new("user", "pencil", NONCE);
        assert!(c
            .handle_server_first("r=other%xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .is_err());
        assert!(c
            .handle_server_first("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .is_err());
        assert!(c
            .handle_server_first("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0")
            .is_err());
        assert!(c.handle_server_first("garbage").is_err());
    }

    #[test]
    fn saslname_escaping() {
        assert_eq!(saslname_encode("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(
            ScramClient::new("a=b", "", "n").client_first(),
            "n,,n=a=3Db,r=n"
        );
    }

    #[test]
    fn random_nonces_differ() {
        let a = random_nonce();
        assert_eq!(a.len(), 24);
        assert!(!a.contains(','));
        assert_ne!(a, random_nonce());
    }
}
