//! The receiving side of the transport: [`Router`] hands each incoming request to its
//! group's Raft node, and assembles streamed snapshots.
//!
//! A connection carries frames (`codec`) of `(request id, GroupId, target NodeId,
//! RaftRequest)` one way and `(request id, RaftResponse)` the other ([`Router::serve`]).
//!
//! A Raft message is delivered only to the member it was addressed to
//! ([`Router::handle_for`]): a server whose replica of a group was dropped and made
//! again holds a new member under a new node id (one per incarnation), and a message
//! meant for the old one must not be answered by the new, empty one, or a leader would
//! count the new member's acknowledgements as the old member's.
//!
//! Invariants: at most one snapshot is being received per group (the first piece of a
//! new stream abandons the previous one, whose staged spaces are dropped); a snapshot is
//! installed only if every piece of its stream arrived, in order, exactly once; no lock
//! is held across an `.await`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use openraft::Snapshot;
use parking_lot::{Mutex, RwLock};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, Semaphore};

use crate::client::{serve_client, ClientService};
use crate::codec::{decode_message, encode_message, read_frame, write_frame};
use crate::error::TransportError;
use crate::fence::Proposer;
use crate::network::{RaftRequest, RaftResponse};
use crate::snapshot::SnapshotData;
use crate::types::{GroupId, NodeId, Raft};

/// Requests of one connection handled at once (bounds a connection's memory).
pub const MAX_IN_FLIGHT: usize = 64;

/// A snapshot being received: its stream id, the next piece expected, and the data.
struct Reception {
    stream: u64,
    next_seq: u64,
    data: Box<SnapshotData>,
}

/// What a node serves beside Raft on its cluster port (membership: who is in the
/// cluster, server info, heartbeats): one request's bytes in, the answer's bytes out.
pub trait Service: Send + Sync + 'static {
    /// Answers one request (a malformed one gets an answer saying so, not a panic).
    fn handle(&self, request: Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send>>;
}

/// Routes incoming Raft requests to the local members of their groups.
#[derive(Default)]
pub struct Router {
    /// Each group's member here, behind its proposer: forwarded client proposals pass
    /// the fence of the member's leader transfers.
    groups: RwLock<HashMap<GroupId, Proposer>>,
    receptions: Mutex<HashMap<GroupId, Reception>>,
    clients: RwLock<HashMap<GroupId, Arc<ClientService>>>,
    service: RwLock<Option<Arc<dyn Service>>>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `group` with `raft` from now on (replacing an earlier node of the group),
    /// with a proposer of its own: for a member that is never asked to transfer its
    /// leadership. A member with a proposer (every `Host` member) uses [`Router::add_member`].
    pub fn add_group(&self, group: GroupId, raft: Raft) {
        self.add_member(group, Proposer::new(raft));
    }

    /// Serves `group` with the member behind `proposer` from now on (replacing an
    /// earlier node of the group). Forwarded proposals go through `proposer`, so a leader
    /// transfer's fence turns them away too (else the leader's log would grow under the
    /// transfer and the target, one entry short, could not be elected).
    pub fn add_member(&self, group: GroupId, proposer: Proposer) {
        self.groups.write().insert(group, proposer);
    }

    /// Serves client requests ([`RaftRequest::Client`]) of `group` with `service`
    /// (without one they are refused).
    pub fn add_client(&self, group: GroupId, service: ClientService) {
        self.clients.write().insert(group, Arc::new(service));
    }

    /// Stops serving `group`; returns its node.
    pub fn remove_group(&self, group: GroupId) -> Option<Raft> {
        self.receptions.lock().remove(&group);
        self.clients.write().remove(&group);
        self.groups.write().remove(&group).map(|p| p.raft().clone())
    }

    /// Hands [`RaftRequest::Service`] requests to `service` from now on.
    pub fn set_service(&self, service: Arc<dyn Service>) {
        *self.service.write() = Some(service);
    }

    /// Answers one request for `group` addressed to node `target` (0: to whichever
    /// member is here). A Raft message for another node than this server's member of
    /// the group is refused: that member is another incarnation.
    pub async fn handle_for(
        &self,
        group: GroupId,
        target: NodeId,
        request: RaftRequest,
    ) -> RaftResponse {
        let raft_message = !matches!(request, RaftRequest::Client(_) | RaftRequest::Service(_));
        if target != 0 && raft_message {
            let here = self
                .groups
                .read()
                .get(&group)
                .map(|p| p.raft().metrics().borrow().id);
            if let Some(id) = here.filter(|id| *id != target) {
                return RaftResponse::Refused(format!(
                    "group {group}: node {target} is not here (this member is node {id})"
                ));
            }
        }
        self.handle(group, request).await
    }

    /// Answers one request for `group`, whatever node it was addressed to.
    pub async fn handle(&self, group: GroupId, request: RaftRequest) -> RaftResponse {
        if let RaftRequest::Service(body) = request {
            let service = self.service.read().clone();
            return match service {
                Some(s) => RaftResponse::Service(s.handle(body).await),
                None => RaftResponse::Refused("no service on this node".into()),
            };
        }
        let Some(proposer) = self.groups.read().get(&group).cloned() else {
            return RaftResponse::Refused(format!("no member of group {group} here"));
        };
        let raft = proposer.raft().clone();
        match request {
            RaftRequest::Client(request) => {
                let Some(service) = self.clients.read().get(&group).cloned() else {
                    return RaftResponse::Refused(format!("no client service of group {group}"));
                };
                RaftResponse::Client(serve_client(&proposer, &service, request).await)
            }
            RaftRequest::AppendEntries(rpc) => match raft.append_entries(rpc).await {
                Ok(r) => RaftResponse::AppendEntries(r),
                Err(e) => RaftResponse::Refused(e.to_string()),
            },
            RaftRequest::Vote(rpc) => match raft.vote(rpc).await {
                Ok(r) => RaftResponse::Vote(r),
                Err(e) => RaftResponse::Refused(e.to_string()),
            },
            RaftRequest::SnapshotChunk { stream, seq, chunk } => {
                let mut reception = match self.reception(group, stream, seq, &raft).await {
                    Ok(r) => r,
                    Err(why) => return RaftResponse::Refused(why),
                };
                let written = match &mut *reception.data {
                    SnapshotData::Staged(staged) => staged.write_chunk(&chunk),
                    SnapshotData::View(_) => {
                        return RaftResponse::Refused("snapshot reception is a view".into())
                    }
                };
                match written {
                    Ok(()) => {
                        reception.next_seq += 1;
                        self.receptions.lock().insert(group, reception);
                        RaftResponse::ChunkStored
                    }
                    Err(e) => RaftResponse::Refused(format!("storing a snapshot chunk: {e}")),
                }
            }
            RaftRequest::SnapshotDone {
                stream,
                chunks,
                vote,
                meta,
            } => {
                // `chunks` is where the next piece would be: the reception must be there.
                let reception = match self.reception(group, stream, chunks, &raft).await {
                    Ok(r) => r,
                    Err(why) => return RaftResponse::Refused(why),
                };
                let snapshot = Snapshot {
                    meta,
                    snapshot: reception.data,
                };
                match raft.install_full_snapshot(vote, snapshot).await {
                    Ok(r) => RaftResponse::Snapshot(r),
                    Err(e) => RaftResponse::Refused(e.to_string()),
                }
            }
            RaftRequest::TimeoutNow { vote, last_log_id } => {
                crate::transfer::timeout_now(&raft, vote, last_log_id).await
            }
            RaftRequest::Service(_) => RaftResponse::Refused("handled above".into()),
        }
    }

    /// Takes the reception of `stream` for `group` if it expects piece `seq` next; piece
    /// 0 starts a new reception, abandoning any other. Anything else is refused (and the
    /// reception is abandoned: the sender starts over with a new stream).
    async fn reception(
        &self,
        group: GroupId,
        stream: u64,
        seq: u64,
        raft: &Raft,
    ) -> Result<Reception, String> {
        let current = self.receptions.lock().remove(&group);
        match current {
            Some(r) if r.stream == stream && r.next_seq == seq => Ok(r),
            _ if seq == 0 => {
                let data = raft
                    .begin_receiving_snapshot()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Reception {
                    stream,
                    next_seq: 0,
                    data,
                })
            }
            _ => Err(format!(
                "snapshot piece {seq} of stream {stream:x} does not follow what was received"
            )),
        }
    }

    /// Serves one connection until the peer closes it: requests (`(id, group, target,
    /// request)` frames) are handled concurrently, at most [`MAX_IN_FLIGHT`] at a time,
    /// and answered as `(id, response)` frames in the order they finish. A malformed
    /// frame ends the connection.
    pub async fn serve<S>(self: Arc<Self>, conn: S) -> Result<(), TransportError>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut rd, mut wr) = tokio::io::split(conn);
        let (answers, mut queue) = mpsc::channel::<Vec<u8>>(MAX_IN_FLIGHT);
        let writer = tokio::spawn(async move {
            while let Some(body) = queue.recv().await {
                write_frame(&mut wr, &body).await?;
            }
            Ok::<(), TransportError>(())
        });
        let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let read = async {
            while let Some(body) = read_frame(&mut rd).await? {
                let (id, group, target, request): (u64, GroupId, NodeId, RaftRequest) =
                    decode_message(&body)?;
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                let (router, answers) = (self.clone(), answers.clone());
                tokio::spawn(async move {
                    let response = router.handle_for(group, target, request).await;
                    if let Ok(body) = encode_message(&(id, response)) {
                        let _ = answers.send(body).await;
                    }
                    drop(permit);
                });
            }
            Ok::<(), TransportError>(())
        };
        let read = read.await;
        drop(answers);
        // Answers still being computed are written before the connection closes.
        let written = writer
            .await
            .map_err(|e| TransportError::Unexpected(format!("writer task: {e}")))?;
        read.and(written)
    }
}

/// Sends one request over `conn` (served by [`Router::serve`]) and reads its answer:
/// one call at a time on a connection (the simulation's transport; [`crate::TcpTransport`]
/// multiplexes).
pub async fn call_on<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
    group: GroupId,
    target: NodeId,
    request: &RaftRequest,
) -> Result<RaftResponse, TransportError> {
    write_frame(conn, &encode_message(&(0u64, group, target, request))?).await?;
    let body = read_frame(conn).await?.ok_or(TransportError::Closed)?;
    let (_, answer): (u64, RaftResponse) = decode_message(&body)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::write_frame;
    use crate::types::Vote;
    use openraft::raft::VoteRequest;
    use rand::{Rng, SeedableRng};

    fn vote_request() -> RaftRequest {
        RaftRequest::Vote(VoteRequest::new(Vote::new(1, 1), None))
    }

    #[tokio::test]
    async fn an_unknown_group_is_refused_not_dropped() {
        let router = Arc::new(Router::new());
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn(router.clone().serve(server));
        let answer = call_on(&mut client, GroupId(9), 0, &vote_request())
            .await
            .unwrap();
        assert!(matches!(answer, RaftResponse::Refused(why) if why.contains("g9")));
        drop(client);
        serving.await.unwrap().unwrap();
    }

    struct Reverse;

    impl Service for Reverse {
        fn handle(&self, mut request: Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send>> {
            Box::pin(async move {
                request.reverse();
                request
            })
        }
    }

    #[tokio::test]
    async fn service_requests_reach_the_service_whatever_the_group() {
        let router = Arc::new(Router::new());
        let ask = RaftRequest::Service(vec![1, 2, 3]);
        assert!(matches!(
            router.handle(GroupId(4), ask).await,
            RaftResponse::Refused(_)
        ));
        router.set_service(Arc::new(Reverse));
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn(router.serve(server));
        let answer = call_on(
            &mut client,
            GroupId(4),
            7,
            &RaftRequest::Service(vec![1, 2, 3]),
        )
        .await
        .unwrap();
        assert!(matches!(answer, RaftResponse::Service(b) if b == vec![3, 2, 1]));
        drop(client);
        serving.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_malformed_frame_ends_the_connection_with_an_error() {
        let router = Arc::new(Router::new());
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn(router.serve(server));
        write_frame(&mut client, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x07")
            .await
            .unwrap();
        assert!(serving.await.unwrap().is_err());
    }

    /// A transport for a node that never calls out.
    struct Nowhere;

    impl crate::network::Transport for Nowhere {
        async fn call(
            &self,
            _: crate::types::NodeId,
            _: &crate::types::Node,
            _: GroupId,
            _: RaftRequest,
        ) -> Result<RaftResponse, TransportError> {
            Err(TransportError::Closed)
        }
    }

    #[tokio::test]
    async fn snapshot_pieces_out_of_order_are_refused() {
        use crate::kv::KvMachine;
        use crate::snapshot::{Chunk, Record};
        use crate::{Durability, LogStore, Network, StateMachineStore};
        let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let log = LogStore::open(engine.clone(), "g", Durability::Inline).unwrap();
        let sm = StateMachineStore::open(
            engine.clone(),
            "g",
            KvMachine::default(),
            Durability::Inline,
        )
        .unwrap();
        let config = Arc::new(openraft::Config::default().validate().unwrap());
        let network = Network::new(Arc::new(Nowhere), GroupId(1));
        let raft = Raft::new(1, config, network, log, sm).await.unwrap();
        let router = Router::new();
        router.add_group(GroupId(1), raft.clone());
        let chunk = |seq| RaftRequest::SnapshotChunk {
            stream: 5,
            seq,
            chunk: Chunk {
                records: vec![Record {
                    space: 0,
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                }],
            },
        };
        let stored = |r: &RaftResponse| matches!(r, RaftResponse::ChunkStored);
        // Addressed to another incarnation than this member (node 1): refused.
        let other = router.handle_for(GroupId(1), 2, chunk(0)).await;
        assert!(matches!(other, RaftResponse::Refused(why) if why.contains("node 2")));
        assert!(!stored(&router.handle_for(GroupId(1), 1, chunk(1)).await));
        assert!(stored(&router.handle(GroupId(1), chunk(0)).await));
        assert!(stored(&router.handle(GroupId(1), chunk(1)).await));
        // A gap abandons the stream: its next pieces and its end are refused too.
        assert!(!stored(&router.handle(GroupId(1), chunk(3)).await));
        assert!(!stored(&router.handle(GroupId(1), chunk(2)).await));
        let done = RaftRequest::SnapshotDone {
            stream: 5,
            chunks: 2,
            vote: Vote::new_committed(1, 1),
            meta: Default::default(),
        };
        assert!(matches!(
            router.handle(GroupId(1), done).await,
            RaftResponse::Refused(_)
        ));
        raft.shutdown().await.unwrap();
    }

    #[test]
    fn random_bytes_never_panic_the_decoders() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        let valid = encode_message(&(7u64, GroupId(3), vote_request())).unwrap();
        for _ in 0..20_000 {
            let mut bytes = valid.clone();
            // Mutate a valid message, or make one from nothing.
            if rng.gen_bool(0.5) {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..bytes.len());
                    bytes[i] = rng.gen();
                }
            } else {
                bytes = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
            }
            let _ = decode_message::<(u64, GroupId, RaftRequest)>(&bytes);
            let _ = decode_message::<(u64, RaftResponse)>(&bytes);
        }
    }
}
