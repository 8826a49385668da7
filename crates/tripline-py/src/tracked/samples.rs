//! Every tracked breaker read for one exposition: the counters of
//! `tripline.Metrics` plus what the Rust exporter shows at its `Full`
//! detail (time in state, the open deadline, the thresholds in force, the
//! half-open backstop, transitions by kind), so that the shipped alert
//! rules work on a Python service as they do on a Rust one.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tripline::clock::Clock;
use tripline::{CircuitBreaker, State};

use super::{BREAKERS, CLUSTERS, TRANSITIONS, live};
use crate::convert::serde_to_py;
use crate::metrics::Metrics;

/// Every live standalone breaker, then every live cluster's endpoint
/// breakers, each once (a name exported already is left out, never
/// written twice): `{"metrics", "time_in_state", "open_until",
/// "failure_rate_threshold", "slow_call_rate_threshold", "minimum_calls",
/// "max_half_open", "transitions"}`. The transition counts of breakers no
/// longer alive are forgotten here.
#[pyfunction]
pub(crate) fn _breaker_samples(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let unix_now = tripline::clock::system_time_after(Duration::ZERO)
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut seen = HashSet::new();
    let mut samples = Vec::new();
    let mut add = |b: &CircuitBreaker| {
        if seen.insert(b.name().to_owned()) {
            samples.push(Sample::read(b, unix_now));
        }
    };
    for b in live(&BREAKERS) {
        add(&b);
    }
    for c in live(&CLUSTERS) {
        c.cluster.breakers().for_each_breaker(|_, b| add(b));
    }
    TRANSITIONS.retain(|name| seen.contains(name));
    let transitions: Vec<Vec<(&str, &str, &str, u64)>> = TRANSITIONS.with(|t| {
        samples
            .iter()
            .map(|s| {
                t.of(&s.metrics.name)
                    .iter()
                    .map(|c| (c.from.as_str(), c.to.as_str(), c.reason.as_str(), c.count))
                    .collect()
            })
            .collect()
    });
    samples
        .into_iter()
        .zip(transitions)
        .map(|(s, t)| s.into_dict(py, t))
        .collect()
}

/// One breaker, read once so that its families agree with each other.
struct Sample {
    metrics: tripline::Metrics,
    details: Details,
}

/// What the exporter shows beside the metrics, under the dict keys the
/// exporter reads.
#[derive(serde::Serialize)]
struct Details {
    time_in_state: f64,
    open_until: f64,
    failure_rate_threshold: f64,
    /// `None` without slow-call detection: a rate that could only read 0
    /// is not shown, as in the Rust exporter.
    slow_call_rate_threshold: Option<f64>,
    minimum_calls: u32,
    max_half_open: Option<f64>,
}

impl Sample {
    fn read(b: &CircuitBreaker, unix_now: f64) -> Self {
        let now = b.clock().now();
        let metrics = b.metrics();
        let config = b.config();
        // The open deadline on the wall clock: the breaker's own clock may
        // be a manual one, so the distance to it is what carries over.
        let open_until = match (metrics.state, metrics.open_until) {
            (State::Open, Some(until)) => {
                unix_now + (until.as_nanos() as f64 - now.as_nanos() as f64) / 1e9
            }
            _ => 0.0,
        };
        let details = Details {
            time_in_state: (now - metrics.state_since).as_secs_f64(),
            open_until,
            failure_rate_threshold: config.failure_rate_threshold,
            slow_call_rate_threshold: metrics
                .slow_call_threshold
                .map(|_| config.slow_call_rate_threshold),
            minimum_calls: config.minimum_calls,
            max_half_open: config.max_half_open_duration.map(|d| d.as_secs_f64()),
        };
        Sample { metrics, details }
    }

    fn into_dict<'py>(
        self,
        py: Python<'py>,
        transitions: Vec<(&str, &str, &str, u64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = serde_to_py(py, &self.details)?.cast_into::<PyDict>()?;
        d.set_item("transitions", transitions)?;
        d.set_item("metrics", Metrics::from(self.metrics))?;
        Ok(d)
    }
}
