//! Every live breaker and registry of the process, for exporters.
//!
//! Weak references only: a breaker that Python frees leaves the list at the
//! next collection, so tracking never keeps one alive (a per-request
//! breaker cannot leak through the exporter). Registries are exported by
//! their bounded-cardinality stats, not per key, as in the Rust exporter.

use std::sync::{Arc, Mutex, Weak};

use pyo3::prelude::*;

use crate::convert::serde_to_py;
use crate::metrics::Metrics;

type Registry = tripline::BreakerRegistry<String>;

static BREAKERS: Mutex<Vec<Weak<tripline::CircuitBreaker>>> = Mutex::new(Vec::new());
static REGISTRIES: Mutex<Vec<Weak<Registry>>> = Mutex::new(Vec::new());

fn push<T>(list: &Mutex<Vec<Weak<T>>>, item: &Arc<T>) {
    let mut list = list.lock().unwrap_or_else(|p| p.into_inner());
    // Prune on insert too, so a process that creates breakers forever and
    // never scrapes keeps the list at the number alive.
    if list.len() >= 64 && list.len().is_power_of_two() {
        list.retain(|w| w.strong_count() > 0);
    }
    list.push(Arc::downgrade(item));
}

fn live<T>(list: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    let mut list = list.lock().unwrap_or_else(|p| p.into_inner());
    list.retain(|w| w.strong_count() > 0);
    list.iter().filter_map(Weak::upgrade).collect()
}

/// Tracks a standalone breaker.
pub(crate) fn track_breaker(b: &Arc<tripline::CircuitBreaker>) {
    push(&BREAKERS, b);
}

/// Tracks a registry.
pub(crate) fn track_registry(r: &Arc<Registry>) {
    push(&REGISTRIES, r);
}

/// The metrics of every live standalone breaker.
#[pyfunction]
pub(crate) fn _breaker_metrics() -> Vec<Metrics> {
    live(&BREAKERS)
        .iter()
        .map(|b| Metrics::from(b.metrics()))
        .collect()
}

/// The stats of every live registry, as dicts.
#[pyfunction]
pub(crate) fn _registry_stats(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    live(&REGISTRIES)
        .iter()
        .map(|r| serde_to_py(py, &r.stats()))
        .collect()
}
