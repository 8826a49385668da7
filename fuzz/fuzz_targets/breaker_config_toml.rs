//! libFuzzer driver for `tripline_fuzz_targets::config::breaker_config_toml`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::config::breaker_config_toml(data));
