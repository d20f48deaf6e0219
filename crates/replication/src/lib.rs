//! `replication`: Raft groups on openraft for Ponder — the first layer of clustering.
//!
//! What is here, bottom up:
//! * [`TypeConfig`]: openraft's types for Ponder. Node ids are `u64`, a node is its
//!   address ([`Node`]); a log entry carries an opaque [`Command`] (bytes the layer above
//!   encodes: write operations, catalog commands) and applying it answers a [`Reply`].
//!   This crate depends on neither `reql` nor `cluster`.
//! * [`LogStore`]: the Raft log of a group on a `storage` engine (fjall or the in-memory
//!   engine): entries, vote, committed and purge marks, fsynced through
//!   [`storage::Engine::persist`] ([`Durability`]).
//! * [`StateMachine`]: the trait a higher layer implements (deterministic `apply` of a
//!   command through an [`ApplyCtx`]); [`StateMachineStore`] adapts it to openraft:
//!   applied position and membership kept atomically with the state, snapshots streamed
//!   in bounded chunks and installed by switching a generation of spaces
//!   ([`SnapshotData`]).
//! * [`Transport`]: the peer seam (one request of one group to one peer, one answer);
//!   [`Network`] is openraft's network over it (snapshots streamed as numbered chunk
//!   requests), [`Router`] the receiving side, [`TcpTransport`]/[`serve_tcp`] TCP with
//!   one connection per peer for every group, and [`call_on`] one call over any byte
//!   stream (the simulation's turmoil TCP). Beside Raft, a node's [`Service`] (the
//!   server's cluster membership) gets `RaftRequest::Service` requests on the same
//!   connections ([`Router::set_service`], [`TcpTransport::call_service`]).
//! * Client requests ([`ClientRequest`], `client`): a write proposed to, or a read run
//!   on, a group's leader by a server that is not the leader; the leader answers with
//!   [`serve_client`] (its own server calls it too), reads through the group's
//!   [`ReadService`].
//! * The cluster port's security: [`PeerConfig`] (given to both `TcpTransport` and
//!   `serve_tcp`): a [`ClusterId`] checked by a hello before any Raft frame (`hello`),
//!   and optionally [`ClusterTls`], TLS 1.3 with mutual authentication against the
//!   cluster's CA, built from three PEM files (`tls`; docs/clustering.md). A server
//!   without a cluster id learns it with a join hello ([`learn_cluster_id`]).
//! * [`Runtime`]: openraft's async runtime (tokio, with a seedable RNG for the election
//!   timeouts, so a simulation seed fixes them).
//! * [`Proposer`]: proposals to a group go through it ([`Proposer::propose`]), so that
//!   [`Proposer::transfer_leader`] (module `transfer`) can fence them while it hands the
//!   group's leadership to a chosen voter (openraft 0.9 has no leader transfer: fence,
//!   catch up, then a [`RaftRequest::TimeoutNow`] makes the target campaign).
//! * [`kv::KvMachine`]: a small key-value state machine, the test double.
//!
//! What is not here yet: Raft groups run by the server (it uses the transport for
//! membership only).
//!
//! Invariants that hold across the modules: a group's log and state machine share one
//! engine (one journal orders their writes; see `sm_store`); nothing that comes from the
//! network is unwrapped (a malformed message is an error value); a snapshot never sits
//! whole in memory.

#![warn(missing_docs)]

mod client;
pub mod codec;
mod durability;
mod error;
mod fence;
pub mod hello;
mod host;
pub mod kv;
mod log_store;
mod members;
mod network;
mod peer;
mod router;
mod runtime;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;
mod sm_store;
mod snapshot;
mod state_machine;
mod tcp;
pub mod testkit;
mod tls;
mod transfer;
mod types;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod transfer_tests;

pub use client::{
    leads_now, serve_client, ClientPolicy, ClientRequest, ClientResponse, ClientService, Progress,
    ReadService, ReadyWait,
};
pub use durability::Durability;
pub use error::{CodecError, ReplicationError, TransportError};
pub use fence::{ProposeError, Proposer};
pub use hello::{ClusterId, ClusterIdError, Greeting, HelloError};
pub use host::{
    drop_group_storage, member_id, node_id, same_server, seed, seed_range, Host, HostError, Member,
    NodeIdError, Resolve, Resolving,
};
pub use log_store::LogStore;
pub use members::{grow, next_voters, Grown};
pub use network::{Network, Peer, RaftRequest, RaftResponse, Transport};
pub use openraft;
pub use peer::{learn_cluster_id, PeerConfig, HANDSHAKE_TIMEOUT};
pub use router::MAX_IN_FLIGHT;
pub use router::{call_on, Router, Service};
pub use runtime::{seed_thread_rng, Runtime, ThreadRng};
pub use shared::SharedTransport;
pub use sm_store::{applied_log_id, state_spaces, SnapshotBuilder, StateMachineStore};
pub use snapshot::{
    Chunk, ChunkReader, Record, SnapshotData, SnapshotView, StagedSnapshot, DEFAULT_CHUNK_BYTES,
};
pub use state_machine::{ApplyCtx, StateMachine};
pub use tcp::{serve_tcp, TcpTransport, MAX_HANDSHAKES};
pub use tls::{ClusterTls, ClusterTlsError, SERVER_NAME};
pub use transfer::{Stage, TransferError, Transferred};
pub use types::{
    Command, Entry, GroupId, LogId, Node, NodeId, Raft, RaftStorageError, Reply, SnapshotMeta,
    StoredMembership, TypeConfig, Vote,
};
