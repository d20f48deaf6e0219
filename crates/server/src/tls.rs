//! TLS on the driver port: `--driver-tls-key` and `--driver-tls-cert` (PEM files) turn
//! on rustls (ring provider) for every driver connection; drivers connect with `ssl`.
//! The PEM files are read by the `tlsfiles` crate, shared with the cluster port.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

/// Builds the acceptor from a PEM certificate chain and private key.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs = tlsfiles::certificates(cert, "TLS certificate").map_err(|e| e.to_string())?;
    let key = tlsfiles::private_key(key, "TLS private key").map_err(|e| e.to_string())?;
    let config = rustls::ServerConfig::builder_with_provider(tlsfiles::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("invalid TLS certificate or key: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
