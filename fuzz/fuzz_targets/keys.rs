//! cargo-fuzz target `keys`: see `fuzzing::keys` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::keys::check(data));
