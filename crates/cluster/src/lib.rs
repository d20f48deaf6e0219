//! `cluster` implements `reql::TableAccess`: the catalog of databases and tables, and the
//! routing of each table to its shard. Today a table is one shard on this server; the
//! shard map is where replication and many servers will plug in.
//!
//! The catalog lives in the storage space `catalog` next to a format version record,
//! checked at start-up (`docs/storage-format.md`). Catalog changes are applied and
//! persisted (fsync) before they are acknowledged.

mod access;
pub mod auth;
mod catalog;
#[cfg(test)]
mod fault_tests;
mod feeds;
#[cfg(test)]
mod format_tests;
mod index;
mod shards;
pub mod system;
mod table;

pub use access::{denied, UserAccess};
pub use catalog::{Cluster, ClusterError, ClusterOptions, FORMAT_VERSION};
pub use table::TableHandle;
