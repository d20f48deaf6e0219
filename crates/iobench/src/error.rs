//! Typed errors of `ponder-iobench`.
//!
//! Every failure a user can cause (a bad workload line, a missing file, a
//! refused flag) is a variant here with a message that says what to do; the
//! binary prints it and exits non-zero. Nothing on the user's input path
//! panics.

use std::path::PathBuf;

/// Everything that can go wrong while parsing, preparing or running a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A workload line (or command-line workload) could not be parsed.
    #[error("workload {line:?}: {message}")]
    Parse {
        /// The offending line, as given.
        line: String,
        /// What is wrong with it.
        message: String,
    },

    /// A parameter has a value that is well formed but not acceptable.
    #[error("bad parameter: {0}")]
    BadParameter(String),

    /// The target does not exist and no size was given to create it.
    #[error("target {0} does not exist: pass --size SIZE to create and fill it")]
    MissingTarget(PathBuf),

    /// The requested size does not fit on the target's file system or device.
    #[error(
        "size {requested} bytes is too large for {path}: only {available} bytes are available"
    )]
    SizeTooLarge {
        /// The target.
        path: PathBuf,
        /// Requested bytes.
        requested: u64,
        /// Bytes available (free space, or the device's size).
        available: u64,
    },

    /// A workload would write to a block device or to a file holding data.
    #[error(
        "refusing to write to {what} {path}: its contents would be overwritten; pass --destructive if that is intended"
    )]
    Destructive {
        /// "block device" or "non-empty file".
        what: &'static str,
        /// The target.
        path: PathBuf,
    },

    /// An open flag or I/O mode that the target's file system or the engine refuses.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// The kernel refused io_uring (too old, or disabled by a sandbox or sysctl).
    #[error("io_uring is not available on this machine: {0}")]
    UringUnavailable(String),

    /// An operating-system error with the operation and path it concerned.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("open", "pread", ...).
        op: &'static str,
        /// The target.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Writing the report or the plot failed.
    #[error("output: {0}")]
    Output(String),
}

impl Error {
    /// Builds an [`Error::Io`] from an operation name, a path and an `io::Error`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;
