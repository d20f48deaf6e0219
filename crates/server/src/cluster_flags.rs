//! The clustering part of the command line: `--join`, `--canonical-address`,
//! `--server-tag` and the three `--cluster-tls-*` flags, turned into a [`ClusterSetup`].
//!
//! Invariant: TLS on the cluster port is all three files or none; one or two of them is
//! a start-up error naming the missing ones (never a silent fallback to plain TCP).

use std::path::PathBuf;

use crate::config::ServeArgs;
use crate::Error;

impl ServeArgs {
    /// The cluster port's TLS files: all three flags, or none (naming the missing ones).
    pub fn cluster_tls(&self) -> Result<Option<ClusterTlsFiles>, Error> {
        match (
            &self.cluster_tls_key,
            &self.cluster_tls_cert,
            &self.cluster_tls_ca,
        ) {
            (Some(key), Some(cert), Some(ca)) => Ok(Some(ClusterTlsFiles {
                key: key.clone(),
                cert: cert.clone(),
                ca: ca.clone(),
            })),
            (None, None, None) => Ok(None),
            (key, cert, ca) => {
                let missing: Vec<&str> = [
                    (key.is_none(), "--cluster-tls-key"),
                    (cert.is_none(), "--cluster-tls-cert"),
                    (ca.is_none(), "--cluster-tls-ca"),
                ]
                .iter()
                .filter(|(m, _)| *m)
                .map(|(_, f)| *f)
                .collect();
                Err(Error::Argument(format!(
                    "TLS on the cluster port needs --cluster-tls-key, --cluster-tls-cert and \
                     --cluster-tls-ca together; missing: {}",
                    missing.join(", ")
                )))
            }
        }
    }

    /// The cluster port to bind.
    pub fn cluster_port(&self) -> Result<u16, Error> {
        self.cluster_port
            .checked_add(self.port_offset)
            .ok_or_else(|| {
                Error::Argument("--cluster-port plus --port-offset is over 65535".into())
            })
    }
}

/// PEM files for TLS with mutual authentication on the cluster port.
#[derive(Debug, Clone)]
pub struct ClusterTlsFiles {
    /// This server's private key.
    pub key: PathBuf,
    /// This server's certificate chain.
    pub cert: PathBuf,
    /// The cluster CA's certificate.
    pub ca: PathBuf,
}

/// How a server takes part in a cluster (the `ponder` binary always has one; a server
/// embedded as a library has none unless given).
#[derive(Debug, Clone, Default)]
pub struct ClusterSetup {
    /// Cluster ports of servers to join (`host:port`).
    pub joins: Vec<String>,
    /// `--canonical-address` values (`host[:port]`).
    pub canonical: Vec<String>,
    /// Server tags.
    pub tags: Vec<String>,
    /// TLS on the cluster port.
    pub tls: Option<ClusterTlsFiles>,
}

/// Parses canonical addresses (`host[:port]`, IPv6 in brackets) with `port` as default.
pub fn parse_canonical(values: &[String], port: u16) -> Result<Vec<(String, u16)>, Error> {
    values
        .iter()
        .map(|v| {
            let bad = || Error::Argument(format!("invalid --canonical-address `{v}`"));
            let (host, p) = if let Some(rest) = v.strip_prefix('[') {
                let (h, tail) = rest.split_once(']').ok_or_else(bad)?;
                match tail.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None if tail.is_empty() => (h, None),
                    None => return Err(bad()),
                }
            } else {
                match v.rsplit_once(':') {
                    Some((h, p)) if !h.contains(':') => (h, Some(p)),
                    _ => (v.as_str(), None),
                }
            };
            if host.is_empty() {
                return Err(bad());
            }
            let port = match p {
                Some(p) => p.parse().map_err(|_| bad())?,
                None => port,
            };
            Ok((host.to_string(), port))
        })
        .collect()
}

#[cfg(test)]
mod cluster_flag_tests {
    use super::*;
    use crate::config::{Cli, Command};
    use clap::Parser;

    fn args(extra: &[&str]) -> ServeArgs {
        let mut v = vec!["ponder", "serve"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v).unwrap().command {
            Some(Command::Serve(a)) => a,
            None => panic!("no serve"),
        }
    }

    #[test]
    fn cluster_tls_needs_all_three_files() {
        assert!(args(&[]).cluster_tls().unwrap().is_none());
        let all = args(&[
            "--cluster-tls-key",
            "k",
            "--cluster-tls-cert",
            "c",
            "--cluster-tls-ca",
            "a",
        ]);
        assert!(all.cluster_tls().unwrap().is_some());
        let err = args(&["--cluster-tls-cert", "c"])
            .cluster_tls()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing: --cluster-tls-key, --cluster-tls-ca"),
            "{err}"
        );
    }

    #[test]
    fn joins_tags_and_canonical_addresses_are_repeatable() {
        let a = args(&[
            "--join",
            "h:1",
            "--join",
            "h:2",
            "--server-tag",
            "x",
            "--server-tag",
            "y",
        ]);
        assert_eq!(a.join, vec!["h:1", "h:2"]);
        assert_eq!(a.server_tag, vec!["x", "y"]);
        assert_eq!(args(&[]).server_tag, vec!["default"]);
        let parsed = parse_canonical(
            &["a.b".into(), "c:5".into(), "[::1]:6".into(), "[::2]".into()],
            9,
        )
        .unwrap();
        assert_eq!(
            parsed,
            vec![
                ("a.b".to_string(), 9),
                ("c".to_string(), 5),
                ("::1".to_string(), 6),
                ("::2".to_string(), 9)
            ]
        );
        assert!(parse_canonical(&["c:x".into()], 9).is_err());
        assert!(parse_canonical(&[":5".into()], 9).is_err());
    }
}
