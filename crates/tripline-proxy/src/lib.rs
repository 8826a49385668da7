//! `tripline-proxy`: an HTTP sidecar that gives any service, in any
//! language, the protection of tripline's breakers, retry budgets and
//! outlier detection.
//!
//! A request arrives on a listener, the first matching [route](config::RouteSection)
//! takes it, and the route's cluster of endpoints serves it:
//!
//! ```text
//! client ─▶ listener ─▶ route: bulkhead ─▶ route breaker ─▶ deadline ─▶ retry loop (budget)
//!                                                                         └─▶ cluster: endpoint breaker + outlier ─▶ upstream
//! ```
//!
//! Every protection is the library's own type, configured in the library's
//! vocabulary: the route's breaker is a [`tripline::CircuitBreaker`], the
//! endpoints live in a [`tripline::cluster::Cluster`] (per-endpoint
//! breakers, outlier ejection, panic mode, balancing), retries spend a
//! shared [`tripline::budget::RetryBudget`], deadlines are
//! [`tripline::timeout::Deadline`]s read from and forwarded in
//! `tripline-timeout-ms`.
//!
//! A request the proxy refuses says why, in headers a machine can read
//! and a body a human can: see [`rejection`] for the causes, their short
//! flags and their Envoy analogues.
//!
//! With an `[admin]` section the proxy serves `GET /metrics` on a listener
//! of its own: every route breaker, cluster and retry budget it built,
//! through `tripline-prometheus`, and its request and refusal counts by
//! route (see [`metrics`] for the names).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tripline_proxy::{Proxy, config::ProxyConfig};
//!
//! let config = ProxyConfig::load(std::path::Path::new("proxy.toml"))?;
//! let running = Proxy::try_new(config)?.start().await?;
//! println!("listening on {:?}", running.local_addrs());
//! running.run_until_signal().await; // SIGTERM or Ctrl-C, then drain
//! # Ok(())
//! # }
//! ```
//!
//! # What this milestone covers
//!
//! HTTP/1.1 both ways with keep-alive pools per endpoint, h2c (HTTP/2 with
//! prior knowledge) from clients and to clusters marked `protocol = "h2c"`,
//! TLS (rustls on `ring`) on listeners with HTTP/2 and HTTP/1.1 chosen by
//! ALPN, and to clusters (private CA or built-in roots, server name, ALPN,
//! HTTP/2 when the endpoint picks it), DNS re-resolution of endpoint names
//! (`dns_refresh`; addresses that stay keep their state), streamed bodies,
//! graceful drain, request-smuggling refusal, route breakers, endpoint
//! breakers with outlier ejection, budgeted retries and deadlines,
//! Prometheus metrics on an admin listener, and a choice of runtime
//! ([`Threading`]: work-stealing, or one single-threaded runtime per core
//! on `SO_REUSEPORT` listeners). Not yet: rate limits, hedging, fault
//! injection, access log, reload on SIGHUP, client certificates (mTLS).

#![forbid(unsafe_code)]

mod admin;
pub mod body;
pub mod config;
mod dns;
mod forward;
mod headers;
pub mod metrics;
mod proxy;
pub mod rejection;
mod route;
mod runtime;
mod server;
mod smuggling;
mod tls;
mod upstream;

pub use proxy::{Proxy, ProxyBuilder};
pub use runtime::Threading;
pub use server::{Drained, Running};
