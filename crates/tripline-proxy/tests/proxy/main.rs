//! The proxy over real sockets on 127.0.0.1: upstreams that fail, hang,
//! close mid-answer or push back; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod bad_input;
mod breaking;
mod dns;
mod drain;
mod h2c;
mod headers;
mod metrics;
mod outlier;
mod per_core;
mod refusals;
mod retries;
mod support;
mod tls;
mod upstream_failures;
