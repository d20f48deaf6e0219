//! Unit tests of `ClusterTls::from_pem_files`: each misconfiguration has its error.

use super::certs::{Ca, Files};
use super::*;
use rcgen::ExtendedKeyUsagePurpose;

fn load(f: &Files) -> Result<ClusterTls, ClusterTlsError> {
    ClusterTls::from_pem_files(&f.key, &f.cert, &f.ca)
}

#[test]
fn good_files_load() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("cluster CA");
    load(&ca.server("a").write(dir.path(), "a", &ca.pem)).unwrap();
}

#[test]
fn a_missing_or_wrong_kind_of_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("cluster CA");
    let mut files = ca.server("a").write(dir.path(), "a", &ca.pem);
    let key = files.key.clone();
    files.key = dir.path().join("absent.key");
    let err = load(&files).unwrap_err();
    assert!(
        matches!(
            err,
            ClusterTlsError::Pem(tlsfiles::PemError::Missing { .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("absent.key"), "{err}");
    // The key given as the CA: no certificate in it.
    files.key = key.clone();
    files.ca = key;
    let err = load(&files).unwrap_err();
    assert!(
        matches!(err, ClusterTlsError::Pem(tlsfiles::PemError::Empty { .. })),
        "{err:?}"
    );
}

#[test]
fn a_key_of_another_certificate_is_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("cluster CA");
    let mut a = ca.server("a").write(dir.path(), "a", &ca.pem);
    a.key = ca.server("b").write(dir.path(), "b", &ca.pem).key;
    let err = load(&a).unwrap_err();
    assert!(
        matches!(err, ClusterTlsError::KeyMismatch { .. }),
        "{err:?}"
    );
}

#[test]
fn a_certificate_of_another_ca_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, other) = (Ca::new("cluster CA"), Ca::new("other CA"));
    let err = load(&other.server("a").write(dir.path(), "a", &ca.pem)).unwrap_err();
    assert!(
        matches!(
            err,
            ClusterTlsError::NotSignedByCa {
                role: "a server",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_certificate_that_cannot_be_a_client_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("cluster CA");
    let leaf = ca.issue("a", vec![ExtendedKeyUsagePurpose::ServerAuth]);
    let err = load(&leaf.write(dir.path(), "a", &ca.pem)).unwrap_err();
    assert!(
        matches!(
            err,
            ClusterTlsError::NotSignedByCa {
                role: "a client",
                ..
            }
        ),
        "{err:?}"
    );
}
