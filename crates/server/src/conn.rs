//! One client connection: the handshake, then frames in and responses out.
//!
//! Reading and writing are separate tasks joined by an `Outbox` bounded in bytes, so a
//! client that stops reading applies back-pressure instead of growing server memory
//! (small answers are written by their sender when nothing waits before them,
//! `outbox.rs`). A frame error (oversized query) is answered with RethinkDB's client
//! error and the connection closed, since the stream cannot be resynchronised.
//!
//! When the server shuts down (`Stop`), each connection stops reading, interrupts its
//! queries (`Session::close`) and closes without waiting for the client to read.

use std::sync::Arc;

use bytes::BytesMut;
use proto::frame::{decode, MAX_QUERY_BYTES};
use proto::handshake::{Handshake, OsRandom, Step};
use proto::ql2::ResponseType;
use proto::response::ResponseWriter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::outbox::{Outbox, Sink};
use crate::principal::Principal;
use crate::session::Session;
use crate::state::ServerState;
use crate::wire::finish;

/// The server's shutdown signal, as each connection watches it.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// A signal and its trigger: sending `true` (or dropping the sender) stops.
    pub fn new() -> (watch::Sender<bool>, Stop) {
        let (tx, rx) = watch::channel(false);
        (tx, Stop(rx))
    }

    /// Resolves once the server is shutting down.
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Serves one plain TCP connection until it closes or the server stops.
pub async fn serve(stream: TcpStream, state: Arc<ServerState>, stop: Stop) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    // Owned halves: reading and writing a TCP socket need no lock between them.
    let (rd, wr) = stream.into_split();
    serve_halves(rd, wr, peer, state, stop).await;
}

/// Serves one connection (plain or TLS) until it closes or the server stops.
pub async fn serve_stream<S>(stream: S, peer: String, state: Arc<ServerState>, stop: Stop)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    serve_halves(rd, wr, peer, state, stop).await;
}

/// Serves a connection's two halves, counted as an open connection meanwhile.
async fn serve_halves<R, W>(rd: R, wr: W, peer: String, state: Arc<ServerState>, stop: Stop)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    state.cluster.note_connection(true);
    serve_inner(rd, wr, peer, &state, stop).await;
    state.cluster.note_connection(false);
}

/// The handshake; the authenticated user, or None when the connection is done.
async fn handshake<R, W>(
    rd: &mut R,
    wr: &mut W,
    buf: &mut BytesMut,
    state: &ServerState,
) -> Option<String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut hs = Handshake::new(OsRandom);
    loop {
        match hs.feed(buf, state.cluster.users().as_ref()) {
            Ok(Step::NeedMore) => match rd.read_buf(buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            },
            Ok(Step::Send(b)) => {
                if wr.write_all(&b).await.is_err() {
                    return None;
                }
            }
            Ok(Step::Done { reply, user, .. }) => {
                if wr.write_all(&reply).await.is_err() {
                    return None;
                }
                return Some(user);
            }
            Ok(Step::Reject { reply, .. }) => {
                let _ = wr.write_all(&reply).await;
                let _ = wr.shutdown().await;
                return None;
            }
            Err(_) => return None,
        }
    }
}

async fn serve_inner<R, W>(
    mut rd: R,
    mut wr: W,
    peer: String,
    state: &Arc<ServerState>,
    mut stop: Stop,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = BytesMut::with_capacity(16 * 1024);
    // A client that is slow or silent during the handshake must not hold a slot.
    let timed = tokio::time::timeout(
        state.handshake_timeout,
        handshake(&mut rd, &mut wr, &mut buf, state),
    );
    let user = tokio::select! {
        user = timed => user.ok().flatten(),
        () = stop.wait() => None,
    };
    let Some(user) = user else { return };

    let sink = Sink::new(Box::pin(wr));
    let (tx, mut rx) = Outbox::with_sink(sink.clone());
    let writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            // The frame's budget is given back when `out` drops, once written.
            if !sink.write_queued(out).await {
                break;
            }
        }
        sink.shutdown().await;
    });
    let who = Principal::new(&state.cluster, &user, peer);
    let session = Session::new(state.clone(), tx.clone(), who);
    // The reading loop is a task of its own, which this one awaits beside the stop
    // signal: each query's wake-up then polls the loop alone, not the signal too.
    let mut reader = {
        let (session, tx) = (session.clone(), tx.clone());
        tokio::spawn(async move { queries(&mut rd, &mut buf, &session, &tx).await })
    };
    let stopped = tokio::select! {
        _ = &mut reader => false,
        () = stop.wait() => true,
    };
    if stopped {
        // Ended (dropped) before the session closes, as a dropped loop would be.
        reader.abort();
        let _ = reader.await;
    }
    session.close();
    drop(session);
    drop(tx);
    if stopped {
        // The client may not be reading: do not wait for it.
        writer.abort();
    }
    let _ = writer.await;
}

/// Reads query frames and hands them to the session until the client goes away or
/// sends a frame that cannot be read.
async fn queries<R>(rd: &mut R, buf: &mut BytesMut, session: &Arc<Session>, tx: &Outbox)
where
    R: AsyncRead + Unpin,
{
    loop {
        match decode(buf, MAX_QUERY_BYTES) {
            Ok(Some(frame)) => session.handle(frame).await,
            Ok(None) => match rd.read_buf(buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            Err(e) => {
                let token = match &e {
                    proto::frame::FrameError::QueryTooLarge { token, .. } => *token,
                    _ => 0,
                };
                let w =
                    ResponseWriter::error(ResponseType::CLIENT_ERROR, None, &e.client_message());
                tx.send(finish(w, token)).await;
                break;
            }
        }
    }
}
