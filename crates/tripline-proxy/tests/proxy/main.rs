//! The proxy over real sockets on 127.0.0.1: upstreams that fail, hang,
//! close mid-answer or push back; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod access_log;
mod admin_api;
mod admin_browser;
mod admin_config;
mod admin_events;
mod balancing;
mod breaking;
mod config_errors;
mod default_timeout;
mod dns;
mod drain;
mod envoy;
mod explained;
mod fallbacks;
mod faults;
mod faults_drill;
mod grpc;
mod h2_resets;
mod h2c;
mod headers;
mod health;
mod hedging;
mod hostile;
mod http1_answers;
mod http1_serving;
mod keyed_breakers;
mod latency;
mod log_lines;
mod metrics;
mod mtls;
mod outlier;
mod overflow;
mod parking;
mod per_core;
mod protect_config;
mod rate_limits;
mod readiness;
mod refusals;
mod reload;
mod retries;
mod retry_policy;
mod scrape;
mod support;
mod tls;
mod upgrades;
mod upstream_failures;
mod upstream_pool;

/// The `tripline` binary's allocator (mimalloc): the memory figures the
/// hostile-client suite asserts are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
