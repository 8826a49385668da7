//! # tripline-prometheus
//!
//! Prometheus metrics for tripline's breakers and policies, collected at
//! scrape time.
//!
//! tripline already counts what an operator needs: every breaker keeps its
//! calls by outcome, its window and its state (`CircuitBreaker::metrics`),
//! a registry keeps its counts by state, and every policy keeps its own
//! stats. An exporter that added a counter of its own to every call would
//! make every call pay for a scrape that happens every fifteen seconds. So
//! this crate adds nothing to the call path: the [`Exporter`] is a
//! [`prometheus_client`] [`Collector`](prometheus_client::collector::Collector)
//! that reads those counts when Prometheus asks, and writes them under
//! stable names (see [`names`]) with bounded labels — a breaker's name, a
//! state, an outcome, a reason; never a request id.
//!
//! What it reads, and how:
//!
//! * breakers, one at a time ([`Exporter::register_breaker`]) or a whole
//!   [`BreakerRegistry`](tripline::BreakerRegistry) whose breakers appear
//!   and disappear with it ([`Exporter::register_registry`]), at a
//!   [`Detail`] that bounds the series per breaker;
//! * retry policies and pipelines, retry budgets, bulkheads, adaptive
//!   throttles, clusters (outlier detection, panic mode, endpoint
//!   breakers) and failback queues;
//! * state transitions by from/to/reason, counted from the breaker's
//!   events — transitions are rare, so counting them is not a call-path
//!   cost;
//! * optionally, a call-duration histogram per breaker, through the
//!   [`TimedBreaker`] wrapper: only calls made through the wrapper pay for
//!   it.
//!
//! For everything in a process, register into [`global()`] and serve it.
//! The [`http`] module serves `/metrics` (OpenMetrics or the Prometheus
//! text format 0.0.4, by content negotiation) as a tower service or a
//! ready-made hyper server.
//!
//! ```
//! use tripline::{CircuitBreaker, CircuitBreakerConfig};
//! use tripline_prometheus::{Detail, Exporter};
//!
//! let exporter = Exporter::builder().build().unwrap();
//! let breaker = CircuitBreaker::try_new(CircuitBreakerConfig {
//!     name: "payments".into(),
//!     ..Default::default()
//! })
//! .unwrap();
//! exporter.register_breaker(&breaker, Detail::Full).unwrap();
//! let _ = breaker.call(|| Ok::<_, ()>(()));
//!
//! let text = exporter.render(tripline_prometheus::http::Format::PrometheusText).unwrap();
//! assert!(text.contains(r#"tripline_breaker_state_code{name="payments"} 0"#));
//! assert!(text.contains(r#"tripline_breaker_calls_total{name="payments",outcome="successful"} 1"#));
//! ```

#![forbid(unsafe_code)]

mod collect;
mod encode;
mod error;
mod exporter;
mod histogram;
pub mod http;
pub mod names;
mod outlier;
mod sample;
mod source;

use std::sync::OnceLock;

pub use error::ExportError;
pub use exporter::{Exporter, ExporterBuilder, SourceKind};
pub use histogram::TimedBreaker;
pub use source::Detail;

/// The process-wide exporter, with the default settings: register every
/// breaker, registry and policy of the process here, and serve it with
/// [`http::MetricsHandler::new`]. Libraries that make breakers can
/// register them without being handed an exporter.
///
/// ```
/// use tripline::{CircuitBreaker, CircuitBreakerConfig};
/// use tripline_prometheus::{Detail, global};
///
/// let breaker = CircuitBreaker::try_new(CircuitBreakerConfig {
///     name: "global-doc".into(),
///     ..Default::default()
/// })
/// .unwrap();
/// global().register_breaker(&breaker, Detail::Essential).unwrap();
/// assert!(global().register_breaker(&breaker, Detail::Essential).is_err(), "once only");
/// ```
pub fn global() -> &'static Exporter {
    static GLOBAL: OnceLock<Exporter> = OnceLock::new();
    GLOBAL.get_or_init(Exporter::default)
}
