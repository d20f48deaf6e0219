//! The crate's error types.

use crate::types::{LogId, NodeId, RaftStorageError};

/// A record or message that could not be encoded or decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("codec error: {0}")]
pub struct CodecError(pub String);

/// Errors of the replication layer's own operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicationError {
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
    /// A stored record is unreadable.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A snapshot chunk names a space the state machine does not have.
    #[error("snapshot chunk names space #{0}, the state machine has fewer spaces")]
    UnknownSnapshotSpace(u16),
    /// A key is too long to be staged with its space prefix.
    #[error("snapshot key of {0} bytes is too long to stage")]
    SnapshotKeyTooLong(usize),
    /// The durability task could not be run.
    #[error("the fsync task failed: {0}")]
    FlushTask(String),
}

impl ReplicationError {
    /// The error as openraft's storage error (openraft stops the node on it: a
    /// storage failure must not be papered over).
    pub(crate) fn write(self) -> RaftStorageError {
        openraft::StorageIOError::write(openraft::AnyError::new(&self)).into()
    }
    pub(crate) fn read(self) -> RaftStorageError {
        openraft::StorageIOError::read(openraft::AnyError::new(&self)).into()
    }
    pub(crate) fn write_logs(self) -> RaftStorageError {
        openraft::StorageIOError::write_logs(openraft::AnyError::new(&self)).into()
    }
    pub(crate) fn read_logs(self) -> RaftStorageError {
        openraft::StorageIOError::read_logs(openraft::AnyError::new(&self)).into()
    }
    pub(crate) fn apply(self, log_id: LogId) -> RaftStorageError {
        openraft::StorageIOError::<NodeId>::apply(log_id, openraft::AnyError::new(&self)).into()
    }
}

/// Errors of the peer transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The connection failed or was closed.
    #[error("transport I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A frame's length exceeds [`crate::codec::MAX_FRAME_BYTES`].
    #[error("frame of {0} bytes exceeds the limit")]
    FrameTooLarge(usize),
    /// A message could not be encoded or decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// No answer within the deadline.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The peer closed the connection before answering.
    #[error("the peer closed the connection before answering")]
    Closed,
    /// The peer answered with a message of the wrong kind.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// The peer could not serve the request (unknown group, node shutting down, ...).
    #[error("the peer refused: {0}")]
    Remote(String),
    /// The TLS handshake with the peer failed (no certificate, one not signed by the
    /// cluster CA, plain TCP at one end, ...).
    #[error("TLS handshake with the peer failed: {0}")]
    Tls(std::io::Error),
    /// The hello exchange refused the peer (or the peer refused this server).
    #[error(transparent)]
    Hello(#[from] crate::hello::HelloError),
}

impl TransportError {
    /// Whether the request may have reached the peer. [`crate::TcpTransport`] fails
    /// with `Closed` (or a wrong answer, `Unexpected`) only after the connection was
    /// made, and with the other kinds only before a frame was sent (connecting, TLS,
    /// hello, encoding, a refusal): a caller forwarding a write must treat the first
    /// as an unknown outcome and may retry after the second.
    pub fn maybe_delivered(&self) -> bool {
        matches!(self, TransportError::Closed | TransportError::Unexpected(_))
    }
}
