//! cargo-fuzz target `frame`: see `fuzzing::frame` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::frame::check(data));
