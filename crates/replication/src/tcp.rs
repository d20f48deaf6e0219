//! The TCP transport: one connection per peer, shared by every group, requests
//! multiplexed by id and answered in any order.
//!
//! Frames are `codec` frames; a request's body is `(request id, GroupId, target NodeId,
//! RaftRequest)`, an answer's `(request id, RaftResponse)`. The server side is [`Router::serve`].
//!
//! Invariants: a frame is written whole by one writer task per connection (a caller
//! that gives up never leaves half a frame); a broken connection fails every call
//! waiting on it and is replaced by the next call; a caller that gives up (timeout)
//! removes its pending entry; a dropped transport closes its connections. Every connection is set up by `peer` first (TLS when the
//! [`PeerConfig`] has it, then the hello), so no frame is read from or sent to a peer
//! that is not a server of this cluster; at most [`MAX_HANDSHAKES`] accepted
//! connections are being set up at once (more are dropped), so strangers cannot pile up
//! tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::codec::{decode_message, encode_message, read_frame, write_frame};
use crate::error::TransportError;
use crate::network::{RaftRequest, RaftResponse, Transport};
use crate::peer::{self, PeerConfig, PeerStream};
use crate::router::Router;
use crate::types::{GroupId, Node, NodeId};

/// Frames queued for one connection's writer before callers wait.
const WRITE_QUEUE: usize = 256;

/// Accepted connections in TLS or hello at once; more are dropped unanswered.
pub const MAX_HANDSHAKES: usize = 64;

/// A peer's connection, if one was made; locked (asynchronously) while connecting.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<RaftResponse>>>>;

/// A live connection to one peer.
struct Conn {
    frames: mpsc::Sender<Vec<u8>>,
    waiting: Waiters,
    /// Cleared when either direction fails.
    alive: Arc<AtomicBool>,
}

/// The client side of the TCP transport (every group of this node shares it).
pub struct TcpTransport {
    /// One slot per peer address; the async lock is held only while connecting, so
    /// that concurrent callers share one connection.
    peers: Mutex<HashMap<String, Slot>>,
    next_id: AtomicU64,
    config: PeerConfig,
    connect_timeout: Duration,
}

impl TcpTransport {
    /// A transport that sets its connections up as `config` says (the same value the
    /// node's [`serve_tcp`] is given); a connection attempt (TCP, TLS and hello) gives
    /// up after `connect_timeout`.
    pub fn new(config: PeerConfig, connect_timeout: Duration) -> Self {
        Self {
            peers: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            config,
            connect_timeout,
        }
    }

    /// The number of live peer connections.
    pub fn connection_count(&self) -> usize {
        let slots: Vec<_> = self.peers.lock().values().cloned().collect();
        slots
            .iter()
            .filter(|s| {
                s.try_lock()
                    .map(|c| c.as_ref().is_some_and(|c| c.alive.load(Ordering::SeqCst)))
                    .unwrap_or(true)
            })
            .count()
    }

    async fn connection(&self, addr: &str) -> Result<Arc<Conn>, TransportError> {
        let slot = self
            .peers
            .lock()
            .entry(addr.to_owned())
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| c.alive.load(Ordering::SeqCst)) {
            return Ok(conn.clone());
        }
        let stream = peer::dial(addr, &self.config, self.connect_timeout).await?;
        let conn = Arc::new(start(stream));
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

/// Starts the reader and writer tasks of a new connection.
fn start(stream: PeerStream) -> Conn {
    let (mut rd, mut wr) = tokio::io::split(stream);
    let (frames, mut queue) = mpsc::channel::<Vec<u8>>(WRITE_QUEUE);
    let waiting: Waiters = Arc::default();
    let alive = Arc::new(AtomicBool::new(true));
    let writer_alive = alive.clone();
    tokio::spawn(async move {
        // Ends when the connection is replaced (its senders dropped) or breaks.
        while let Some(body) = queue.recv().await {
            if write_frame(&mut wr, &body).await.is_err() {
                writer_alive.store(false, Ordering::SeqCst);
                break;
            }
        }
        // Tells the peer this side is done, so it closes the connection and the reader
        // below ends too (a transport that is dropped leaves no connection behind).
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut wr).await;
    });
    let (readers, reader_alive) = (waiting.clone(), alive.clone());
    tokio::spawn(async move {
        while let Ok(Some(body)) = read_frame(&mut rd).await {
            let Ok((id, answer)) = decode_message::<(u64, RaftResponse)>(&body) else {
                break;
            };
            if let Some(w) = readers.lock().remove(&id) {
                let _ = w.send(answer);
            }
        }
        // Dropping the waiters' senders fails their calls; the next call reconnects.
        reader_alive.store(false, Ordering::SeqCst);
        readers.lock().clear();
    });
    Conn {
        frames,
        waiting,
        alive,
    }
}

/// Removes a call's entry if the caller stops waiting (a timeout drops the future).
struct Pending<'a> {
    waiting: &'a Waiters,
    id: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

impl TcpTransport {
    /// Sends a service request (not Raft: membership) to the server at `addr` and
    /// returns its answer, within `timeout`; the peer's router hands it to its
    /// [`crate::Service`].
    pub async fn call_service(
        &self,
        addr: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let node = Node::new(addr);
        let call = self.call(0, &node, GroupId(0), RaftRequest::Service(body));
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(RaftResponse::Service(answer))) => Ok(answer),
            Ok(Ok(RaftResponse::Refused(why))) => Err(TransportError::Remote(why)),
            Ok(Ok(other)) => Err(TransportError::Unexpected(format!("{other:?}"))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(TransportError::Timeout(timeout)),
        }
    }
}

impl Transport for TcpTransport {
    async fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        let conn = self.connection(&node.addr).await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = encode_message(&(id, group, target, &request))?;
        let (tx, rx) = oneshot::channel();
        conn.waiting.lock().insert(id, tx);
        if !conn.alive.load(Ordering::SeqCst) {
            // The reader may have cleared the waiters before the insert.
            return Err(TransportError::Closed);
        }
        let _pending = Pending {
            waiting: &conn.waiting,
            id,
        };
        conn.frames
            .send(body)
            .await
            .map_err(|_| TransportError::Closed)?;
        rx.await.map_err(|_| TransportError::Closed)
    }
}

/// Accepts peer connections on `listener`, sets each up as `config` says (a peer that
/// fails TLS or the hello is logged and dropped) and serves it with `router`. Dropping
/// (or aborting) the returned future closes every connection it accepted.
pub async fn serve_tcp(
    listener: TcpListener,
    router: Arc<Router>,
    config: PeerConfig,
) -> std::io::Result<()> {
    let mut conns = tokio::task::JoinSet::new();
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (conn, from) = accepted?;
                let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                    // Not a warning: a flood would flood the log too.
                    tracing::debug!("dropped a cluster connection from {from}: too many in set-up");
                    continue;
                };
                let (router, config) = (router.clone(), config.clone());
                conns.spawn(async move {
                    let stream = peer::accept(conn, &config).await;
                    drop(permit);
                    match stream {
                        Ok(Some(stream)) => {
                            if let Err(e) = router.serve(stream).await {
                                tracing::debug!("peer connection from {from} ended: {e}");
                            }
                        }
                        Ok(None) => tracing::info!("told the joining server at {from} this cluster's id"),
                        Err(e) => tracing::warn!("refused a cluster connection from {from}: {e}"),
                    }
                });
            }
            // Reaps finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Vote;
    use openraft::raft::VoteRequest;

    fn vote_request() -> RaftRequest {
        RaftRequest::Vote(VoteRequest::new(Vote::new(1, 1), None))
    }

    async fn free_port() -> (TcpListener, String) {
        for port in 27500..27600u16 {
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)).await {
                return (l, format!("127.0.0.1:{port}"));
            }
        }
        panic!("no free port in 27500..27600");
    }

    #[tokio::test]
    async fn connections_in_set_up_are_capped_and_time_limited() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cluster = crate::ClusterId::new("cap").unwrap();
        let config = PeerConfig::plain(cluster.clone());
        let server = tokio::spawn(serve_tcp(listener, Arc::new(Router::new()), config));
        // Silent connections hold every set-up slot.
        let mut silent = Vec::new();
        for _ in 0..MAX_HANDSHAKES {
            silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the connection over the cap is dropped at once: {read:?}"
        );
        // A slot freed (its peer went away) serves the next peer.
        drop(silent.pop());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut next = tokio::net::TcpStream::connect(addr).await.unwrap();
        crate::hello::dial(&mut next, &cluster).await.unwrap();
        // A silent peer is dropped once its set-up time is over.
        let mut first = silent.swap_remove(0);
        let read = tokio::time::timeout(
            peer::HANDSHAKE_TIMEOUT + Duration::from_secs(2),
            first.read(&mut byte),
        )
        .await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        server.abort();
    }

    #[tokio::test]
    async fn a_dropped_transport_closes_its_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cluster = crate::ClusterId::new("drop").unwrap();
        let config = PeerConfig::plain(cluster.clone());
        // A peer that answers one request, then reports when the connection ends.
        let peer = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            crate::hello::accept(&mut conn, &cluster).await.unwrap();
            let body = read_frame(&mut conn).await.unwrap().unwrap();
            let (id, _, _, _): (u64, GroupId, NodeId, RaftRequest) = decode_message(&body).unwrap();
            let answer = encode_message(&(id, RaftResponse::Refused("no".into()))).unwrap();
            write_frame(&mut conn, &answer).await.unwrap();
            read_frame(&mut conn).await.unwrap().is_none()
        });
        let transport = TcpTransport::new(config, Duration::from_secs(2));
        let answer = transport
            .call(2, &Node::new(addr), GroupId(1), vote_request())
            .await
            .unwrap();
        assert!(matches!(answer, RaftResponse::Refused(_)));
        drop(transport);
        let ended = tokio::time::timeout(Duration::from_secs(5), peer).await;
        assert!(
            matches!(ended, Ok(Ok(true))),
            "the peer saw the end: {ended:?}"
        );
    }

    #[tokio::test]
    async fn a_call_to_a_dead_peer_fails_and_a_later_one_reconnects() {
        let (listener, addr) = free_port().await;
        drop(listener);
        let config = PeerConfig::plain(crate::ClusterId::new("test").unwrap());
        let transport = TcpTransport::new(config.clone(), Duration::from_millis(500));
        let node = Node::new(addr.clone());
        let refused = transport.call(2, &node, GroupId(1), vote_request()).await;
        assert!(refused.is_err());

        let listener = TcpListener::bind(addr.as_str()).await.unwrap();
        let server = tokio::spawn(serve_tcp(listener, Arc::new(Router::new()), config.clone()));
        for _ in 0..3 {
            let answer = transport
                .call(2, &node, GroupId(1), vote_request())
                .await
                .unwrap();
            assert!(matches!(answer, RaftResponse::Refused(_)), "{answer:?}");
        }
        assert_eq!(transport.connection_count(), 1);

        // The peer goes away: calls fail, and the connection is not reused.
        server.abort();
        let _ = server.await;
        let mut failed = false;
        for _ in 0..20 {
            if transport
                .call(2, &node, GroupId(1), vote_request())
                .await
                .is_err()
            {
                failed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(failed, "calls to a stopped peer fail");

        // It comes back: the next call connects again.
        let listener = TcpListener::bind(addr.as_str()).await.unwrap();
        let server = tokio::spawn(serve_tcp(listener, Arc::new(Router::new()), config.clone()));
        let answer = transport
            .call(2, &node, GroupId(1), vote_request())
            .await
            .unwrap();
        assert!(matches!(answer, RaftResponse::Refused(_)), "{answer:?}");
        server.abort();
    }
}
