//! What a server keeps about itself across restarts for clustering: its server id,
//! the cluster id, and a name or tags set through `rethinkdb.server_config`. Stored as
//! JSON in `<data directory>/server.json`, replaced atomically (write, fsync, rename).
//!
//! Invariants: the server id never changes once written; the cluster id is written once
//! (created when a server started without `--join` first loads its identity, or adopted from the first member a
//! joining server reaches); a name or tags set by a rename win over the flags from then
//! on (`renamed`), otherwise the flags of each start apply, as before clustering;
//! `replicated` (the catalog lives in Raft group 0) is set once and never cleared.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
pub const FILE: &str = "server.json";

/// A server's persistent identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// The server id (a UUID).
    pub server_id: String,
    /// The cluster id, once known.
    pub cluster_id: Option<String>,
    /// The server name.
    pub name: String,
    /// The server tags.
    pub tags: Vec<String>,
    /// Whether name and tags were set through `server_config` (they then override the
    /// command line).
    #[serde(default)]
    pub renamed: bool,
    /// Whether this server created the cluster id (started without `--join` on a new
    /// directory): the only one that may turn its catalog into the cluster's replicated
    /// catalog when servers join it. False for directories older than this field.
    #[serde(default)]
    pub founder: bool,
    /// Whether this server's catalog is replicated (Raft group 0): set for a new
    /// directory started with `--join`, and when a founder converts at its first join.
    /// Such a directory is never opened as a single server's again.
    #[serde(default)]
    pub replicated: bool,
}

/// Reading or writing the identity failed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The file could not be read or written.
    #[error("cannot access {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not an identity.
    #[error("{} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl Identity {
    /// Loads the identity of `dir` (a new server id if it has none) and applies the
    /// command line's `name` and `tags` unless a rename set them. A server that is not
    /// `joining` and has no cluster id creates one now. Nothing is written: the caller
    /// saves it once the data directory was accepted (a refused directory is left as
    /// it was).
    pub fn load(
        dir: &Path,
        name: &str,
        tags: &[String],
        joining: bool,
    ) -> Result<Self, IdentityError> {
        let path = dir.join(FILE);
        let mut id = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<Identity>(&bytes).map_err(|e| IdentityError::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Identity {
                server_id: uuid::Uuid::new_v4().to_string(),
                cluster_id: None,
                name: name.to_string(),
                tags: tags.to_vec(),
                renamed: false,
                founder: false,
                replicated: joining,
            },
            Err(source) => return Err(IdentityError::Io { path, source }),
        };
        if !id.renamed {
            id.name = name.to_string();
            id.tags = tags.to_vec();
        }
        if id.cluster_id.is_none() && !joining {
            id.cluster_id = Some(uuid::Uuid::new_v4().to_string());
            id.founder = true;
        }
        Ok(id)
    }

    /// Writes the identity to `dir` atomically.
    pub fn save(&self, dir: &Path) -> Result<(), IdentityError> {
        let path = dir.join(FILE);
        let tmp = dir.join(format!("{FILE}.tmp"));
        let io = |source| IdentityError::Io {
            path: path.clone(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| IdentityError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_or_create(
        dir: &Path,
        name: &str,
        tags: &[String],
        joining: bool,
    ) -> Result<Identity, IdentityError> {
        let id = Identity::load(dir, name, tags, joining)?;
        id.save(dir)?;
        Ok(id)
    }

    #[test]
    fn nothing_is_written_until_saved() {
        let dir = tempfile::tempdir().unwrap();
        Identity::load(dir.path(), "a", &[], false).unwrap();
        assert!(!dir.path().join(FILE).exists());
    }

    #[test]
    fn the_server_id_persists_and_flags_apply_until_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let tags = vec!["default".to_string()];
        let first = load_or_create(dir.path(), "a", &tags, true).unwrap();
        assert_eq!(first.cluster_id, None, "a joiner waits to learn it");
        let again = load_or_create(dir.path(), "b", &tags, true).unwrap();
        assert_eq!(again.server_id, first.server_id);
        assert_eq!(again.name, "b", "without a rename the flag applies");
        let mut renamed = again.clone();
        renamed.name = "c".into();
        renamed.renamed = true;
        renamed.cluster_id = Some("k".into());
        renamed.save(dir.path()).unwrap();
        let after = load_or_create(dir.path(), "b", &tags, false).unwrap();
        assert_eq!(
            (after.name.as_str(), after.cluster_id.as_deref()),
            ("c", Some("k"))
        );
        let alone = tempfile::tempdir().unwrap();
        let made = load_or_create(alone.path(), "a", &tags, false).unwrap();
        assert!(
            made.cluster_id.is_some(),
            "the first server creates the cluster id"
        );
        let kept = load_or_create(alone.path(), "a", &tags, true).unwrap();
        assert_eq!(kept.cluster_id, made.cluster_id);
        std::fs::write(dir.path().join(FILE), b"{").unwrap();
        assert!(matches!(
            load_or_create(dir.path(), "b", &tags, false),
            Err(IdentityError::Corrupt { .. })
        ));
    }
}
