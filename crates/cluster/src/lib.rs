//! `cluster` implements `reql::TableAccess`: the catalog of databases and tables, and the
//! routing of each table to its shard. Today a table is one shard on this server; the
//! shard map is where replication and many servers will plug in.
//!
//! The catalog lives in the storage space `catalog` next to a format version record,
//! checked at start-up (`docs/storage-format.md`), and the users in the space `users`.
//! Every change to either (databases, tables, index definitions, write hooks, split
//! points, users, permissions) is a `CatalogCommand` applied by one writer,
//! `catalog::Catalog`, under one lock, persisted (fsync) before it is acknowledged.
//! The same commands replicate the catalog on Raft ([`replicated`]: the catalog as a
//! `replication::StateMachine`, and `Cluster::open_replicated`, a node following it);
//! the server does not use that yet. [`placement`] chooses the servers of each shard's
//! replicas (RethinkDB's `table_generate_config`); `table_create` and `reconfigure`
//! check their options through it.

mod access;
pub mod auth;
mod catalog;
#[cfg(test)]
mod fault_tests;
mod feeds;
#[cfg(test)]
mod format_tests;
pub mod groups;
mod index;
#[cfg(test)]
mod insert_chunk_tests;
pub mod moves;
pub mod placement;
pub mod replica;
mod reshard;
mod shards;
pub mod system;
mod table;
#[cfg(test)]
mod test_cluster;

pub use access::{denied, UserAccess};
pub use catalog::{
    CatalogCommand, Cluster, ClusterError, ClusterOptions, Credentials, IndexDefSpec, TableChanges,
    TableDef, FORMAT_VERSION,
};
/// The catalog replicated on Raft (`catalog::machine`): its state machine, the log
/// entries' encoding, and the hook through which a node follows it.
pub mod replicated {
    pub use crate::catalog::{
        catalog_route, decode_reply, encode_command, space_kinds, CatalogEffects, CatalogMachine,
        CatalogProposer, Outcome, RaftProposer, CATALOG_KIND, USERS_KIND, WIRE_VERSION,
    };
}
pub use table::TableHandle;
