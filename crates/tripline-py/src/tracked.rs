//! Every live breaker, registry, pipeline and cluster of the process, for
//! exporters.
//!
//! Weak references only: a breaker that Python frees leaves the list at the
//! next collection, so tracking never keeps one alive (a per-request
//! breaker cannot leak through the exporter). Registries are exported by
//! their bounded-cardinality stats, not per key, as in the Rust exporter.

mod samples;

use std::sync::{Arc, LazyLock, Mutex, Weak};

use pyo3::prelude::*;

use pyo3::types::PyDict;
use tripline::breaker::{Subscription, TransitionTally};
use tripline::budget::RetryBudget;
use tripline::cluster::EjectionTally;
use tripline::cluster::Failback;
use tripline::outlier::ClusterSubscription;
use tripline::registry::{RegistryKey, RegistrySubscription};

use crate::convert::serde_to_py;

type Registry = tripline::BreakerRegistry<String>;

/// A pipeline as exported: its policies under its name.
pub(crate) struct TrackedPipeline {
    pub(crate) name: String,
    pub(crate) pipeline: tripline::Pipeline,
}

/// A hedging policy as exported: its retry budget under its name.
pub(crate) struct TrackedHedge {
    pub(crate) name: String,
    pub(crate) hedge: tripline::hedge::Hedge,
    pub(crate) budget: Option<RetryBudget>,
}

/// A cluster as exported: health, outlier counts, endpoint breakers, and
/// the failback queue or retry budget of its strategy.
pub(crate) struct TrackedCluster {
    pub(crate) cluster: tripline::cluster::Cluster,
    pub(crate) failback: Option<Failback<PyErr>>,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) tally: Arc<EjectionTally>,
    /// Feeds `tally`; unsubscribes when the cluster goes.
    pub(crate) _subscription: ClusterSubscription,
    /// Feeds [`TRANSITIONS`] from the endpoint breakers.
    pub(crate) _transitions: RegistrySubscription,
}

/// Transitions by from, to and reason of every tracked breaker (standalone
/// and cluster endpoints), for `tripline_breaker_transitions_total`.
/// Names no longer alive are pruned at each exposition.
static TRANSITIONS: LazyLock<Arc<TransitionTally>> = LazyLock::new(Arc::default);

/// Counts `breaker`'s transitions from now on, until the returned
/// subscription is dropped (with the breaker).
pub(crate) fn count_transitions(breaker: &tripline::CircuitBreaker) -> Subscription {
    breaker.subscribe(TRANSITIONS.subscriber())
}

/// Counts the transitions of every breaker of `registry` (a cluster's
/// endpoints), until the returned subscription is dropped.
pub(crate) fn count_registry_transitions<K: RegistryKey>(
    registry: &tripline::BreakerRegistry<K>,
) -> RegistrySubscription {
    let count = TRANSITIONS.subscriber();
    registry.subscribe(move |_, event| count(event))
}

static BREAKERS: Mutex<Vec<Weak<tripline::CircuitBreaker>>> = Mutex::new(Vec::new());
static REGISTRIES: Mutex<Vec<Weak<Registry>>> = Mutex::new(Vec::new());
static PIPELINES: Mutex<Vec<Weak<TrackedPipeline>>> = Mutex::new(Vec::new());
static CLUSTERS: Mutex<Vec<Weak<TrackedCluster>>> = Mutex::new(Vec::new());
static THROTTLES: Mutex<Vec<Weak<tripline::throttle::AdaptiveThrottle>>> = Mutex::new(Vec::new());
static HEDGES: Mutex<Vec<Weak<TrackedHedge>>> = Mutex::new(Vec::new());

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

/// Tracks a pipeline.
pub(crate) fn track_pipeline(p: &Arc<TrackedPipeline>) {
    push(&PIPELINES, p);
}

/// Tracks a cluster.
pub(crate) fn track_cluster(c: &Arc<TrackedCluster>) {
    push(&CLUSTERS, c);
}

/// Tracks a hedging policy.
pub(crate) fn track_hedge(h: &Arc<TrackedHedge>) {
    push(&HEDGES, h);
}

/// The retry budget of every live hedging policy that has one, by the
/// policy's name: `[(name, budget stats)]`.
#[pyfunction]
pub(crate) fn _hedge_budgets(py: Python<'_>) -> PyResult<Vec<(String, Bound<'_, PyDict>)>> {
    live(&HEDGES)
        .iter()
        .filter_map(|h| Some((h.name.clone(), h.budget.as_ref()?)))
        .map(|(name, b)| Ok((name, crate::pipeline::stats::budget_stats(py, b)?)))
        .collect()
}

/// Tracks an adaptive throttle.
pub(crate) fn track_throttle(t: &Arc<tripline::throttle::AdaptiveThrottle>) {
    push(&THROTTLES, t);
}

/// The metrics of every live adaptive throttle, as dicts.
#[pyfunction]
pub(crate) fn _throttle_metrics(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    live(&THROTTLES)
        .iter()
        .map(|t| serde_to_py(py, &t.metrics()))
        .collect()
}

pub(crate) use samples::_breaker_samples;

/// The stats of every live registry, as dicts.
#[pyfunction]
pub(crate) fn _registry_stats(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    live(&REGISTRIES)
        .iter()
        .map(|r| serde_to_py(py, &r.stats()))
        .collect()
}

/// The policy counts of every live pipeline (`Pipeline.stats()` dicts).
#[pyfunction]
pub(crate) fn _pipeline_stats(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    live(&PIPELINES)
        .iter()
        .map(|p| crate::pipeline::stats::stats(py, &p.name, &p.pipeline))
        .collect()
}

/// Every live cluster: `{"cluster", "endpoints", "routable", "panic",
/// "active", "ejections", "skipped", "panic_entered", "family",
/// "registry", "failback", "budget"}` (its endpoint breakers are in
/// `_breaker_samples`).
#[pyfunction]
pub(crate) fn _cluster_stats(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    live(&CLUSTERS).iter().map(|c| cluster(py, c)).collect()
}

fn cluster<'py>(py: Python<'py>, c: &TrackedCluster) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let health = c.cluster.health();
    let o = c.tally.sample(&c.cluster);
    d.set_item("cluster", c.cluster.name())?;
    d.set_item("endpoints", health.endpoints)?;
    d.set_item("routable", health.routable)?;
    d.set_item("panic", health.panic)?;
    d.set_item("active", o.active.to_vec())?;
    d.set_item("ejections", o.ejections.to_vec())?;
    d.set_item(
        "skipped",
        o.skipped.iter().map(|s| s.to_vec()).collect::<Vec<_>>(),
    )?;
    d.set_item("panic_entered", o.panic_entered)?;
    let breakers = c.cluster.breakers();
    d.set_item("family", breakers.family())?;
    d.set_item("registry", serde_to_py(py, &breakers.stats())?)?;
    let failback = match &c.failback {
        Some(f) => {
            let s = f.stats();
            let fd = PyDict::new(py);
            fd.set_item("depth", f.pending())?;
            fd.set_item(
                "oldest_age",
                f.oldest_pending_age().map_or(0.0, |a| a.as_secs_f64()),
            )?;
            fd.set_item("delivered_first", s.delivered_first)?;
            fd.set_item("queued", s.queued)?;
            fd.set_item("refused", s.refused)?;
            fd.set_item("delivered_later", s.delivered_later)?;
            fd.set_item("retries_failed", s.retries_failed)?;
            fd.set_item("gave_up", s.gave_up)?;
            Some(fd)
        }
        None => None,
    };
    d.set_item("failback", failback)?;
    d.set_item(
        "budget",
        c.budget
            .as_ref()
            .map(|b| crate::pipeline::stats::budget_stats(py, b))
            .transpose()?,
    )?;
    Ok(d)
}
