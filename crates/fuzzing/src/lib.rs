//! The fuzz targets' bodies, one module per target, as plain functions of the input
//! bytes: `fuzz/fuzz_targets/<target>.rs` (cargo-fuzz, libFuzzer, nightly) calls them,
//! and `tests/corpus.rs` replays the committed corpus `fuzz/corpus/<target>/` through
//! them on stable, so every input a fuzzer once found stays a regression test.
//!
//! Each body returns normally for every input; a failed `assert!` or any panic below
//! it is a finding. The invariants checked are stated in each module's note.

pub mod eval;
pub mod frame;
pub mod json;
pub mod keys;
pub mod query;

/// A target's body, by the name of its corpus folder.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    Some(match name {
        "frame" => frame::check,
        "query" => query::check,
        "json" => json::check,
        "keys" => keys::check,
        "eval" => eval::check,
        _ => return None,
    })
}
