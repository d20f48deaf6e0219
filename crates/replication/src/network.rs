//! The peer transport seam ([`Transport`]) and openraft's network over it.
//!
//! A transport carries one request of a group to a peer and brings back the answer;
//! it knows nothing of Raft. [`Network`] (openraft's `RaftNetworkFactory`) turns
//! openraft's RPCs into [`RaftRequest`]s, and streams snapshots as a sequence of
//! [`RaftRequest::SnapshotChunk`] calls closed by [`RaftRequest::SnapshotDone`], so no
//! message holds a whole snapshot. The receiving side is [`crate::Router`].
//!
//! Every transport failure is an `Unreachable` to openraft, which then backs off and
//! retries: a peer's answer is never trusted to have arrived.

use std::future::Future;
use std::sync::Arc;

use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::TransportError;
use crate::snapshot::{Chunk, SnapshotData, DEFAULT_CHUNK_BYTES};
use crate::types::{GroupId, LogId, Node, NodeId, SnapshotMeta, TypeConfig, Vote};

/// A Raft message from one member of a group to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRequest {
    /// Log replication and heartbeats.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// An election.
    Vote(VoteRequest<NodeId>),
    /// Piece number `seq` of the snapshot `stream`. Piece 0 starts the stream (and
    /// abandons any other of the group); a piece out of order is refused.
    SnapshotChunk {
        /// The sender's random id for this snapshot transfer.
        stream: u64,
        /// The piece's number, from 0.
        seq: u64,
        /// The records.
        chunk: Chunk,
    },
    /// The end of snapshot `stream`, after `chunks` pieces: install it.
    SnapshotDone {
        /// The sender's random id for this snapshot transfer.
        stream: u64,
        /// How many pieces were sent (the receiver checks it got exactly those).
        chunks: u64,
        /// The leader's vote.
        vote: Vote,
        /// The snapshot's metadata.
        meta: SnapshotMeta,
    },
    /// A leader handing leadership over (`crate::transfer`): the receiver starts an
    /// election at once if it still follows the leader of `vote` and its log reaches
    /// `last_log_id` (the leader's last entry); otherwise it refuses.
    TimeoutNow {
        /// The sending leader's vote (a delayed request of an earlier term is refused).
        vote: Vote,
        /// The leader's last log id, which the receiver must hold.
        last_log_id: Option<LogId>,
    },
    /// A client's proposal or read for the group's leader (`client`).
    Client(crate::client::ClientRequest),
    /// Not Raft: a request for the node's [`crate::Service`] (cluster membership),
    /// whatever the group; its bytes are the service's to decode.
    Service(Vec<u8>),
}

/// The answer to a [`RaftRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftResponse {
    /// Answers [`RaftRequest::AppendEntries`].
    AppendEntries(AppendEntriesResponse<NodeId>),
    /// Answers [`RaftRequest::Vote`].
    Vote(VoteResponse<NodeId>),
    /// Acknowledges a [`RaftRequest::SnapshotChunk`].
    ChunkStored,
    /// Answers [`RaftRequest::SnapshotDone`].
    Snapshot(SnapshotResponse<NodeId>),
    /// Answers [`RaftRequest::TimeoutNow`]: the receiver has started an election.
    ElectionStarted,
    /// The peer could not serve the request (no such group, shutting down, storage
    /// failure); the text says why.
    Refused(String),
    /// Answers [`RaftRequest::Client`].
    Client(crate::client::ClientResponse),
    /// Answers [`RaftRequest::Service`].
    Service(Vec<u8>),
}

/// Carries a group's request to a peer and returns its answer.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request` for `group` to node `target` (reachable at `node.addr`).
    fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> impl Future<Output = Result<RaftResponse, TransportError>> + Send;
}

/// openraft's network factory for one group over a [`Transport`].
pub struct Network<T: Transport> {
    transport: Arc<T>,
    group: GroupId,
    chunk_bytes: usize,
}

impl<T: Transport> Network<T> {
    /// The network of `group` over `transport`.
    pub fn new(transport: Arc<T>, group: GroupId) -> Self {
        Self {
            transport,
            group,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
        }
    }

    /// Sets the bound on a snapshot chunk's bytes.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(1);
        self
    }
}

impl<T: Transport> RaftNetworkFactory<TypeConfig> for Network<T> {
    type Network = Peer<T>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        Peer {
            transport: self.transport.clone(),
            group: self.group,
            target,
            node: node.clone(),
            chunk_bytes: self.chunk_bytes,
        }
    }
}

/// One peer of a group, as openraft's `RaftNetwork`.
pub struct Peer<T: Transport> {
    transport: Arc<T>,
    group: GroupId,
    target: NodeId,
    node: Node,
    chunk_bytes: usize,
}

impl<T: Transport> Peer<T> {
    async fn call(
        &self,
        request: RaftRequest,
        option: &RPCOption,
    ) -> Result<RaftResponse, TransportError> {
        let ttl = option.hard_ttl();
        let call = self
            .transport
            .call(self.target, &self.node, self.group, request);
        match tokio::time::timeout(ttl, call).await {
            Ok(r) => r,
            Err(_) => Err(TransportError::Timeout(ttl)),
        }
    }

    async fn send_snapshot(
        &self,
        vote: Vote,
        meta: SnapshotMeta,
        data: SnapshotData,
        option: &RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, TransportError> {
        let SnapshotData::View(view) = data else {
            return Err(TransportError::Unexpected(
                "a snapshot being received cannot be sent".into(),
            ));
        };
        // Random, so that a stream of a restarted sender never continues one that an
        // earlier incarnation left half-sent (the RNG is seeded only in simulation).
        let stream: u64 = crate::runtime::ThreadRng.gen();
        let mut chunks = view.chunks(self.chunk_bytes);
        let mut seq = 0;
        while let Some(chunk) = chunks
            .next_chunk()
            .map_err(|e| TransportError::Unexpected(format!("reading the snapshot: {e}")))?
        {
            let request = RaftRequest::SnapshotChunk { stream, seq, chunk };
            match self.call(request, option).await? {
                RaftResponse::ChunkStored => seq += 1,
                other => return Err(unexpected(other)),
            }
        }
        match self
            .call(
                RaftRequest::SnapshotDone {
                    stream,
                    chunks: seq,
                    vote,
                    meta,
                },
                option,
            )
            .await?
        {
            RaftResponse::Snapshot(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(r: RaftResponse) -> TransportError {
    match r {
        RaftResponse::Refused(why) => TransportError::Remote(why),
        other => TransportError::Unexpected(format!("{other:?}")),
    }
}

/// openraft retries an unreachable peer after a back-off; the others it reports.
fn rpc_error<E: std::error::Error>(e: TransportError) -> RPCError<NodeId, Node, E> {
    match e {
        TransportError::Codec(_) | TransportError::Unexpected(_) => {
            RPCError::Network(NetworkError::new(&e))
        }
        _ => RPCError::Unreachable(Unreachable::new(&e)),
    }
}

impl<T: Transport> RaftNetwork<TypeConfig> for Peer<T> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self.call(RaftRequest::AppendEntries(rpc), &option).await {
            Ok(RaftResponse::AppendEntries(r)) => Ok(r),
            Ok(other) => Err(rpc_error(unexpected(other))),
            Err(e) => Err(rpc_error(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self.call(RaftRequest::Vote(rpc), &option).await {
            Ok(RaftResponse::Vote(r)) => Ok(r),
            Ok(other) => Err(rpc_error(unexpected(other))),
            Err(e) => Err(rpc_error(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let send = self.send_snapshot(vote, snapshot.meta, *snapshot.snapshot, &option);
        // Biased (tokio's select RNG is not seeded in simulation); the send is polled first.
        tokio::select! {
            biased;
            r = send => r.map_err(|e| match e {
                TransportError::Codec(_) | TransportError::Unexpected(_) => {
                    StreamingError::Network(NetworkError::new(&e))
                }
                _ => StreamingError::Unreachable(Unreachable::new(&e)),
            }),
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}
