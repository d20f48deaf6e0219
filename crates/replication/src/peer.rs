//! Setting up a cluster connection before any Raft frame: [`PeerConfig`] (the cluster
//! id, and TLS or none), [`dial`] (TCP connect, TLS as client, hello) and [`accept`]
//! (TLS as server, hello) — each under one deadline.
//!
//! Invariants: one `PeerConfig` value configures both directions of a node, so TLS is
//! on for both or for neither (a `ClusterTls` cannot be half built: `tls`); a stream is
//! handed to the Raft layers only after the hello passed; the accepting side gives a
//! connection at most [`HANDSHAKE_TIMEOUT`] to get there.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::error::TransportError;
use crate::hello::{self, ClusterId, Greeting};
use crate::tls::ClusterTls;

/// How long an accepted connection may take to finish TLS and the hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A byte stream to a peer that passed the hello (plain TCP or TLS over it).
pub(crate) trait PeerIo: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> PeerIo for T {}

/// A set-up peer connection.
pub(crate) type PeerStream = Box<dyn PeerIo>;

/// How this node's cluster port talks to its peers, in both directions: the cluster
/// it belongs to, and TLS with mutual authentication or plain TCP (for a single server
/// or a trusted network). Give the same value to [`crate::TcpTransport::new`] and
/// [`crate::serve_tcp`].
#[derive(Clone, Debug)]
pub struct PeerConfig {
    cluster: ClusterId,
    tls: Option<ClusterTls>,
}

impl PeerConfig {
    /// Plain TCP: peers are identified only by the hello's cluster id, and traffic is
    /// readable on the network.
    pub fn plain(cluster: ClusterId) -> Self {
        Self { cluster, tls: None }
    }

    /// TLS with mutual authentication against the cluster CA, then the hello.
    pub fn tls(cluster: ClusterId, tls: ClusterTls) -> Self {
        Self {
            cluster,
            tls: Some(tls),
        }
    }

    /// The cluster this node belongs to.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// Whether connections use TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// Asks the server at `addr` for its cluster id (this server has none yet: a fresh data
/// directory started with `--join`), over TLS when `tls` is given, within `timeout`.
pub async fn learn_cluster_id(
    addr: &str,
    tls: Option<&ClusterTls>,
    timeout: Duration,
) -> Result<ClusterId, TransportError> {
    let setup = async {
        let mut stream = connect(addr, tls).await?;
        hello::join(&mut stream).await
    };
    tokio::time::timeout(timeout, setup)
        .await
        .map_err(|_| TransportError::Timeout(timeout))?
}

/// Connects to `addr` and sets the connection up, all within `timeout`.
pub(crate) async fn dial(
    addr: &str,
    config: &PeerConfig,
    timeout: Duration,
) -> Result<PeerStream, TransportError> {
    let setup = async {
        let mut stream = connect(addr, config.tls.as_ref()).await?;
        hello::dial(&mut stream, &config.cluster).await?;
        Ok(stream)
    };
    tokio::time::timeout(timeout, setup)
        .await
        .map_err(|_| TransportError::Timeout(timeout))?
}

/// A TCP connection to `addr`, inside TLS when `tls` is given (no hello yet).
async fn connect(addr: &str, tls: Option<&ClusterTls>) -> Result<PeerStream, TransportError> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(match tls {
        Some(tls) => Box::new(
            tls.connector()
                .connect(ClusterTls::server_name(), tcp)
                .await
                .map_err(TransportError::Tls)?,
        ),
        None => Box::new(tcp),
    })
}

/// Sets up an accepted connection within [`HANDSHAKE_TIMEOUT`]; `None` when the peer
/// only asked for the cluster id (a joiner, answered already).
pub(crate) async fn accept(
    tcp: TcpStream,
    config: &PeerConfig,
) -> Result<Option<PeerStream>, TransportError> {
    let setup = async {
        tcp.set_nodelay(true)?;
        let mut stream: PeerStream = match &config.tls {
            Some(tls) => Box::new(
                tls.acceptor()
                    .accept(tcp)
                    .await
                    .map_err(TransportError::Tls)?,
            ),
            None => Box::new(tcp),
        };
        match hello::accept(&mut stream, &config.cluster).await? {
            Greeting::Member => Ok(Some(stream)),
            Greeting::Joiner => Ok(None),
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, setup)
        .await
        .map_err(|_| TransportError::Timeout(HANDSHAKE_TIMEOUT))?
}
