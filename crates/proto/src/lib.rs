//! `proto`: RethinkDB's client wire protocol as pure types and functions.
//!
//! No sockets and no async runtime live here: callers feed bytes in and get
//! bytes (or parsed values) out. Modules:
//! - [`ql2`]: the `ql2.proto` enums with their exact wire numbers;
//! - [`handshake`]: the server side of the connection handshake (V1_0 SCRAM
//!   and the legacy V0_3/V0_4 auth-key handshake) as a state machine;
//! - [`frame`]: query/response framing, with [`query`] parsing and
//!   [`response`] building re-exported from it.
//!
//! Invariant for the whole crate: nothing a client sends can make it panic,
//! and every buffer it fills from client input is bounded.

pub mod frame;
pub mod handshake;
pub mod ql2;
pub mod query;
pub mod response;
