//! ReQL: compiling a query's JSON term tree (`query::compile_query` from a frame's
//! bytes) into a checked `Term` tree and evaluating it into values, selections and lazy
//! streams.
//!
//! The crate reaches tables only through the `TableAccess` trait it defines
//! (`access.rs`), so it is tested without storage and knows nothing of the engine.
//! Wrappers of a table (interruption here, permissions in `cluster`) are `layer`s.
//! Every error is a `ReqlError` carrying RethinkDB's error class, exact message and a
//! backtrace; the server maps it to the wire in one place.

pub mod access;
pub mod blocking;
pub mod compiled;
pub mod ctx;
pub mod error;
pub mod eval;
pub mod interrupt;
pub mod layer;
pub mod memory;
pub mod optimize;
pub mod parallel;
pub mod plan;
pub mod query;
pub mod slice;
pub mod spec;
pub mod term;
pub mod terms;
#[cfg(test)]
pub(crate) mod testing;
pub mod value;
pub mod write_op;

pub use access::{
    Change, Durability, IndexSpec, IndexStatus, NetworkPolicy, ReadMode, Replicas, Table,
    TableAccess, TableOptions, Ticket, Unkeyed, WriteHook,
};
pub use ctx::QueryCtx;
pub use error::{ErrorKind, Frame, ReqlError, Result};
pub use eval::eval;
pub use layer::{Call, Layer, Layered};
pub use query::{compile_query, CompiledQuery};
pub use term::{compile_term, Term};
pub use value::{DatumStream, Env, Sequence, Val};
pub use write_op::{Applied, WriteOp};
