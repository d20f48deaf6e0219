//! `CatalogCommand`: every change to databases, tables, index definitions, write hooks,
//! users, permissions and the shard map, as one value. `Catalog::apply`
//! (`super::apply`) is the one place that applies them, so replicating the catalog
//! later means replicating these commands.
//!
//! Commands are complete and deterministic: ids, split points and password material are
//! chosen before a command is made (never while it is applied), so applying the same
//! commands in the same order gives the same catalog anywhere. They serialise with
//! serde (`to_json`/`from_json`); datums inside them (split points, ReQL functions) are
//! kept in their JSON form.

use base64::Engine as _;
use proto::handshake::ScramCredentials;
use serde::{Deserialize, Serialize};

use crate::auth::{Perms, Scope};
use crate::placement::ShardPlacement;

/// A table as `CreateTable` makes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    /// The table's id (a UUID).
    pub id: String,
    /// The id of its database.
    pub db_id: String,
    /// Its name.
    pub name: String,
    /// The primary key field.
    pub primary_key: String,
    /// `"hard"` or `"soft"`.
    pub durability: String,
    /// `"single"` or `"majority"` (none: `"majority"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_acks: Option<String>,
    /// The recorded number of shards.
    pub shards: u32,
    /// The recorded number of replicas.
    pub replicas: u32,
    /// Where the shards are cut: `shards - 1` primary-key values (JSON form).
    pub split_points: Vec<serde_json::Value>,
    /// Which servers hold each shard (a replicated catalog's tables; empty: the server
    /// holding the catalog, as on a single server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<ShardPlacement>,
}

impl TableDef {
    /// Table `name` (id `id`) of database `db_id` with RethinkDB's defaults: primary key
    /// `id`, hard durability, one shard of one replica, no recorded placement.
    pub fn new(id: &str, db_id: &str, name: &str) -> TableDef {
        TableDef {
            id: id.into(),
            db_id: db_id.into(),
            name: name.into(),
            primary_key: "id".into(),
            durability: "hard".into(),
            write_acks: None,
            shards: 1,
            replicas: 1,
            split_points: vec![],
            placement: vec![],
        }
    }
}

/// What `AlterTable` changes (`None` keeps the value).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableChanges {
    /// A new name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The id of a new database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_id: Option<String>,
    /// `"hard"` or `"soft"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<String>,
    /// `"single"` or `"majority"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_acks: Option<String>,
    /// The recorded number of shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// The recorded number of replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// New split points (`shards - 1` of them, JSON form): the shard map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_points: Option<Vec<serde_json::Value>>,
    /// Which servers hold each shard (`reconfigure` of a replicated catalog's table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<ShardPlacement>>,
}

/// The new shards of a replicated table being resharded (`BeginReshard`;
/// docs/clustering.md, "Resharding").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReshardDef {
    /// The generation of the new shards (the table's plus one): their groups and
    /// storage are apart from the old ones' (`crate::groups::slot_of`).
    pub generation: u64,
    /// The recorded number of replicas afterwards.
    pub replicas: u32,
    /// Where the new shards are cut (JSON form).
    pub split_points: Vec<serde_json::Value>,
    /// Which servers hold each new shard.
    pub placement: Vec<ShardPlacement>,
}

/// A secondary index definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexDefSpec {
    /// The index function as a FUNC term in RethinkDB's JSON wire form.
    pub function: serde_json::Value,
    /// One entry per element of an array value.
    pub multi: bool,
    /// A geospatial index.
    pub geo: bool,
}

impl From<&reql::IndexSpec> for IndexDefSpec {
    fn from(s: &reql::IndexSpec) -> Self {
        IndexDefSpec {
            function: s.function.clone(),
            multi: s.multi,
            geo: s.geo,
        }
    }
}

impl From<&IndexDefSpec> for reql::IndexSpec {
    fn from(s: &IndexDefSpec) -> Self {
        reql::IndexSpec {
            function: s.function.clone(),
            multi: s.multi,
            geo: s.geo,
        }
    }
}

/// A user's SCRAM-SHA-256 material (base64), never the password.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    /// PBKDF2 salt.
    pub salt: String,
    /// PBKDF2 iteration count.
    pub iterations: u32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: String,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: String,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl From<&ScramCredentials> for Credentials {
    fn from(c: &ScramCredentials) -> Self {
        Credentials {
            salt: b64().encode(&c.salt),
            iterations: c.iterations,
            stored_key: b64().encode(c.stored_key),
            server_key: b64().encode(c.server_key),
        }
    }
}

impl Credentials {
    /// The SCRAM material, or `None` when a field is not valid base64 of the right size.
    pub fn to_scram(&self) -> Option<ScramCredentials> {
        Some(ScramCredentials {
            salt: b64().decode(&self.salt).ok()?,
            iterations: self.iterations,
            stored_key: b64().decode(&self.stored_key).ok()?.try_into().ok()?,
            server_key: b64().decode(&self.server_key).ok()?.try_into().ok()?,
        })
    }
}

/// One change to the catalog. Tables and indexes are named by id where they have one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CatalogCommand {
    /// Creates database `name` with `id`.
    CreateDb {
        /// The new database's id.
        id: String,
        /// Its name.
        name: String,
    },
    /// Drops a database and every table in it.
    DropDb {
        /// The database's id.
        id: String,
    },
    /// Renames a database (its tables follow).
    RenameDb {
        /// The database's id.
        id: String,
        /// The new name.
        name: String,
    },
    /// Creates a table with no indexes and no write hook.
    CreateTable {
        /// The table.
        table: TableDef,
    },
    /// Drops a table.
    DropTable {
        /// The table's id.
        id: String,
    },
    /// Renames, moves, or reconfigures a table (durability, shards, split points).
    AlterTable {
        /// The table's id.
        id: String,
        /// What changes.
        changes: TableChanges,
    },
    /// Records the new shards of a replicated table to reshard: every server opens
    /// their groups (empty) next to the old ones, which keep serving the table.
    BeginReshard {
        /// The table's id.
        id: String,
        /// The new shards.
        reshard: ReshardDef,
    },
    /// Switches a table being resharded to its new shards (their data copied); every
    /// server drops its copies of the old ones.
    FinishReshard {
        /// The table's id.
        id: String,
        /// The generation of the new shards.
        generation: u64,
    },
    /// Abandons a table's resharding under way, refused once it finished (and a
    /// `FinishReshard` of it is refused from then on): every server drops its copies of
    /// the new shards; the old ones, which still serve the table, are unfrozen next.
    AbortReshard {
        /// The table's id.
        id: String,
        /// The generation of the abandoned new shards.
        generation: u64,
    },
    /// Records that the old shards of a table whose resharding was abandoned
    /// (`AbortReshard`) are unfrozen: a new resharding may begin.
    FinishAbort {
        /// The table's id.
        id: String,
        /// The generation of the abandoned new shards.
        generation: u64,
    },
    /// Adds an index definition, not ready until `IndexReady`.
    CreateIndex {
        /// The table's id.
        table: String,
        /// The new index's id (it names the index's storage space).
        index: String,
        /// Its name.
        name: String,
        /// Its definition.
        spec: IndexDefSpec,
    },
    /// Removes an index definition.
    DropIndex {
        /// The table's id.
        table: String,
        /// The index's name.
        name: String,
    },
    /// Renames an index, replacing index `new` when `overwrite`.
    RenameIndex {
        /// The table's id.
        table: String,
        /// The current name.
        old: String,
        /// The new name.
        new: String,
        /// Whether an index named `new` may be replaced.
        overwrite: bool,
    },
    /// Records that an index finished building.
    IndexReady {
        /// The table's id.
        table: String,
        /// The index's id.
        index: String,
    },
    /// Sets (or with `None` removes) a table's write hook.
    SetWriteHook {
        /// The table's id.
        table: String,
        /// The hook function as a FUNC term in RethinkDB's JSON wire form.
        function: Option<serde_json::Value>,
    },
    /// Creates a user or replaces its credentials (its permissions are kept).
    PutUser {
        /// The user's name.
        name: String,
        /// Its SCRAM material.
        credentials: Credentials,
        /// Whether a (non-empty) password was set.
        has_password: bool,
    },
    /// Deletes a user.
    DeleteUser {
        /// The user's name.
        name: String,
    },
    /// Replaces a user's permissions at one scope (`Perms::default()` clears it).
    SetPermissions {
        /// The user's name.
        user: String,
        /// Where the permissions apply.
        scope: Scope,
        /// The new permissions.
        perms: Perms,
    },
}

impl CatalogCommand {
    /// The serialised form (JSON).
    pub fn to_json(&self) -> String {
        // Every field is a string, number, bool or JSON value: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the serialised form.
    pub fn from_json(s: &str) -> Result<CatalogCommand, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    /// Whether the command changes users or permissions (the `users` space).
    pub fn is_user_command(&self) -> bool {
        matches!(
            self,
            CatalogCommand::PutUser { .. }
                | CatalogCommand::DeleteUser { .. }
                | CatalogCommand::SetPermissions { .. }
        )
    }
}
