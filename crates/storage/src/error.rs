//! The crate's error type.

/// Errors returned by every [`crate::Engine`] and [`crate::Snapshot`] operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// An operating-system I/O error.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Any other error reported by the underlying engine.
    #[error("storage engine error: {0}")]
    Engine(String),
    /// A previous write or fsync failed; the engine refuses further writes
    /// because durability can no longer be guaranteed. Restart to recover.
    #[error("the storage engine refuses writes after an earlier write/fsync failure (for example a full disk); reads still work; free space if needed and restart the server to resume writes")]
    Poisoned,
    /// The data directory's file system has less free space than the
    /// configured reserve; the write was refused before anything was written,
    /// and writes resume by themselves once space is freed.
    #[error("disk full: {available} bytes free in the data directory's file system, below the reserve of {reserve} bytes; writes are refused until space is freed (reads still work)")]
    DiskFull {
        /// Bytes available to this process.
        available: u64,
        /// The reserve that writes may not eat into.
        reserve: u64,
    },
    /// The named space does not exist (in the engine or in the snapshot).
    #[error("no such space: {0:?}")]
    NoSuchSpace(String),
    /// The space name is empty or longer than [`crate::MAX_SPACE_NAME_LEN`] bytes.
    #[error("invalid space name: {0:?}")]
    InvalidSpaceName(String),
    /// A key in a batch is empty or longer than [`crate::MAX_KEY_LEN`] bytes.
    #[error("invalid key of {len} bytes (must be 1..={max})", max = crate::MAX_KEY_LEN)]
    InvalidKey {
        /// Length of the offending key.
        len: usize,
    },
    /// A value in a batch is longer than [`crate::MAX_VALUE_LEN`] bytes.
    #[error("value of {len} bytes is too large")]
    ValueTooLarge {
        /// Length of the offending value.
        len: usize,
    },
    /// A failure injected by [`crate::Faulty`]; names the failed operation.
    #[error("injected failure in {0}")]
    Injected(&'static str),
}

impl From<fjall::Error> for StorageError {
    fn from(e: fjall::Error) -> Self {
        match e {
            fjall::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => Self::Io(
                std::io::Error::new(io.kind(), format!("disk full while writing: {io}")),
            ),
            fjall::Error::Io(io) => Self::Io(io),
            fjall::Error::Poisoned => Self::Poisoned,
            other => Self::Engine(other.to_string()),
        }
    }
}
