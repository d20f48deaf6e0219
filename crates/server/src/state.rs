//! State shared by every connection of the server.

use std::sync::Arc;

use cluster::Cluster;

use crate::exec::Pool;

/// The server's shared state.
pub struct ServerState {
    /// Catalog and tables.
    pub cluster: Arc<Cluster>,
    /// This server's id (stable for the process).
    pub server_id: String,
    /// Threads that evaluate queries.
    pub pool: Arc<Pool>,
    /// Longest time a connection may take to finish its handshake (TLS included).
    pub handshake_timeout: std::time::Duration,
    /// The memory budget of each query, in bytes (`reql::memory`).
    pub query_memory: u64,
    /// Whether queries may be answered from indexes they do not name (`--no-optimizer`).
    pub optimizer: bool,
}
