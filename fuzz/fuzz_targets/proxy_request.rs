//! libFuzzer driver for `tripline_fuzz_targets::proxy_socket::proxy_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tripline_fuzz_targets::proxy_socket::proxy_request(data));
