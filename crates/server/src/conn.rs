//! One client connection: the handshake, then frames in and responses out.
//!
//! Reading and writing are separate tasks joined by a bounded channel, so a client that
//! stops reading applies back-pressure instead of growing server memory. A frame error
//! (oversized query) is answered with RethinkDB's client error and the connection closed,
//! since the stream cannot be resynchronised.

use std::sync::Arc;

use bytes::BytesMut;
use proto::frame::{decode, MAX_QUERY_BYTES};
use proto::handshake::{Handshake, OsRandom, Step};
use proto::ql2::ResponseType;
use proto::response::ResponseWriter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::principal::Principal;
use crate::session::Session;
use crate::state::ServerState;
use crate::wire::finish;

/// Responses queued per connection before the writer applies back-pressure.
const OUT_QUEUE: usize = 1024;

/// Serves one plain TCP connection until it closes.
pub async fn serve(stream: TcpStream, state: Arc<ServerState>) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    serve_stream(stream, peer, state).await;
}

/// Serves one connection (plain or TLS) until it closes.
pub async fn serve_stream<S>(stream: S, peer: String, state: Arc<ServerState>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    state.cluster.note_connection(true);
    serve_inner(stream, peer, &state).await;
    state.cluster.note_connection(false);
}

async fn serve_inner<S>(stream: S, peer: String, state: &Arc<ServerState>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut hs = Handshake::new(OsRandom);
    let user = loop {
        match hs.feed(&mut buf, state.cluster.users().as_ref()) {
            Ok(Step::NeedMore) => match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            Ok(Step::Send(b)) => {
                if wr.write_all(&b).await.is_err() {
                    return;
                }
            }
            Ok(Step::Done { reply, user, .. }) => {
                if wr.write_all(&reply).await.is_err() {
                    return;
                }
                break user;
            }
            Ok(Step::Reject { reply, .. }) => {
                let _ = wr.write_all(&reply).await;
                let _ = wr.shutdown().await;
                return;
            }
            Err(_) => return,
        }
    };

    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let who = Principal::new(&state.cluster, &user, peer);
    let session = Session::new(state.clone(), tx.clone(), who);
    loop {
        match decode(&mut buf, MAX_QUERY_BYTES) {
            Ok(Some(frame)) => session.handle(frame).await,
            Ok(None) => match rd.read_buf(&mut buf).await {
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
                let _ = tx.send(finish(w, token)).await;
                break;
            }
        }
    }
    session.close();
    drop(session);
    drop(tx);
    let _ = writer.await;
}
