//! User credentials for the handshake: SCRAM material kept in the `users` storage space,
//! never the password itself. `admin` is created on first start with the
//! `--initial-password` (empty by default).

use std::sync::Arc;

use base64::Engine as _;
use parking_lot::RwLock;
use proto::handshake::{OsRandom, ScramCredentials, UserLookup};
use storage::{Engine, WriteBatch};

const SPACE: &str = "users";

/// The users known to this server.
pub struct Users {
    admin: RwLock<Option<ScramCredentials>>,
}

fn encode(c: &ScramCredentials) -> Vec<u8> {
    let b = |x: &[u8]| base64::engine::general_purpose::STANDARD.encode(x);
    serde_json::json!({
        "salt": b(&c.salt),
        "iterations": c.iterations,
        "stored_key": b(&c.stored_key),
        "server_key": b(&c.server_key),
    })
    .to_string()
    .into_bytes()
}

fn decode(bytes: &[u8]) -> Option<ScramCredentials> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let d = |k: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(v.get(k)?.as_str()?)
            .ok()
    };
    Some(ScramCredentials {
        salt: d("salt")?,
        iterations: u32::try_from(v.get("iterations")?.as_u64()?).ok()?,
        stored_key: d("stored_key")?.try_into().ok()?,
        server_key: d("server_key")?.try_into().ok()?,
    })
}

impl Users {
    /// Loads users, creating `admin` with `initial_password` on first start.
    pub fn open(
        engine: &Arc<dyn Engine>,
        initial_password: &str,
    ) -> Result<Users, storage::StorageError> {
        engine.create_space(SPACE)?;
        let admin = match engine.get(SPACE, b"admin")?.as_deref().and_then(decode) {
            Some(c) => c,
            None => {
                let c = ScramCredentials::generate(initial_password, &mut OsRandom);
                let mut b = WriteBatch::new();
                b.put(SPACE, b"admin".to_vec(), encode(&c));
                engine.apply(b)?;
                engine.persist()?;
                c
            }
        };
        Ok(Users {
            admin: RwLock::new(Some(admin)),
        })
    }
}

impl UserLookup for Users {
    fn credentials(&self, user: &str) -> Option<ScramCredentials> {
        if user == "admin" {
            self.admin.read().clone()
        } else {
            None
        }
    }
}
