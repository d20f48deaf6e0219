//! `client`: a small async driver for the RethinkDB wire protocol, used by
//! Ponder's tests and by `ponder-bench`.
//!
//! It speaks the V1_0 handshake with SCRAM-SHA-256 ([`scram`]), then sends
//! queries as JSON term trees and *pipelines* them: any number of queries may
//! be in flight on one [`Connection`] at once (it is `Clone`; share it between
//! tasks), each answered by token, in whatever order the server finishes them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), client::Error> {
//! use client::{term, Connection};
//! use serde_json::{json, Value};
//!
//! let conn = Connection::connect("127.0.0.1", 28015).await?;
//! let doc = conn
//!     .run(term::get(term::table("bench", "usertable"), &json!("user1")), Value::Null)
//!     .await?;
//! let all = conn.run_all(term::table("bench", "usertable"), Value::Null).await?;
//! # Ok(()) }
//! ```
//!
//! Layers: [`Connection::query`] returns the raw [`Response`] (error
//! responses included, partial batches as they come); [`Connection::run`] and
//! [`Connection::run_all`] collect whole results and turn error responses into
//! [`Error::Reql`]. Terms are plain `serde_json::Value`s; [`term`] has
//! builders for the common ones.

mod conn;
mod response;
pub mod scram;
pub mod term;

pub use conn::{ConnectOptions, Connection};
pub use proto::ql2::{ErrorType, ResponseType};
pub use response::{ReqlError, Response};

/// Everything that can go wrong talking to a server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Socket error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Connect plus handshake took longer than the connect timeout.
    #[error("timed out connecting")]
    Timeout,
    /// The handshake went wrong on the client side (malformed or unexpected
    /// server message, bad server signature).
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The server refused the handshake (e.g. wrong password).
    #[error("server refused the handshake (code {code}): {message}")]
    Auth {
        /// The server's `error` text.
        message: String,
        /// The server's `error_code`.
        code: i64,
    },
    /// The server sent something that is not a valid response, or the
    /// caller passed something that cannot be sent.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The query failed on the server.
    #[error("{0}")]
    Reql(ReqlError),
    /// The connection is closed; the reason is kept from when it closed.
    #[error("connection closed: {0}")]
    Closed(String),
}
