//! libFuzzer driver for `tripline_fuzz_targets::failback::failback_log`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::failback::failback_log(data));
