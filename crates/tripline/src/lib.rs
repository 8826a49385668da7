//! # tripline
//!
//! Fault tolerance for services that call other services. When a dependency
//! turns slow or dies, callers' threads, connections and retries pile up and
//! one sick dependency takes down the whole call graph; tripline stops that
//! cascade.
//!
//! * [`CircuitBreaker`] — trips on failure rate *and* slow-call rate over a
//!   count or time window, probes carefully while half-open (no leaked or
//!   stuck probe), and explains every decision with an [`Event`].
//! * [`clock`] — time is injected: [`ManualClock`] makes
//!   every time-dependent behaviour testable without sleeping.
//! * [`classify`] — which results count as failures.
//! * The policies that must work with a breaker: [`retry`]
//!   with a shared [`budget`], [`timeout`]s and deadlines that travel with
//!   the request, [`bulkhead`], [`fallback`], [`hedge`], and the
//!   [`pipeline`] that composes them in the one order where they help each
//!   other; `tower` layers for all of them with the `tower` feature.
//! * [`BreakerRegistry`] — one breaker per service, method, instance or
//!   tenant, bounded in number and evicted when idle.
//! * [`AdaptiveThrottle`] — sheds load locally, in proportion, while a
//!   dependency is overloaded but working (the breaker is for "down").
//! * [`cluster`] — one dependency, many endpoints: balancing, a breaker per
//!   endpoint, and the six Dubbo strategies (failover, failfast, failsafe,
//!   durable failback, forking, broadcast); [`outlier`] — Envoy-style
//!   outlier detection and panic mode, to route around the few sick
//!   endpoints without ever routing around all of them.
//!
//! # Layout
//!
//! One folder per policy, and no two top-level modules import each other:
//! a module's imports point down this list, never up, so each policy can
//! be read and tested with only what is below it.
//!
//! ```text
//! tower                       the tower layers: over everything
//! cluster                     strategies, balancing, ejection (cluster/eject)
//!   → outlier, registry, retry, fallback, hedge, budget, timeout
//! retry                       the Retry facade: a pipeline with one policy
//!   → pipeline                composes breaker, retry policy, budget, bulkhead, timeout
//!   → retry_policy            retry config, backoff, decision, shared state
//!   → bulkhead → timeout
//!   → budget
//! outlier → endpoint          EndpointId, EndpointOutcome: shared with cluster
//! error                       every policy's error, below every policy
//!   → breaker → classify, clock → sync
//! ```
//!
//! Before, the policies' errors lived beside the pipeline and `Retry` was
//! both the pipeline's input and built on it, so `budget`, `bulkhead`,
//! `pipeline`, `retry` and `timeout` formed one import circle; and
//! `outlier` reached back into the cluster's endpoint set while the cluster
//! held the detector, a second circle (`cluster` ↔ `outlier`). Now the
//! errors sit in [`error`], the retry policy's parts in a private
//! `retry_policy` module below both the pipeline and the facade, the
//! ejection code in the cluster that it acts on, and the endpoint's names
//! in a private `endpoint` module below both. Every public path stayed:
//! each policy re-exports its own error and parts.
//!
//! ```
//! use std::time::Duration;
//! use tripline::clock::ManualClock;
//! use tripline::{CircuitBreaker, CircuitBreakerConfig, State, WindowConfig};
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder()
//!     .config(CircuitBreakerConfig {
//!         name: "geo".into(),
//!         window: WindowConfig::Count { size: 20 },
//!         minimum_calls: 10,
//!         failure_rate_threshold: 0.5,
//!         ..Default::default()
//!     })
//!     .clock(clock.clone())
//!     .build()
//!     .unwrap();
//!
//! for _ in 0..10 {
//!     let _ = breaker.call(|| Err::<(), _>("timeout"));
//! }
//! assert_eq!(breaker.state(), State::Open);
//! clock.advance(Duration::from_secs(5));
//! // The first call after the open duration is a half-open probe.
//! assert!(breaker.call(|| Ok::<_, ()>("pong")).is_ok());
//! ```

#![forbid(unsafe_code)]

pub mod breaker;
pub mod budget;
pub mod bulkhead;
pub mod classify;
pub mod clock;
#[cfg(not(loom))]
pub mod cluster;
#[cfg(not(loom))]
mod endpoint;
pub mod error;
pub mod fallback;
pub mod hedge;
#[cfg(not(loom))]
pub mod outlier;
pub mod pipeline;
pub mod registry;
pub mod retry;
mod retry_policy;
pub mod rng;
mod setters;
pub(crate) mod sync;
pub mod throttle;
pub mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

pub use breaker::{
    Backoff, CallAsync, CallError, CircuitBreaker, CircuitBreakerBuilder, CircuitBreakerConfig,
    ConfigError, ConfigWarning, Event, EventKind, HalfOpenPolicy, Jitter, Metrics, OpenDuration,
    OwnedPermit, Permit, Reason, Rejected, State, Subscription, Transition, WindowConfig,
    WindowSnapshot,
};
pub use classify::{Classifier, DefaultClassifier, Outcome};
pub use clock::{Clock, ManualClock, Timestamp};
pub use pipeline::{Pipeline, PolicyConfigError, PolicyError};
pub use registry::{BreakerRegistry, OverflowPolicy, RegistryConfig, RegistryError};
pub use throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, ThrottlePermit, Throttled};
