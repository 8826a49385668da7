//! `tripline` for Python: the library's circuit breaker and policies,
//! in-process, as a native module (`tripline._tripline`).
//!
//! The Python package (`python/tripline`) re-exports these classes; its
//! pure-Python parts are only what Python users expect around them (the
//! exception classes, `prometheus_client` export). Every decision — admit,
//! reject, trip, probe — is the Rust library's: this crate converts
//! arguments and outcomes and never re-implements breaker logic.
//!
//! Hot paths hold no Python-level lock: the breaker is lock-free and the
//! Python objects around it are `frozen` (no borrow flag), so calls from
//! many threads go straight to the breaker's atomics. The GIL is never
//! released around anything that calls back into Python.

mod aio;
mod breaker;
mod classify;
mod cluster;
mod config;
mod context;
mod convert;
mod errors;
mod event;
mod guard;
mod guard_async;
mod hedge;
mod iter_send;
mod metrics;
mod permit;
mod pipeline;
mod registry;
mod throttle;
mod timeout;
mod tracked;

use pyo3::prelude::*;

/// The native module behind the `tripline` package.
#[pymodule(gil_used = false)]
fn _tripline(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<breaker::CircuitBreaker>()?;
    m.add_class::<breaker::ManualClock>()?;
    m.add_class::<guard::Guarded>()?;
    m.add_class::<guard_async::AsyncGuarded>()?;
    m.add_class::<guard_async::GuardedAwaitable>()?;
    m.add_class::<context::Ready>()?;
    m.add_class::<permit::Permit>()?;
    m.add_class::<event::Event>()?;
    m.add_class::<metrics::Metrics>()?;
    m.add_class::<registry::BreakerRegistry>()?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<aio::AsyncCall>()?;
    m.add_class::<timeout::Timeout>()?;
    m.add_class::<hedge::Hedge>()?;
    m.add_class::<throttle::NativeThrottle>()?;
    m.add_class::<throttle::ThrottlePermit>()?;
    m.add_class::<cluster::Cluster>()?;
    m.add_class::<cluster::call::Served>()?;
    m.add_function(wrap_pyfunction!(tracked::_breaker_samples, m)?)?;
    m.add_function(wrap_pyfunction!(tracked::_registry_stats, m)?)?;
    m.add_function(wrap_pyfunction!(tracked::_pipeline_stats, m)?)?;
    m.add_function(wrap_pyfunction!(tracked::_cluster_stats, m)?)?;
    m.add_function(wrap_pyfunction!(tracked::_throttle_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(tracked::_hedge_budgets, m)?)?;
    m.add(
        "_OUTLIER_DETECTORS",
        tripline::cluster::EjectionCounts::DETECTOR_LABELS.to_vec(),
    )?;
    Ok(())
}
