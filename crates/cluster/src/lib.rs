//! `cluster` implements `reql::TableAccess`: the catalog of databases and tables, and the
//! routing of each table to its shard. Today a table is one shard on this server; the
//! shard map is where replication and many servers will plug in.
//!
//! The catalog lives in the storage space `catalog` next to a format version record,
//! checked at start-up (`docs/storage-format.md`), and the users in the space `users`.
//! Every change to either (databases, tables, index definitions, write hooks, split
//! points, users, permissions) is a `CatalogCommand` applied by one writer,
//! `catalog::Catalog`, under one lock, persisted (fsync) before it is acknowledged.

mod access;
pub mod auth;
mod catalog;
#[cfg(test)]
mod fault_tests;
mod feeds;
#[cfg(test)]
mod format_tests;
mod index;
pub mod replica;
mod shards;
pub mod system;
mod table;

pub use access::{denied, UserAccess};
pub use catalog::{
    CatalogCommand, Cluster, ClusterError, ClusterOptions, Credentials, IndexDefSpec, TableChanges,
    TableDef, FORMAT_VERSION,
};
pub use table::TableHandle;
