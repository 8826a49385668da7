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
#![forbid(unsafe_code)]

pub mod body;
pub mod config;
mod forward;
mod headers;
mod proxy;
pub mod rejection;
mod route;
mod server;
mod smuggling;

pub use proxy::{Proxy, ProxyBuilder};
pub use server::{Drained, Running};
