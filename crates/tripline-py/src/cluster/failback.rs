//! The failback strategy's Python face: submit a `bytes` payload, deliver
//! due entries, read dead letters and counts. The queue — durable,
//! bounded by `max_entries` and `max_bytes`, with backoff, `max_retries`,
//! `max_age` and dead letters — is the Rust library's `Failback`.

use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use tripline::cluster::{Failback, FailbackError, Submitted};

use super::{Cluster, Strategy};

impl Cluster {
    /// The failback queue, or a `ValueError` for another strategy.
    pub(crate) fn failback(&self) -> PyResult<&Failback<PyErr>> {
        match &self.strategy {
            Strategy::Failback(f) => Ok(f),
            _ => Err(PyValueError::new_err(format!(
                "cluster {:?} uses the {} strategy: only a failback cluster has a delivery queue",
                self.cluster.name(),
                self.strategy_name()
            ))),
        }
    }
}

/// A queue error as a Python exception: a refusal (full, too large) as
/// `tripline.FailbackFullError`, a disk error as `OSError`.
pub(crate) fn error(py: Python<'_>, e: FailbackError) -> PyErr {
    match e {
        FailbackError::Full { .. } | FailbackError::PayloadTooLarge { .. } => {
            crate::errors::named_error(py, "FailbackFullError", e.to_string())
        }
        FailbackError::Config(c) => PyValueError::new_err(c.to_string()),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// `cluster.call(payload)` for failback: `"delivered"` or `"queued"`.
pub(crate) fn submit(
    py: Python<'_>,
    f: &Failback<PyErr>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    if args.len() != 1 || kwargs.is_some_and(|k| !k.is_empty()) {
        return Err(PyTypeError::new_err(
            "a failback cluster's call takes one `payload` (bytes): what is queued must be stored as is",
        ));
    }
    let item = args.get_item(0)?;
    let payload = item.cast::<PyBytes>().map_err(|_| {
        PyTypeError::new_err(format!(
            "`payload` must be bytes, not {}",
            item.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    // The first delivery calls back into Python: the GIL stays held.
    match f.submit(payload.as_bytes()) {
        Ok(Submitted::Delivered) => Ok(pyo3::intern!(py, "delivered").clone().into_any().unbind()),
        Ok(Submitted::Queued { .. }) => Ok(pyo3::intern!(py, "queued").clone().into_any().unbind()),
        Err(e) => Err(error(py, e)),
    }
}

/// One delivery pass.
pub(crate) fn run_due<'py>(py: Python<'py>, f: &Failback<PyErr>) -> PyResult<Bound<'py, PyDict>> {
    let r = f.run_due();
    let d = PyDict::new(py);
    d.set_item("delivered", r.delivered)?;
    d.set_item("retried", r.retried)?;
    d.set_item("gave_up", r.gave_up)?;
    d.set_item("pending", r.pending)?;
    Ok(d)
}

/// The dead letters.
pub(crate) fn dead_letters<'py>(
    py: Python<'py>,
    f: &Failback<PyErr>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let letters = f.dead_letters().map_err(|e| error(py, e))?;
    Ok(letters.iter().map(|l| PyBytes::new(py, l)).collect())
}

/// `Cluster.stats()`.
pub(crate) fn stats<'py>(py: Python<'py>, c: &Cluster) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", c.cluster.name())?;
    d.set_item("strategy", c.strategy_name())?;
    let health = c.cluster.health();
    d.set_item("endpoints", health.endpoints)?;
    d.set_item("routable", health.routable)?;
    d.set_item("ejected", health.ejected)?;
    d.set_item("panic", health.panic)?;
    let mut budget = None;
    match &c.strategy {
        Strategy::Failover(f) => {
            let s = f.stats();
            let fd = PyDict::new(py);
            fd.set_item("calls", s.calls)?;
            fd.set_item("attempts", s.attempts)?;
            fd.set_item("failovers", s.failovers)?;
            fd.set_item("stopped_retries", s.stopped_retries)?;
            fd.set_item("stopped_budget", s.stopped_budget)?;
            fd.set_item("stopped_deadline", s.stopped_deadline)?;
            fd.set_item("stopped_non_idempotent", s.stopped_non_idempotent)?;
            fd.set_item("stopped_no_endpoint", s.stopped_no_endpoint)?;
            d.set_item("failover", fd)?;
            budget = f.budget();
        }
        Strategy::Failsafe(f, _) => {
            let s = f.stats();
            let fd = PyDict::new(py);
            fd.set_item("calls", s.calls)?;
            fd.set_item("degraded", s.degraded)?;
            d.set_item("failsafe", fd)?;
        }
        Strategy::Failback(f) => {
            let s = f.stats();
            let fd = PyDict::new(py);
            fd.set_item("pending", f.pending())?;
            fd.set_item(
                "oldest_pending_age",
                f.oldest_pending_age().map(|a| a.as_secs_f64()),
            )?;
            fd.set_item("delivered_first", s.delivered_first)?;
            fd.set_item("queued", s.queued)?;
            fd.set_item("refused", s.refused)?;
            fd.set_item("delivered_later", s.delivered_later)?;
            fd.set_item("retries_failed", s.retries_failed)?;
            fd.set_item("gave_up", s.gave_up)?;
            d.set_item("failback", fd)?;
        }
        Strategy::Forking(_, b) => budget = b.as_ref(),
        _ => {}
    }
    d.set_item(
        "budget",
        budget
            .map(|b| crate::pipeline::stats::budget_stats(py, b))
            .transpose()?,
    )?;
    Ok(d)
}
