//! Command line and typed configuration. Flags follow RethinkDB's `rethinkdb serve` so
//! operators' habits carry over; cluster flags are accepted and recorded for later use.
//!
//! `ServeArgs` is what the command line says; `Config` is what a server needs once its
//! listener is bound (`ServeArgs::config`), and what tests build directly.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::Error;

pub use crate::cluster_flags::{parse_canonical, ClusterSetup, ClusterTlsFiles};

/// `ponder`: a RethinkDB-compatible realtime document database.
#[derive(Parser, Debug)]
#[command(name = "ponder", version, about, long_about = None)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of `serve` when no subcommand is given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start the server.
    Serve(ServeArgs),
}

/// Options of `ponder serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Data directory.
    #[arg(short = 'd', long, default_value = "ponder_data")]
    pub directory: PathBuf,
    /// Address to listen on ("all" for every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Driver (client) port.
    #[arg(long, default_value_t = 28015)]
    pub driver_port: u16,
    /// HTTP admin port.
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Cluster port: where other servers of the cluster connect (bound on `--bind`).
    #[arg(long, default_value_t = 29015)]
    pub cluster_port: u16,
    /// Address (`host[:port]`, the port defaulting to the cluster port) other servers
    /// should dial to reach this one; repeatable. Default: the `--bind` address.
    #[arg(long)]
    pub canonical_address: Vec<String>,
    /// A tag of this server (repeatable); default `default`.
    #[arg(short = 't', long, default_value = "default")]
    pub server_tag: Vec<String>,
    /// PEM private key of this server's cluster certificate (with `--cluster-tls-cert`
    /// and `--cluster-tls-ca`: TLS with mutual authentication on the cluster port).
    #[arg(long)]
    pub cluster_tls_key: Option<PathBuf>,
    /// PEM certificate chain of this server on the cluster port.
    #[arg(long)]
    pub cluster_tls_cert: Option<PathBuf>,
    /// PEM certificate of the cluster's CA: peers must present a certificate it signed.
    #[arg(long)]
    pub cluster_tls_ca: Option<PathBuf>,
    /// Added to every port (to run several servers on one machine).
    #[arg(short = 'o', long, default_value_t = 0)]
    pub port_offset: u16,
    /// Password of the `admin` user, set when the data directory is created.
    #[arg(long)]
    pub initial_password: Option<String>,
    /// Storage cache size in MB, or `auto`: RethinkDB's default, half of the memory
    /// available at start-up less 1024 MB, at least 100 MB.
    #[arg(long, default_value = "auto", value_parser = parse_cache_size)]
    pub cache_size: CacheSize,
    /// The part of the cache, in MB, that holds decoded documents for point reads and
    /// writes (the engine's block cache gets the rest); `auto`: half of the cache.
    #[arg(long, default_value = "auto", value_parser = parse_cache_size)]
    pub doc_cache_size: CacheSize,
    /// This server's name.
    #[arg(short = 'n', long, default_value = "ponder")]
    pub server_name: String,
    /// Log file (default: standard error).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Another server's cluster port to join (`host:port`); repeatable.
    #[arg(short = 'j', long)]
    pub join: Vec<String>,
    /// Most client connections served at once.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds a connection may take to finish its handshake (TLS included) before it
    /// is closed.
    #[arg(long, default_value_t = 10)]
    pub handshake_timeout_secs: u64,
    /// Longest time a soft-durability write stays unflushed, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub soft_flush_ms: u64,
    /// Free disk space (MB) that writes may not eat into: below it writes fail with a
    /// "disk full" error and resume once space is freed. 0 turns the check off.
    #[arg(long, default_value_t = 64)]
    pub min_free_disk_mb: u64,
    /// PEM private key for TLS on the driver port (with `--driver-tls-cert`).
    #[arg(long, requires = "driver_tls_cert")]
    pub driver_tls_key: Option<PathBuf>,
    /// PEM certificate chain for TLS on the driver port (with `--driver-tls-key`).
    #[arg(long, requires = "driver_tls_key")]
    pub driver_tls_cert: Option<PathBuf>,
    /// Query evaluation threads (default: 4 per core).
    #[arg(long)]
    pub eval_threads: Option<usize>,
    /// `r.http` may reach public addresses only: loopback, private, link-local and
    /// other special-purpose addresses are refused (against server-side request
    /// forgery; RethinkDB has no such option and reaches any address).
    #[arg(long)]
    pub reql_http_public_only: bool,
    /// Memory one query may hold, in MB: a query that allocates more fails with a
    /// ReqlResourceLimitError; the server and other queries are unaffected.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub query_memory_mb: u64,
    /// Turns the query optimizer off: queries run as RethinkDB runs them, never answered
    /// from an index they do not name (the `optimizer` global optarg does it per query).
    #[arg(long)]
    pub no_optimizer: bool,
    /// Address the HTTP admin listens on ("all" for every interface; default: `--bind`).
    #[arg(long)]
    pub bind_http: Option<String>,
    /// Do not serve the HTTP admin (web console, `/ajax/reql`, `/metrics`).
    #[arg(long)]
    pub no_http_admin: bool,
    /// PEM private key for TLS on the HTTP admin port (with `--http-tls-cert`).
    #[arg(long, requires = "http_tls_cert")]
    pub http_tls_key: Option<PathBuf>,
    /// PEM certificate chain for TLS on the HTTP admin port (with `--http-tls-key`).
    #[arg(long, requires = "http_tls_key")]
    pub http_tls_cert: Option<PathBuf>,
    /// Serve the web console's files from this directory instead of the embedded ones.
    #[arg(long)]
    pub web_static_directory: Option<PathBuf>,
    /// Seconds an idle `/ajax/reql` connection lives (RethinkDB: 300). For tests.
    #[arg(long, default_value_t = 300, hide = true)]
    pub http_conn_timeout_secs: u64,
    /// Most HTTP connections (sockets) served at once.
    #[arg(long, default_value_t = 512, hide = true)]
    pub http_max_connections: usize,
    /// Most open `/ajax/reql` connections per client address.
    #[arg(long, default_value_t = 128, hide = true)]
    pub http_max_conns_per_client: usize,
    /// Seconds an HTTP client may take to send a request's headers.
    #[arg(long, default_value_t = 10, hide = true)]
    pub http_header_timeout_secs: u64,
}

impl ServeArgs {
    /// The listen address.
    pub fn bind_addr(&self) -> Result<IpAddr, Error> {
        parse_bind(&self.bind, "--bind")
    }

    /// The number of evaluation threads.
    pub fn eval_threads(&self) -> usize {
        self.eval_threads.unwrap_or_else(default_eval_threads)
    }

    /// The HTTP admin's listen address: `--bind-http`, else `--bind`.
    pub fn http_bind_addr(&self) -> Result<IpAddr, Error> {
        match &self.bind_http {
            Some(b) => parse_bind(b, "--bind-http"),
            None => self.bind_addr(),
        }
    }

    /// The HTTP port after the offset.
    pub fn http_port(&self) -> Result<u16, Error> {
        self.http_port
            .checked_add(self.port_offset)
            .ok_or_else(|| Error::Argument("--http-port + --port-offset exceeds 65535".into()))
    }

    /// The driver port after the offset.
    pub fn driver_port(&self) -> Result<u16, Error> {
        self.driver_port
            .checked_add(self.port_offset)
            .ok_or_else(|| Error::Argument("--driver-port + --port-offset exceeds 65535".into()))
    }

    /// The server's configuration (everything but the listen address and port).
    pub fn config(&self) -> Config {
        Config {
            directory: self.directory.clone(),
            server_name: self.server_name.clone(),
            initial_password: self.initial_password.clone().unwrap_or_default(),
            cache_size_mb: self.cache_size.mb(),
            cache_size_auto: self.cache_size == CacheSize::Auto,
            doc_cache_mb: match self.doc_cache_size {
                CacheSize::Auto => None,
                CacheSize::Mb(n) => Some(n),
            },
            min_free_disk_mb: self.min_free_disk_mb,
            soft_flush_interval: Duration::from_millis(self.soft_flush_ms),
            max_connections: self.max_connections,
            handshake_timeout: Duration::from_secs(self.handshake_timeout_secs),
            eval_threads: self.eval_threads(),
            query_memory_mb: self.query_memory_mb,
            optimizer: !self.no_optimizer,
            network: if self.reql_http_public_only {
                reql::NetworkPolicy::PublicOnly
            } else {
                reql::NetworkPolicy::AnyAddress
            },
            tls: match (&self.driver_tls_cert, &self.driver_tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                }),
                _ => None,
            },
            log_file: self.log_file.clone(),
            http: HttpOptions {
                tls: match (&self.http_tls_cert, &self.http_tls_key) {
                    (Some(cert), Some(key)) => Some(TlsFiles {
                        cert: cert.clone(),
                        key: key.clone(),
                    }),
                    _ => None,
                },
                static_dir: self.web_static_directory.clone(),
                conn_timeout: Duration::from_secs(self.http_conn_timeout_secs),
                max_connections: self.http_max_connections,
                max_conns_per_client: self.http_max_conns_per_client,
                header_timeout: Duration::from_secs(self.http_header_timeout_secs.max(1)),
                ..HttpOptions::default()
            },
            http_port: self.http_port.saturating_add(self.port_offset),
            cluster_port: self.cluster_port.saturating_add(self.port_offset),
            hostname: Config::default_hostname(),
            argv: std::env::args().collect(),
            cluster: Some(ClusterSetup {
                joins: self.join.clone(),
                canonical: self.canonical_address.clone(),
                tags: self.server_tag.clone(),
                tls: self.cluster_tls().unwrap_or(None),
            }),
        }
    }
}

/// A listen address: an IP, "all" or "localhost".
fn parse_bind(s: &str, flag: &str) -> Result<IpAddr, Error> {
    match s {
        "all" => Ok(IpAddr::from([0, 0, 0, 0])),
        "localhost" => Ok(IpAddr::from([127, 0, 0, 1])),
        s => s
            .parse()
            .map_err(|_| Error::Argument(format!("invalid {flag} address `{s}`"))),
    }
}

/// Four evaluation threads per core.
fn default_eval_threads() -> usize {
    4 * std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// PEM files for TLS on the driver port.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// How the HTTP admin port serves (the listener itself is handed to
/// `Server::start_with`).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// TLS on the HTTP port, if set.
    pub tls: Option<TlsFiles>,
    /// Serve the console from this directory instead of the embedded assets.
    pub static_dir: Option<PathBuf>,
    /// How long an idle `/ajax/reql` connection lives (RethinkDB: 300 s).
    pub conn_timeout: Duration,
    /// Most HTTP connections (sockets) served at once.
    pub max_connections: usize,
    /// Most open `/ajax/reql` connections per client address.
    pub max_conns_per_client: usize,
    /// Largest request body accepted (a query over it is answered 413).
    pub max_body_bytes: usize,
    /// Longest time a client may take to send a request's headers (slowloris).
    pub header_timeout: Duration,
    /// Longest time a client may take to send a request's body.
    pub body_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            tls: None,
            static_dir: None,
            conn_timeout: Duration::from_secs(300),
            max_connections: 512,
            max_conns_per_client: 128,
            max_body_bytes: proto::frame::MAX_QUERY_BYTES + 8,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// What one server needs: where its data lives and how it serves. Every server of a
/// process has its own (nothing is process-wide).
#[derive(Debug, Clone)]
pub struct Config {
    /// Data directory (created if missing; the engine lives in its `data` folder).
    pub directory: PathBuf,
    /// This server's name.
    pub server_name: String,
    /// Password of `admin`, set when the data directory is created ("" for none).
    pub initial_password: String,
    /// Cache size in MB: half for the engine's block cache, half for the shards'
    /// caches of decoded documents (this server's `store::CacheBudget`).
    pub cache_size_mb: u64,
    /// Whether `cache_size_mb` was chosen by RethinkDB's `auto` rule (shown as "auto"
    /// in `rethinkdb.server_config`).
    pub cache_size_auto: bool,
    /// MB of the cache given to the document caches (`None`: half); never more than
    /// the whole cache.
    pub doc_cache_mb: Option<u64>,
    /// Free disk space (MB) that writes may not eat into (0 turns the check off).
    pub min_free_disk_mb: u64,
    /// Longest time a soft-durability write stays unflushed.
    pub soft_flush_interval: Duration,
    /// Most client connections served at once.
    pub max_connections: usize,
    /// Longest time a connection may take to finish its handshake (TLS included).
    pub handshake_timeout: Duration,
    /// Query evaluation threads.
    pub eval_threads: usize,
    /// Whether the query optimizer is on (`--no-optimizer` turns it off).
    pub optimizer: bool,
    /// The addresses `r.http` may reach.
    pub network: reql::NetworkPolicy,
    /// Memory one query may hold, in MB (`reql::memory`).
    pub query_memory_mb: u64,
    /// TLS on the driver port, if set.
    pub tls: Option<TlsFiles>,
    /// Log file (default: standard error).
    pub log_file: Option<PathBuf>,
    /// How the HTTP admin serves, when it has a listener.
    pub http: HttpOptions,
    /// HTTP admin port, as reported in `rethinkdb.server_status`.
    pub http_port: u16,
    /// Cluster port, as reported in `rethinkdb.server_status`.
    pub cluster_port: u16,
    /// Host name, as reported in `rethinkdb.server_status`.
    pub hostname: String,
    /// Command line, as reported in `rethinkdb.server_status`.
    pub argv: Vec<String>,
    /// Clustering (`None`: a server alone, with no cluster port).
    pub cluster: Option<ClusterSetup>,
}

impl Config {
    /// The defaults of `ponder serve` with data in `directory`.
    pub fn new(directory: impl Into<PathBuf>) -> Config {
        Config {
            directory: directory.into(),
            server_name: "ponder".into(),
            initial_password: String::new(),
            cache_size_mb: 256,
            cache_size_auto: false,
            doc_cache_mb: None,
            min_free_disk_mb: 64,
            soft_flush_interval: Duration::from_millis(100),
            max_connections: 10_000,
            handshake_timeout: Duration::from_secs(10),
            eval_threads: default_eval_threads(),
            optimizer: true,
            network: reql::NetworkPolicy::AnyAddress,
            query_memory_mb: 1024,
            tls: None,
            log_file: None,
            http: HttpOptions::default(),
            http_port: 8080,
            cluster_port: 29015,
            hostname: Config::default_hostname(),
            argv: Vec::new(),
            cluster: None,
        }
    }

    /// `$HOSTNAME`, or "localhost".
    fn default_hostname() -> String {
        std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into())
    }

    /// The byte budget of the shards' document caches: `doc_cache_mb`, or half the
    /// cache size, and never more than the cache.
    pub fn doc_cache_bytes(&self) -> usize {
        usize::try_from(self.doc_cache_part()).unwrap_or(usize::MAX)
    }

    /// The engine's block cache in bytes: the rest of the cache.
    pub fn block_cache_bytes(&self) -> u64 {
        self.cache_bytes() - self.doc_cache_part()
    }

    fn doc_cache_part(&self) -> u64 {
        let all = self.cache_bytes();
        match self.doc_cache_mb {
            None => all / 2,
            Some(mb) => mb.saturating_mul(1 << 20).min(all),
        }
    }

    fn cache_bytes(&self) -> u64 {
        self.cache_size_mb.saturating_mul(1 << 20)
    }
}

/// `--cache-size`: a number of MB, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheSize {
    /// RethinkDB's rule, applied when the server starts.
    Auto,
    /// This many MB.
    Mb(u64),
}

impl CacheSize {
    /// The size in MB (for `Auto`, from the memory available now).
    pub fn mb(self) -> u64 {
        match self {
            CacheSize::Mb(n) => n,
            CacheSize::Auto => auto_cache_mb(available_memory_mb()),
        }
    }
}

fn parse_cache_size(s: &str) -> Result<CacheSize, String> {
    if s == "auto" {
        return Ok(CacheSize::Auto);
    }
    s.parse::<u64>()
        .map(CacheSize::Mb)
        .map_err(|_| format!("expected a number of MB or `auto`, got `{s}`"))
}

/// RethinkDB's automatic cache size: `(available - 1024 MB) / 2`, at least 100 MB.
fn auto_cache_mb(available_mb: u64) -> u64 {
    (available_mb.saturating_sub(1024) / 2).max(100)
}

/// Memory available to a new process (Linux's `MemAvailable`, which counts the disk
/// cache the kernel can drop, as RethinkDB's `get_avail_mem_size` does); 0 when unknown,
/// which gives the 100 MB minimum.
fn available_memory_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

#[cfg(test)]
mod cache_size_tests {
    use super::*;

    #[test]
    fn auto_follows_rethinkdbs_rule() {
        assert_eq!(auto_cache_mb(24_000), 11_488);
        assert_eq!(auto_cache_mb(1_224), 100);
        assert_eq!(auto_cache_mb(0), 100);
        assert_eq!(parse_cache_size("auto"), Ok(CacheSize::Auto));
        assert_eq!(parse_cache_size("512"), Ok(CacheSize::Mb(512)));
        assert!(parse_cache_size("lots").is_err());
        assert!(CacheSize::Auto.mb() >= 100);
    }

    #[test]
    fn the_document_cache_takes_its_part_of_the_cache() {
        let mut c = Config::new("d");
        c.cache_size_mb = 100;
        assert_eq!(c.doc_cache_bytes(), 50 << 20);
        assert_eq!(c.block_cache_bytes(), 50 << 20);
        c.doc_cache_mb = Some(10);
        assert_eq!(c.doc_cache_bytes(), 10 << 20);
        assert_eq!(c.block_cache_bytes(), 90 << 20);
        c.doc_cache_mb = Some(0);
        assert_eq!((c.doc_cache_bytes(), c.block_cache_bytes()), (0, 100 << 20));
        // More than the cache: all of it, and no block cache.
        c.doc_cache_mb = Some(1_000);
        assert_eq!((c.doc_cache_bytes(), c.block_cache_bytes()), (100 << 20, 0));
    }
}
