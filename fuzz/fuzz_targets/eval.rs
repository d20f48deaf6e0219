//! cargo-fuzz target `eval`: see `fuzzing::eval` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::eval::check(data));
