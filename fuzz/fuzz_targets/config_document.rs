//! libFuzzer driver for `tripline_fuzz_targets::config::config_document`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::config::config_document(data));
