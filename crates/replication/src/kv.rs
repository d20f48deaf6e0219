//! [`KvMachine`]: a small deterministic key-value state machine, the test double of
//! [`crate::StateMachine`] (used by this crate's tests and its simulation).
//!
//! A command is a [`KvCommand`] (postcard); the reply to a put is the key's previous
//! value, and an undecodable command is answered with [`BAD_COMMAND`] and changes nothing.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde::{Deserialize, Serialize};
use storage::{Engine, StorageError};

use crate::codec::{decode_message, encode_message, CodecError};
use crate::state_machine::{ApplyCtx, StateMachine};

/// The reply to a command that could not be decoded.
pub const BAD_COMMAND: &[u8] = b"\xffbad command";

/// A command of [`KvMachine`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvCommand {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
}

impl KvCommand {
    /// The command as a log entry's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        encode_message(self)
    }
}

/// The key-value machine: one space of kind `kv`.
#[derive(Debug, Default)]
pub struct KvMachine {
    space: String,
}

impl KvMachine {
    /// The only space kind.
    pub const KIND: &'static str = "kv";

    /// The whole map as of now (tests compare replicas with it).
    pub fn read_all(&self, engine: &dyn Engine) -> Result<BTreeMap<String, String>, StorageError> {
        read_map(engine, &self.space)
    }

    /// The space holding the map now.
    pub fn space(&self) -> &str {
        &self.space
    }
}

/// Reads a [`KvMachine`]'s map from `space`.
pub fn read_map(
    engine: &dyn Engine,
    space: &str,
) -> Result<BTreeMap<String, String>, StorageError> {
    let snap = engine.snapshot();
    let mut out = BTreeMap::new();
    for kv in snap.range(space, Bound::Unbounded, Bound::Unbounded, false)? {
        let (k, v) = kv?;
        out.insert(
            String::from_utf8_lossy(&k).into_owned(),
            String::from_utf8_lossy(&v).into_owned(),
        );
    }
    Ok(out)
}

impl StateMachine for KvMachine {
    fn space_kinds(&self) -> Vec<String> {
        vec![Self::KIND.to_owned()]
    }

    fn apply(&mut self, ctx: &mut ApplyCtx<'_>, command: &[u8]) -> Result<Vec<u8>, StorageError> {
        let Ok(command) = decode_message::<KvCommand>(command) else {
            return Ok(BAD_COMMAND.to_vec());
        };
        match command {
            KvCommand::Put { key, value } if !key.is_empty() => {
                let old = ctx.get(Self::KIND, key.as_bytes())?;
                ctx.put(Self::KIND, key.as_bytes(), value.as_bytes())?;
                Ok(old.unwrap_or_default())
            }
            KvCommand::Delete { key } if !key.is_empty() => {
                let old = ctx.get(Self::KIND, key.as_bytes())?;
                ctx.delete(Self::KIND, key.as_bytes())?;
                Ok(old.unwrap_or_default())
            }
            // Engines refuse empty keys: a deterministic refusal, not a storage failure.
            _ => Ok(BAD_COMMAND.to_vec()),
        }
    }

    fn attach(&mut self, spaces: &[String]) -> Result<(), StorageError> {
        self.space = spaces.first().cloned().unwrap_or_default();
        Ok(())
    }
}
