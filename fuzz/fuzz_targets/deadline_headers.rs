//! libFuzzer driver for `tripline_fuzz_targets::headers::deadline_headers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::headers::deadline_headers(data));
