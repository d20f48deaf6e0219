//! `tlsfiles`: loading TLS material from PEM files, shared by the driver port
//! (`server::tls`) and the cluster port (`replication::tls`), and the one choice of
//! crypto provider (rustls with ring) both use.
//!
//! Every failure names the file and what it was meant to hold, and says which of
//! "missing", "unreadable", "malformed" or "empty" it is, so an operator who gave the
//! wrong path or the wrong kind of file is told so at start-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A PEM file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PemError {
    /// The file does not exist.
    #[error("{what} file {} does not exist", path.display())]
    Missing {
        /// What the file was to hold ("TLS certificate", ...).
        what: &'static str,
        /// The path given.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("cannot read {what} file {}: {source}", path.display())]
    Unreadable {
        /// What the file was to hold.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The file is not valid PEM.
    #[error("cannot parse {what} file {}: {detail}", path.display())]
    Malformed {
        /// What the file was to hold.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// The parser's complaint.
        detail: String,
    },
    /// The file is PEM but holds no item of the expected kind.
    #[error("{what} file {} holds no {item}", path.display())]
    Empty {
        /// What the file was to hold.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// The PEM item looked for.
        item: &'static str,
    },
}

/// The crypto provider of every TLS endpoint in Ponder (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, PemError> {
    std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => PemError::Missing {
            what,
            path: path.to_owned(),
        },
        _ => PemError::Unreadable {
            what,
            path: path.to_owned(),
            source,
        },
    })
}

/// Every certificate (`CERTIFICATE` item) in the PEM file at `path`, in file order; at
/// least one. `what` names the file in errors.
pub fn certificates(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let bytes = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PemError::Malformed {
            what,
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(PemError::Empty {
            what,
            path: path.to_owned(),
            item: "certificate",
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file at `path`.
pub fn private_key(path: &Path, what: &'static str) -> Result<PrivateKeyDer<'static>, PemError> {
    let bytes = read(path, what)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => PemError::Empty {
            what,
            path: path.to_owned(),
            item: "private key",
        },
        e => PemError::Malformed {
            what,
            path: path.to_owned(),
            detail: e.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        assert!(matches!(
            certificates(&missing, "CA"),
            Err(PemError::Missing { .. })
        ));
        assert!(matches!(
            private_key(&missing, "key"),
            Err(PemError::Missing { .. })
        ));
        // A directory exists but cannot be read as a file.
        assert!(matches!(
            certificates(dir.path(), "CA"),
            Err(PemError::Unreadable { .. })
        ));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem at all\n").unwrap();
        assert!(matches!(
            certificates(&empty, "CA"),
            Err(PemError::Empty { .. })
        ));
        assert!(matches!(
            private_key(&empty, "key"),
            Err(PemError::Empty { .. })
        ));
        let broken = dir.path().join("broken.pem");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\n@@@\n").unwrap();
        let err = certificates(&broken, "CA").unwrap_err();
        assert!(matches!(err, PemError::Malformed { .. }), "{err:?}");
        assert!(err.to_string().contains("broken.pem"), "{err}");
    }
}
