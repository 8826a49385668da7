//! libFuzzer driver for `tripline_fuzz_targets::config::proxy_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::config::proxy_config(data));
