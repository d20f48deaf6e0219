//! `server`: Ponder's server as a library. [`Server::start`] opens the storage of one
//! data directory and serves RethinkDB drivers on a bound listener until
//! [`Server::shutdown`]; [`run`] does both around a shutdown future. The `ponder`
//! binary is a thin command line around [`run`].
//!
//! A server owns everything it uses (storage engine, document-cache budget, evaluation
//! threads, log destination); nothing is process-global, so one process can run
//! several servers (the tests in `tests/` do). [`Server::start_with_http`] also serves
//! the HTTP admin (console, RethinkDB's `/ajax/reql`, `/metrics`) on a second listener.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let server = server::Server::start(listener, server::Config::new("ponder_data")).await?;
//! println!("serving on {}", server.local_addr());
//! server.shutdown().await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod alloc;
mod cluster_flags;
pub mod config;
mod conn;
mod error;
mod exec;
mod http;
pub mod membership;
mod outbox;
mod principal;
mod serve;
mod session;
mod state;
mod tls;
mod wire;

pub use config::{ClusterSetup, ClusterTlsFiles, Config, HttpOptions, TlsFiles};
pub use error::Error;
pub use serve::{run, run_full, run_with_http, Server};
