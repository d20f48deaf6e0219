//! cargo-fuzz target `query`: see `fuzzing::query` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::query::check(data));
