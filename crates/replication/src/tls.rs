//! TLS on the cluster port, with mutual authentication: [`ClusterTls`] is built from
//! three PEM files — this server's private key, its certificate (chain), and the
//! cluster's CA certificate — and gives both the dialing side (`TcpTransport`) and the
//! accepting side (`serve_tcp`) their rustls configuration (TLS 1.3 only, ring).
//!
//! What is checked: each side presents its certificate, and each refuses a peer whose
//! certificate does not chain to the cluster CA, is outside its validity period, or lacks
//! the extended key usage of its role (serverAuth on the accepting side, clientAuth on
//! the dialing side; every server needs both, as it does both). The accepting side
//! requires a client certificate.
//!
//! Names are not checked, on purpose: the identity a certificate proves is "a member of
//! this cluster", which is what holding a key certified by the cluster's *private* CA
//! means. Peers are dialled by the address in the Raft membership (often an IP, which
//! changes when a server moves); requiring it in every certificate's subject alternative
//! names would burden operators without stopping a stranger (who has no certified key),
//! and a certified member can already do anything a member can. The CA must therefore
//! be made for this cluster alone (docs/clustering.md): a certificate from it is a key
//! to the cluster. The client sends the fixed server name [`SERVER_NAME`] (SNI only).
//!
//! Invariants: a `ClusterTls` exists only if all three files were read, the key matches
//! the certificate, and the certificate itself passes the checks above as both server
//! and client (so a misconfigured server fails at start-up, not at its first peer);
//! there is no half-configured TLS (no server-only or client-only mode).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The server name the dialing side sends (not checked; see the module note).
pub const SERVER_NAME: &str = "ponder-cluster";

/// Why the cluster TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterTlsError {
    /// A file is missing, unreadable, not PEM, or holds nothing of the right kind.
    #[error(transparent)]
    Pem(#[from] tlsfiles::PemError),
    /// The private key is not the one the certificate was issued for.
    #[error("the private key {} does not belong to the certificate {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The private key is of a kind rustls cannot use.
    #[error("unusable private key {}: {detail}", key.display())]
    BadKey {
        /// The key file.
        key: PathBuf,
        /// Why.
        detail: String,
    },
    /// A certificate in the CA file cannot be a trust anchor.
    #[error("unusable CA certificate {}: {detail}", ca.display())]
    BadCa {
        /// The CA file.
        ca: PathBuf,
        /// Why.
        detail: String,
    },
    /// This server's own certificate would be refused by its peers.
    #[error("the certificate {} is not valid for the cluster CA {} as {role}: {detail}", cert.display(), ca.display())]
    NotSignedByCa {
        /// The certificate file.
        cert: PathBuf,
        /// The CA file.
        ca: PathBuf,
        /// "a server" or "a client".
        role: &'static str,
        /// Why.
        detail: String,
    },
    /// rustls refused the configuration for another reason.
    #[error("cluster TLS setup failed: {0}")]
    Setup(String),
}

/// The cluster port's TLS: this server's certificate and key, and the cluster CA that
/// every peer's certificate must chain to. Cheap to clone.
#[derive(Clone)]
pub struct ClusterTls {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterTls")
    }
}

impl ClusterTls {
    /// Reads and checks the three PEM files (`--cluster-tls-key`, `--cluster-tls-cert`,
    /// `--cluster-tls-ca`). The certificate file may hold intermediates after this
    /// server's certificate; the CA file may hold several CA certificates.
    pub fn from_pem_files(key: &Path, cert: &Path, ca: &Path) -> Result<Self, ClusterTlsError> {
        let chain = tlsfiles::certificates(cert, "cluster TLS certificate")?;
        let private_key = tlsfiles::private_key(key, "cluster TLS private key")?;
        let mut roots = RootCertStore::empty();
        for anchor in tlsfiles::certificates(ca, "cluster CA certificate")? {
            roots.add(anchor).map_err(|e| ClusterTlsError::BadCa {
                ca: ca.to_owned(),
                detail: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let provider = tlsfiles::provider();

        let keys_error = |e: rustls::Error| match e {
            rustls::Error::InconsistentKeys(_) => ClusterTlsError::KeyMismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
            },
            e => ClusterTlsError::BadKey {
                key: key.to_owned(),
                detail: e.to_string(),
            },
        };
        let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| ClusterTlsError::BadCa {
                ca: ca.to_owned(),
                detail: e.to_string(),
            })?;
        let servers = Arc::new(ClusterCaVerifier {
            roots,
            provider: provider.clone(),
        });

        // This server's own certificate must pass what its peers will check.
        let not_valid = |role, e: rustls::Error| ClusterTlsError::NotSignedByCa {
            cert: cert.to_owned(),
            ca: ca.to_owned(),
            role,
            detail: e.to_string(),
        };
        let now = UnixTime::now();
        servers
            .check(&chain[0], &chain[1..], now)
            .map_err(|e| not_valid("a server", e))?;
        clients
            .verify_client_cert(&chain[0], &chain[1..], now)
            .map_err(|e| not_valid("a client", e))?;

        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| ClusterTlsError::Setup(e.to_string()))?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), private_key.clone_key())
            .map_err(keys_error)?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| ClusterTlsError::Setup(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(servers)
            .with_client_auth_cert(chain, private_key)
            .map_err(keys_error)?;
        Ok(Self {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.server.clone())
    }

    pub(crate) fn connector(&self) -> TlsConnector {
        TlsConnector::from(self.client.clone())
    }

    pub(crate) fn server_name() -> ServerName<'static> {
        ServerName::DnsName(
            rustls_pki_types::DnsName::try_from(SERVER_NAME)
                .expect("a constant, valid DNS name")
                .to_owned(),
        )
    }
}

/// The dialing side's check of the accepting server: chain to the cluster CA, validity
/// and serverAuth usage, as rustls' WebPKI verifier does, but no name (module note).
#[derive(Debug)]
struct ClusterCaVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ClusterCaVerifier {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )
    }
}

impl ServerCertVerifier for ClusterCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity, intermediates, now)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Not reached (TLS 1.3 only), but kept correct rather than permissive.
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
#[path = "../tests/tls/certs.rs"]
mod certs;

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
