//! `tripline.Metrics`: a breaker's counters, as a read-only record.

use pyo3::prelude::*;

use crate::convert::serde_to_py;

/// A snapshot of one breaker's state and cumulative counters (read-only
/// attributes, like a frozen dataclass; `as_dict()` for everything).
#[pyclass(frozen, module = "tripline")]
pub struct Metrics {
    /// The breaker's name.
    #[pyo3(get)]
    name: String,
    /// Current state.
    #[pyo3(get)]
    state: &'static str,
    /// Transitions so far (the state generation).
    #[pyo3(get)]
    generation: u64,
    /// Open, with the open duration passed: the next call probes.
    #[pyo3(get)]
    probe_due: bool,
    /// Calls in the live window.
    #[pyo3(get)]
    window_calls: u64,
    /// Failures in the live window.
    #[pyo3(get)]
    window_failures: u64,
    /// Slow calls in the live window.
    #[pyo3(get)]
    window_slow: u64,
    /// Failure rate of the live window (0–1).
    #[pyo3(get)]
    failure_rate: f64,
    /// Slow-call rate of the live window (0–1).
    #[pyo3(get)]
    slow_call_rate: f64,
    /// Cumulative successful calls.
    #[pyo3(get)]
    successful: u64,
    /// Cumulative failed calls.
    #[pyo3(get)]
    failed: u64,
    /// Cumulative slow calls.
    #[pyo3(get)]
    slow: u64,
    /// Cumulative ignored outcomes.
    #[pyo3(get)]
    ignored: u64,
    /// Cumulative rejected calls.
    #[pyo3(get)]
    rejected: u64,
    /// Permits released without an outcome.
    #[pyo3(get)]
    cancelled: u64,
    /// Outcomes recorded after their state ended.
    #[pyo3(get)]
    late: u64,
    /// Half-open probes admitted and not yet finished.
    #[pyo3(get)]
    probes_in_flight: u64,
    /// The config version in force.
    #[pyo3(get)]
    config_version: u64,
    /// Consecutive failed probe rounds (the open-duration backoff step).
    #[pyo3(get)]
    backoff_round: u64,
    /// Half-open probes that succeeded.
    #[pyo3(get)]
    probes_succeeded: u64,
    /// Half-open probes that failed.
    #[pyo3(get)]
    probes_failed: u64,
    /// State transitions so far.
    #[pyo3(get)]
    transitions: u64,
    raw: tripline::Metrics,
}

impl From<tripline::Metrics> for Metrics {
    fn from(m: tripline::Metrics) -> Self {
        Metrics {
            name: m.name.clone(),
            state: m.state.as_str(),
            generation: m.generation,
            probe_due: m.probe_due,
            window_calls: m.window.calls,
            window_failures: m.window.failures,
            window_slow: m.window.slow,
            failure_rate: m.window.failure_rate(),
            slow_call_rate: m.window.slow_call_rate(),
            successful: m.calls.successful,
            failed: m.calls.failed,
            slow: m.calls.slow,
            ignored: m.calls.ignored,
            rejected: m.calls.rejected,
            cancelled: m.calls.cancelled,
            late: m.calls.late,
            probes_in_flight: m.probes_in_flight,
            config_version: m.config_version,
            backoff_round: m.backoff_round,
            probes_succeeded: m.calls.probes_succeeded,
            probes_failed: m.calls.probes_failed,
            transitions: m.transitions,
            raw: m,
        }
    }
}

#[pymethods]
impl Metrics {
    /// Everything the library reports, as a dict.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.raw)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Metrics>()
            .is_ok_and(|o| o.get().raw == self.raw)
    }

    fn __repr__(&self) -> String {
        format!(
            "Metrics(name={:?}, state={:?}, successful={}, failed={}, ignored={}, rejected={}, cancelled={}, window_calls={}, failure_rate={})",
            self.name,
            self.state,
            self.successful,
            self.failed,
            self.ignored,
            self.rejected,
            self.cancelled,
            self.window_calls,
            self.failure_rate
        )
    }
}
