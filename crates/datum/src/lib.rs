//! The Datum: ReQL's JSON value with its pseudo-types, total order and key encoding.
//!
//! Invariants:
//! - Objects keep their keys sorted (a `BTreeMap`), as RethinkDB does, so printing and
//!   comparison are deterministic.
//! - Numbers are finite `f64`; NaN and infinities never enter a Datum (the evaluator
//!   rejects them with RethinkDB's errors before constructing one).
//! - Pseudo-types (`TIME`, `BINARY`, `GEOMETRY`) are objects carrying `$reql_type$`, the
//!   same representation RethinkDB puts on the wire; `ptype` gives typed access.
//! - `MinVal`/`MaxVal` exist only inside queries (range bounds); they never reach storage
//!   or the wire.

mod array;
mod fast;
mod json;
pub mod keys;
mod nesting;
mod order;
pub mod ptype;
mod value;
mod version;
pub mod work;

pub use array::Array;
pub use fast::{JsonReader, TextMark};
pub use json::{
    from_json_owned, from_json_slice, from_json_slice_serde, from_json_value, from_stored,
    to_json_value, JsonError,
};
pub use nesting::{text_nesting_exceeds, MAX_NESTING};
pub use order::cmp;
pub use value::{Datum, Object, Str};
pub use version::Version;

/// Test hook for the fuzzers (`crates/fuzzing`): whether `from_json_owned` would keep
/// `bytes` undecoded, i.e. `fast::validate_canonical`. Not an API.
#[doc(hidden)]
pub fn validate_canonical(bytes: &[u8]) -> bool {
    fast::validate_canonical(bytes)
}

/// Test hook for the fuzzers: the hand-written decoder alone (`None` where it leaves
/// the input to serde) and whether it found the text canonical. Not an API.
#[doc(hidden)]
pub fn parse_fast(bytes: &[u8]) -> Option<(Datum, bool)> {
    fast::parse(bytes)
}
