//! Why a server could not start or stop cleanly.

use std::path::PathBuf;

/// Errors of starting, running and stopping a server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line value is invalid.
    #[error("{0}")]
    Argument(String),
    /// The data directory could not be created.
    #[error("cannot create data directory {}: {source}", path.display())]
    DataDirectory {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The storage engine could not be opened.
    #[error("cannot open storage: {0}")]
    Storage(#[from] storage::StorageError),
    /// The catalog could not be opened (or the directory has an unknown format).
    #[error("{0}")]
    Cluster(#[from] cluster::ClusterError),
    /// The TLS certificate or key could not be loaded.
    #[error("{0}")]
    Tls(String),
    /// The evaluation threads could not be started.
    #[error("cannot start evaluation threads: {0}")]
    EvalThreads(std::io::Error),
    /// The listener could not be bound or inspected.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address (`host:port`).
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The cluster identity (`server.json`) could not be read or written.
    #[error("{0}")]
    Membership(String),
    /// The task serving connections failed (it panicked).
    #[error("the server task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}
