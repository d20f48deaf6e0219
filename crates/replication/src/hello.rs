//! The hello: the first bytes on every cluster connection (after TLS, when it is on),
//! before any Raft frame, so that a server of another cluster, a server speaking
//! another protocol version, or something that is not Ponder is refused by name instead
//! of having its bytes parsed as Raft messages.
//!
//! Wire (fixed layout, not postcard, so it stays readable across format changes):
//! `MAGIC` (8 bytes), version (u16 BE), kind (u8: 0 hello, 1 refusal), text length
//! (u16 BE, at most [`MAX_TEXT`]), text (UTF-8: the cluster id of a hello, the reason of
//! a refusal). The dialer sends a hello; the acceptor reads it and answers with its own
//! hello or with a refusal saying why, then closes. Each side checks what it receives,
//! so both ends report the same mismatch.
//!
//! Joining (kind 2, empty text): a server with a fresh data directory started with
//! `--join` has no cluster id yet. It sends a join instead of a hello; the acceptor
//! answers with its hello (its cluster id) and closes the connection, and the joiner
//! adopts that id ([`join`]) before dialing again with a normal hello. With TLS the
//! certificate has already authenticated the joiner, so this gives nothing away; without
//! TLS the cluster id was never a secret (docs/clustering.md).
//!
//! Invariants: a hello is at most 13 + [`MAX_TEXT`] bytes and is read with exact-length
//! reads (no unbounded buffering); the acceptor sends nothing to a peer whose first bytes
//! are not the magic; time limits are the caller's (`peer`).

use std::fmt;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::TransportError;

/// The first bytes a Ponder cluster port sends and expects.
pub const MAGIC: [u8; 8] = *b"PONDERCP";

/// The version of what follows the hello (the Raft frames and their encoding); peers
/// must speak the same one.
pub const PROTOCOL_VERSION: u16 = 1;

/// The longest text (cluster id or refusal reason) a hello may carry.
pub const MAX_TEXT: usize = 256;

/// The longest cluster id.
pub const MAX_CLUSTER_ID: usize = 128;

const KIND_HELLO: u8 = 0;
const KIND_REFUSAL: u8 = 1;
const KIND_JOIN: u8 = 2;

/// Whom the accepting side met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeting {
    /// A server of this cluster: the connection carries frames from now on.
    Member,
    /// A server without a cluster id that asked for this one ([`join`]); it was told, and
    /// the connection is done.
    Joiner,
}

/// The identity every server of one cluster is given (a name or a UUID): a peer with
/// another one is refused.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClusterId(Arc<str>);

/// A cluster id that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster id: {0}")]
pub struct ClusterIdError(&'static str);

impl ClusterId {
    /// A cluster id: 1 to [`MAX_CLUSTER_ID`] bytes, no control characters.
    pub fn new(id: impl Into<String>) -> Result<Self, ClusterIdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(ClusterIdError("it is empty"));
        }
        if id.len() > MAX_CLUSTER_ID {
            return Err(ClusterIdError("it is longer than 128 bytes"));
        }
        if id.chars().any(char::is_control) {
            return Err(ClusterIdError("it contains a control character"));
        }
        Ok(Self(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterId({:?})", &*self.0)
    }
}

/// Why a hello exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// The peer's first bytes are not [`MAGIC`]: it is not a Ponder cluster port (or
    /// it speaks TLS to a port without TLS).
    #[error("the peer is not a Ponder cluster server (its first bytes are not the cluster magic; is TLS on at one end only?)")]
    NotPonder,
    /// The peer speaks another protocol version.
    #[error("the peer speaks cluster protocol version {theirs}, this server speaks {ours}")]
    Version {
        /// This server's version.
        ours: u16,
        /// The peer's version.
        theirs: u16,
    },
    /// The peer belongs to another cluster.
    #[error("the peer belongs to cluster {theirs:?}, this server to cluster {ours:?}")]
    OtherCluster {
        /// This server's cluster id.
        ours: String,
        /// The peer's cluster id.
        theirs: String,
    },
    /// The peer refused this server's hello.
    #[error("the peer refused the connection: {0}")]
    Refused(String),
    /// The hello is not well formed.
    #[error("malformed hello: {0}")]
    Malformed(&'static str),
}

/// One decoded hello or refusal.
#[derive(Debug, PartialEq, Eq)]
struct Message {
    version: u16,
    kind: u8,
    text: String,
}

fn encode(kind: u8, text: &str) -> Vec<u8> {
    // Longer text is cut at a character boundary (only refusal reasons can be long).
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text.as_bytes()[..end];
    let mut out = Vec::with_capacity(13 + text.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(&(text.len() as u16).to_be_bytes());
    out.extend_from_slice(text);
    out
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, kind: u8, text: &str) -> std::io::Result<()> {
    w.write_all(&encode(kind, text)).await?;
    w.flush().await
}

/// Reads one message; an end of stream before it is whole is [`TransportError::Closed`].
async fn receive<R: AsyncRead + Unpin>(r: &mut R) -> Result<Message, TransportError> {
    let eof = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => TransportError::Closed,
        _ => TransportError::Io(e),
    };
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).await.map_err(eof)?;
    if magic != MAGIC {
        return Err(HelloError::NotPonder.into());
    }
    let mut head = [0u8; 5];
    r.read_exact(&mut head).await.map_err(eof)?;
    let version = u16::from_be_bytes([head[0], head[1]]);
    let kind = head[2];
    let len = u16::from_be_bytes([head[3], head[4]]) as usize;
    if len > MAX_TEXT {
        return Err(HelloError::Malformed("text longer than the limit").into());
    }
    let mut text = vec![0u8; len];
    r.read_exact(&mut text).await.map_err(eof)?;
    let text = String::from_utf8(text).map_err(|_| HelloError::Malformed("text is not UTF-8"))?;
    Ok(Message {
        version,
        kind,
        text,
    })
}

/// The checks both sides make on a peer's hello.
fn check(ours: &ClusterId, theirs: &Message) -> Result<(), HelloError> {
    if theirs.version != PROTOCOL_VERSION {
        return Err(HelloError::Version {
            ours: PROTOCOL_VERSION,
            theirs: theirs.version,
        });
    }
    if theirs.text != ours.as_str() {
        return Err(HelloError::OtherCluster {
            ours: ours.to_string(),
            theirs: theirs.text.clone(),
        });
    }
    Ok(())
}

/// The dialing side: sends this server's hello and checks the answer.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
    cluster: &ClusterId,
) -> Result<(), TransportError> {
    send(conn, KIND_HELLO, cluster.as_str()).await?;
    let answer = receive(conn).await?;
    match answer.kind {
        KIND_HELLO => Ok(check(cluster, &answer)?),
        KIND_REFUSAL => Err(HelloError::Refused(answer.text).into()),
        _ => Err(HelloError::Malformed("unknown message kind").into()),
    }
}

/// The joining side: asks the peer for its cluster id (this server has none yet).
pub async fn join<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
) -> Result<ClusterId, TransportError> {
    send(conn, KIND_JOIN, "").await?;
    let answer = receive(conn).await?;
    match answer.kind {
        KIND_HELLO if answer.version != PROTOCOL_VERSION => Err(HelloError::Version {
            ours: PROTOCOL_VERSION,
            theirs: answer.version,
        }
        .into()),
        KIND_HELLO => ClusterId::new(answer.text)
            .map_err(|_| HelloError::Malformed("the peer's cluster id is invalid").into()),
        KIND_REFUSAL => Err(HelloError::Refused(answer.text).into()),
        _ => Err(HelloError::Malformed("unknown message kind").into()),
    }
}

/// The accepting side: reads the dialer's hello, answers with this server's hello if it
/// passes, or with a refusal saying why (nothing to a peer that is not Ponder). A join
/// of the same protocol version is answered with this server's hello too.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
    cluster: &ClusterId,
) -> Result<Greeting, TransportError> {
    let hello = receive(conn).await?;
    let checked = match hello.kind {
        KIND_HELLO => check(cluster, &hello).map(|()| Greeting::Member),
        KIND_JOIN if hello.version != PROTOCOL_VERSION => Err(HelloError::Version {
            ours: PROTOCOL_VERSION,
            theirs: hello.version,
        }),
        KIND_JOIN => Ok(Greeting::Joiner),
        _ => Err(HelloError::Malformed("the first message is not a hello")),
    };
    match checked {
        Ok(greeting) => {
            send(conn, KIND_HELLO, cluster.as_str()).await?;
            Ok(greeting)
        }
        Err(why) => {
            // Best effort: the refusal is a courtesy, the error is what matters here.
            let _ = send(conn, KIND_REFUSAL, &why.to_string()).await;
            let _ = conn.shutdown().await;
            Err(why.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ClusterId {
        ClusterId::new(s).unwrap()
    }

    async fn exchange(
        dialer: &str,
        acceptor: &str,
    ) -> (Result<(), TransportError>, Result<Greeting, TransportError>) {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let (d, acc) = (id(dialer), id(acceptor));
        tokio::join!(dial(&mut a, &d), accept(&mut b, &acc))
    }

    fn hello_err<T: std::fmt::Debug>(r: Result<T, TransportError>) -> HelloError {
        match r {
            Err(TransportError::Hello(h)) => h,
            other => panic!("expected a hello error, got {other:?}"),
        }
    }

    #[test]
    fn cluster_ids_are_checked() {
        assert!(ClusterId::new("").is_err());
        assert!(ClusterId::new("a\nb").is_err());
        assert!(ClusterId::new("x".repeat(129)).is_err());
        assert_eq!(id("prod-1").as_str(), "prod-1");
    }

    #[tokio::test]
    async fn the_same_cluster_passes_and_another_is_refused_on_both_sides() {
        let (d, a) = exchange("c1", "c1").await;
        d.unwrap();
        assert_eq!(a.unwrap(), Greeting::Member);
        let (d, a) = exchange("c1", "c2").await;
        assert!(matches!(
            hello_err(a),
            HelloError::OtherCluster { ours, theirs } if ours == "c2" && theirs == "c1"
        ));
        let why = hello_err(d);
        assert!(
            matches!(&why, HelloError::Refused(r) if r.contains("\"c1\"") && r.contains("\"c2\"")),
            "{why}"
        );
    }

    #[tokio::test]
    async fn a_joiner_learns_the_cluster_id() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let ours = id("prod-7");
        let (learned, greeting) = tokio::join!(join(&mut a), accept(&mut b, &ours));
        assert_eq!(learned.unwrap(), ours);
        assert_eq!(greeting.unwrap(), Greeting::Joiner);
        // A join of another protocol version is refused like a hello.
        let (mut a, mut b) = tokio::io::duplex(4096);
        let mut other = encode(KIND_JOIN, "");
        other[8..10].copy_from_slice(&9u16.to_be_bytes());
        a.write_all(&other).await.unwrap();
        assert!(matches!(
            hello_err(accept(&mut b, &ours).await),
            HelloError::Version { theirs: 9, .. }
        ));
    }

    #[tokio::test]
    async fn another_version_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let mut other = encode(KIND_HELLO, "c1");
        other[8..10].copy_from_slice(&7u16.to_be_bytes());
        a.write_all(&other).await.unwrap();
        let refused = accept(&mut b, &id("c1")).await;
        assert_eq!(
            hello_err(refused),
            HelloError::Version {
                ours: PROTOCOL_VERSION,
                theirs: 7
            }
        );
        // The dialer is told why.
        let answer = receive(&mut a).await.unwrap();
        assert_eq!(answer.kind, KIND_REFUSAL);
        assert!(answer.text.contains("version 7"), "{}", answer.text);
    }

    #[tokio::test]
    async fn bytes_that_are_not_a_hello_get_no_answer() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        // A Raft frame (length prefix first) where a hello should be.
        a.write_all(&[0, 0, 0, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9])
            .await
            .unwrap();
        let refused = accept(&mut b, &id("c1")).await;
        assert_eq!(hello_err(refused), HelloError::NotPonder);
        drop(b);
        let mut rest = Vec::new();
        a.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "nothing is sent to a stranger: {rest:?}");
    }

    #[tokio::test]
    async fn an_oversized_or_truncated_hello_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        let mut long = encode(KIND_HELLO, "c1");
        long[11..13].copy_from_slice(&(MAX_TEXT as u16 + 1).to_be_bytes());
        a.write_all(&long).await.unwrap();
        assert_eq!(
            hello_err(accept(&mut b, &id("c1")).await),
            HelloError::Malformed("text longer than the limit")
        );
        let (mut a, mut b) = tokio::io::duplex(4096);
        a.write_all(&encode(KIND_HELLO, "c1")[..10]).await.unwrap();
        drop(a);
        assert!(matches!(
            accept(&mut b, &id("c1")).await,
            Err(TransportError::Closed)
        ));
    }

    #[test]
    fn long_refusals_are_cut_at_a_character_boundary() {
        let bytes = encode(KIND_REFUSAL, &"é".repeat(200));
        let len = u16::from_be_bytes([bytes[11], bytes[12]]) as usize;
        assert!(len <= MAX_TEXT);
        assert!(std::str::from_utf8(&bytes[13..]).is_ok());
        assert_eq!(bytes.len(), 13 + len);
    }
}
