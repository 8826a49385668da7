//! The bodies of tripline's fuzz targets, one function per parser or
//! input surface, each taking arbitrary bytes.
//!
//! They live in an ordinary crate, not only in `fuzz/`, so that two
//! drivers share them: `cargo fuzz run <target>` (nightly, libFuzzer,
//! coverage-guided) explores new inputs, and `cargo test -p
//! tripline-fuzz-targets` (stable) replays every file of the checked-in
//! corpus `fuzz/corpus/<target>/` — the seeds and every input a fuzzer
//! once crashed on — so a fixed crash stays fixed without a nightly
//! toolchain.
//!
//! Every target's contract is the same: whatever the bytes, the code
//! under test returns (an error is fine) and never panics, hangs or
//! aborts. Where a parse succeeds, the target also drives what the parsed
//! value feeds (validation, building the breaker or proxy, computing
//! backoffs), because that is where a value no one expected does harm.

#![forbid(unsafe_code)]

pub mod config;
pub mod failback;
pub mod headers;
pub mod proxy_socket;
pub mod snapshot;

/// One fuzz target: its name (the `fuzz/fuzz_targets/<name>.rs` file and
/// the `fuzz/corpus/<name>/` directory) and its body.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The name cargo-fuzz and the corpus directory know it by.
    pub name: &'static str,
    /// The body: must return for any input, never panic.
    pub run: fn(&[u8]),
}

/// Every target, so the corpus test and the CI script cannot forget one.
pub const TARGETS: &[Target] = &[
    Target {
        name: "breaker_config_toml",
        run: config::breaker_config_toml,
    },
    Target {
        name: "breaker_config_yaml",
        run: config::breaker_config_yaml,
    },
    Target {
        name: "breaker_config_json",
        run: config::breaker_config_json,
    },
    Target {
        name: "retry_config",
        run: config::retry_config,
    },
    Target {
        name: "proxy_config",
        run: config::proxy_config,
    },
    Target {
        name: "scenario",
        run: config::scenario,
    },
    Target {
        name: "config_document",
        run: config::config_document,
    },
    Target {
        name: "deadline_headers",
        run: headers::deadline_headers,
    },
    Target {
        name: "retry_after",
        run: headers::retry_after,
    },
    Target {
        name: "failback_log",
        run: failback::failback_log,
    },
    Target {
        name: "snapshot_restore",
        run: snapshot::snapshot_restore,
    },
    Target {
        name: "proxy_request",
        run: proxy_socket::proxy_request,
    },
];
