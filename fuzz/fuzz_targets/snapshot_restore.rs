//! libFuzzer driver for `tripline_fuzz_targets::snapshot::snapshot_restore`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::snapshot::snapshot_restore(data));
