//! Certificates made at test time with rcgen: a cluster CA, and certificates signed by
//! it written out as the three PEM files a server is given. Shared by the integration
//! tests and the `tls` module's unit tests (which include this file by path).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA that signs test certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
}

/// A certificate and its private key, as PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The paths of a server's three files.
pub struct Files {
    pub key: PathBuf,
    pub cert: PathBuf,
    pub ca: PathBuf,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server's certificate: usable as TLS server and client.
    pub fn server(&self, name: &str) -> Leaf {
        self.issue(
            name,
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    pub fn issue(&self, name: &str, usages: Vec<ExtendedKeyUsagePurpose>) -> Leaf {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Leaf {
    /// Writes `{name}.key`, `{name}.crt` and `{name}-ca.crt` (the CA certificates this
    /// server trusts, PEM) into `dir`.
    pub fn write(&self, dir: &Path, name: &str, trusted: &str) -> Files {
        let files = Files {
            key: dir.join(format!("{name}.key")),
            cert: dir.join(format!("{name}.crt")),
            ca: dir.join(format!("{name}-ca.crt")),
        };
        std::fs::write(&files.key, &self.key_pem).unwrap();
        std::fs::write(&files.cert, &self.cert_pem).unwrap();
        std::fs::write(&files.ca, trusted).unwrap();
        files
    }
}
