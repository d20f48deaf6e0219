//! Ponder's openraft type configuration and the ids it uses.
//!
//! A log entry's application payload is opaque bytes ([`Command`]): the layer above
//! (write operations, catalog commands) encodes it and its [`crate::StateMachine`]
//! decodes it, so this crate depends on neither. Nodes are `u64` ids with a network
//! address ([`openraft::BasicNode`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A node's id in every Raft group it belongs to (the server's id).
pub type NodeId = u64;

/// A node's address as peers reach it: `host:port` of its cluster port.
pub type Node = openraft::BasicNode;

/// Identifies one Raft group (a shard's replicas, or the catalog) among those that
/// share a peer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupId(pub u64);

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "g{}", self.0)
    }
}

/// One application command carried by a log entry: bytes the higher layer encoded.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command(pub Vec<u8>);

/// What applying a [`Command`] answered (bytes the higher layer decodes). Blank and
/// membership entries answer an empty reply.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply(pub Vec<u8>);

// Bytes can be long: the debug forms print sizes, not contents.
impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Command({} bytes)", self.0.len())
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reply({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// Ponder's Raft types: opaque commands and replies, `u64` node ids, snapshots
    /// streamed in chunks ([`crate::SnapshotData`]).
    pub TypeConfig:
        D = Command,
        R = Reply,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot::SnapshotData,
        AsyncRuntime = crate::runtime::Runtime,
);

/// A Raft node of Ponder's type configuration.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (leader term and node, index).
pub type LogId = openraft::LogId<NodeId>;
/// A vote (term, node, committed).
pub type Vote = openraft::Vote<NodeId>;
/// A membership as recorded with the log id of the entry that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// openraft's storage error for this configuration.
pub type RaftStorageError = openraft::StorageError<NodeId>;
