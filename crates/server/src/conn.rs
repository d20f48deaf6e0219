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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::session::Session;
use crate::state::ServerState;
use crate::wire::finish;

/// Responses queued per connection before the writer applies back-pressure.
const OUT_QUEUE: usize = 1024;

/// Serves one connection until it closes.
pub async fn serve(stream: TcpStream, state: Arc<ServerState>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut hs = Handshake::new(OsRandom);
    loop {
        match hs.feed(&mut buf, &state.users) {
            Ok(Step::NeedMore) => match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            Ok(Step::Send(b)) => {
                if wr.write_all(&b).await.is_err() {
                    return;
                }
            }
            Ok(Step::Done { reply, .. }) => {
                if wr.write_all(&reply).await.is_err() {
                    return;
                }
                break;
            }
            Ok(Step::Reject { reply, .. }) => {
                let _ = wr.write_all(&reply).await;
                let _ = wr.shutdown().await;
                return;
            }
            Err(_) => return,
        }
    }

    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let session = Session::new(state, tx.clone());
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
