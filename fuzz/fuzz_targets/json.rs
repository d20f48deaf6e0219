//! cargo-fuzz target `json`: see `fuzzing::json` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::json::check(data));
