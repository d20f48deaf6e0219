//! Command line and typed configuration. Flags follow RethinkDB's `rethinkdb serve` so
//! operators' habits carry over; cluster flags are accepted and recorded for later use.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Cluster port (recorded; clustering is not served yet).
    #[arg(long, default_value_t = 29015)]
    pub cluster_port: u16,
    /// Added to every port (to run several servers on one machine).
    #[arg(short = 'o', long, default_value_t = 0)]
    pub port_offset: u16,
    /// Password of the `admin` user, set when the data directory is created.
    #[arg(long)]
    pub initial_password: Option<String>,
    /// Storage cache size in MB.
    #[arg(long, default_value_t = 256)]
    pub cache_size: u64,
    /// This server's name.
    #[arg(short = 'n', long, default_value = "ponder")]
    pub server_name: String,
    /// Log file (default: standard error).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Another server to join (recorded; clustering is not served yet).
    #[arg(short = 'j', long)]
    pub join: Vec<String>,
    /// Most client connections served at once.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
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
}

impl ServeArgs {
    /// The listen address.
    pub fn bind_addr(&self) -> Result<IpAddr, String> {
        match self.bind.as_str() {
            "all" => Ok(IpAddr::from([0, 0, 0, 0])),
            "localhost" => Ok(IpAddr::from([127, 0, 0, 1])),
            s => s
                .parse()
                .map_err(|_| format!("invalid --bind address `{s}`")),
        }
    }

    /// The number of evaluation threads.
    pub fn eval_threads(&self) -> usize {
        self.eval_threads.unwrap_or_else(|| {
            4 * std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        })
    }

    /// The driver port after the offset.
    pub fn driver_port(&self) -> Result<u16, String> {
        self.driver_port
            .checked_add(self.port_offset)
            .ok_or_else(|| "--driver-port + --port-offset exceeds 65535".to_string())
    }
}
