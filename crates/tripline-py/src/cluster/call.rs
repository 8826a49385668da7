//! A cluster call: the Python endpoint function under the Rust strategy,
//! and the strategy's answer back as a value or an exception.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tripline::Outcome;
use tripline::cluster::{
    BroadcastError, BroadcastReport, ClusterAttempt, ClusterError, Endpoint, EndpointFailure,
    EndpointOutcome,
};
use tripline::fallback::DegradedReason;

use crate::classify::Classify;

use super::{Cluster, Strategy};

pub(crate) type PyResultAny = Result<Py<PyAny>, PyErr>;
/// A broadcast's results, by endpoint.
type Results = Vec<(
    tripline::cluster::EndpointId,
    Result<Py<PyAny>, EndpointFailure<PyErr>>,
)>;

/// `tripline.Served`: a failsafe answer, marked when it is the default.
#[pyclass(frozen, get_all, module = "tripline")]
pub struct Served {
    /// The answer: the endpoint's, or the default.
    value: Py<PyAny>,
    /// Whether `value` is the default (the call failed or was refused).
    degraded: bool,
    /// Why it is degraded: `"rejected"`, `"failed"` or `"timed_out"`.
    reason: Option<String>,
}

#[pymethods]
impl Served {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Served(value={}, degraded={}, reason={:?})",
            self.value
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            if self.degraded { "True" } else { "False" },
            self.reason
        )
    }
}

/// An endpoint's outcome: a connect exception is a connect failure (the
/// endpoint never saw the call), the rest as the breaker classifies.
pub(crate) fn endpoint_outcome(
    py: Python<'_>,
    classify: &Classify,
    connect: &Py<PyAny>,
    r: &PyResultAny,
) -> EndpointOutcome {
    let outcome = match r {
        Ok(v) => classify.returned(py, v.bind(py)),
        Err(e) => {
            if e.value(py).is_instance(connect.bind(py)).unwrap_or(false) {
                return EndpointOutcome::ConnectFailure;
            }
            classify.raised(py, e).unwrap_or(Outcome::Ignored)
        }
    };
    match outcome {
        Outcome::Success => EndpointOutcome::Success,
        Outcome::Ignored => EndpointOutcome::Ignored,
        Outcome::Failure => EndpointOutcome::UpstreamFailure,
    }
}

/// `(address, *args)`.
pub(crate) fn endpoint_args<'py>(
    py: Python<'py>,
    endpoint: &Endpoint,
    args: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut items: Vec<Bound<'_, PyAny>> = Vec::with_capacity(args.len() + 1);
    items.push(pyo3::types::PyString::new(py, endpoint.address()).into_any());
    items.extend(args.iter());
    PyTuple::new(py, items)
}

/// A `tripline.Served`: `value`, degraded for `reason` if any.
pub(crate) fn served(
    py: Python<'_>,
    value: Py<PyAny>,
    reason: Option<DegradedReason>,
) -> PyResult<Py<PyAny>> {
    let reason = reason.map(|r| {
        serde_json::to_value(r)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{r:?}"))
    });
    Ok(Py::new(
        py,
        Served {
            degraded: reason.is_some(),
            reason,
            value,
        },
    )?
    .into_any())
}

impl Cluster {
    fn outcome(&self, py: Python<'_>, r: &PyResultAny) -> EndpointOutcome {
        endpoint_outcome(py, &self.classify, &self.connect, r)
    }
}

/// The failsafe default for `err`: `default(exc)` when callable (what it
/// returns; logged and `None` if it raises), else `default` itself.
pub(crate) fn default_for(
    py: Python<'_>,
    default: Option<&Py<PyAny>>,
    err: &ClusterError<PyErr>,
) -> Py<PyAny> {
    {
        match default {
            Some(d) if d.bind(py).is_callable() => {
                match d.bind(py).call1((error_ref(py, err).value(py),)) {
                    Ok(v) => v.unbind(),
                    Err(e) => {
                        crate::errors::log_raised(py, "failsafe default", e);
                        py.None()
                    }
                }
            }
            Some(d) => d.clone_ref(py),
            None => py.None(),
        }
    }
}

impl Cluster {
    fn call_endpoint(
        &self,
        py: Python<'_>,
        endpoint: &Endpoint,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResultAny {
        let full = endpoint_args(py, endpoint, args)?;
        self.call.bind(py).call(full, kwargs).map(Bound::unbind)
    }
}

/// The exception for a cluster error (consuming it).
pub(crate) fn error(py: Python<'_>, err: ClusterError<PyErr>) -> PyErr {
    match err {
        ClusterError::Failed { error, .. } => error,
        ClusterError::BudgetExhausted { last, .. } => error(py, *last),
        ClusterError::Unavailable(u) => {
            crate::errors::named_error(py, "ClusterUnavailableError", u.to_string())
        }
        ClusterError::DeadlineExceeded(d) => {
            crate::errors::named_error(py, "DeadlineExceededError", d.to_string())
        }
    }
}

/// The exception for a cluster error seen by reference (failsafe's default).
pub(crate) fn error_ref(py: Python<'_>, err: &ClusterError<PyErr>) -> PyErr {
    match err {
        ClusterError::Failed { error, .. } => error.clone_ref(py),
        ClusterError::BudgetExhausted { last, .. } => error_ref(py, last),
        ClusterError::Unavailable(u) => {
            crate::errors::named_error(py, "ClusterUnavailableError", u.to_string())
        }
        ClusterError::DeadlineExceeded(d) => {
            crate::errors::named_error(py, "DeadlineExceededError", d.to_string())
        }
    }
}

impl Cluster {
    /// One call through the strategy (see `Cluster.call`).
    pub(crate) fn call_strategy(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let classify = |r: &PyResultAny| self.outcome(py, r);
        let op = |e: &Endpoint, _: &ClusterAttempt| self.call_endpoint(py, e, args, kwargs);
        match &self.strategy {
            Strategy::Failover(f) => f.call_with(&classify, op).map_err(|e| error(py, e)),
            Strategy::Failfast(f) => f.call_with(&classify, op).map_err(|e| error(py, e)),
            Strategy::Failsafe(f, _) => {
                let default = |e: &ClusterError<PyErr>| default_for(py, self.default.as_ref(), e);
                let s = f.call_with(&classify, default, op);
                served(py, s.value, s.degraded.map(|d| d.reason))
            }
            Strategy::Forking(f, _) => super::forking_sync::call(self, py, f, args, kwargs),
            Strategy::Failback(f) => super::failback::submit(py, f, args, kwargs),
            Strategy::Broadcast(b) => {
                broadcast_answer(py, self.cluster.name(), b.call_with(&classify, op))
            }
        }
    }
}

/// A broadcast's answer: `{endpoint_id: answer}`, or the error.
pub(crate) fn broadcast_answer(
    py: Python<'_>,
    cluster: &str,
    r: Result<BroadcastReport<Py<PyAny>, PyErr>, BroadcastError<Py<PyAny>, PyErr>>,
) -> PyResult<Py<PyAny>> {
    {
        match r {
            Ok(report) => report_dict(py, report.results),
            Err(BroadcastError::Unavailable(u)) => Err(crate::errors::named_error(
                py,
                "ClusterUnavailableError",
                u.to_string(),
            )),
            Err(BroadcastError::Failed {
                report,
                fail_percent,
            }) => {
                let results = report_dict(py, report.results)?;
                let message = format!(
                    "broadcast to cluster {:?} failed (tolerance: {})",
                    cluster,
                    fail_percent.map_or("none".to_owned(), |p| format!("{p}% of endpoints"))
                );
                Err(crate::errors::named_error_with(
                    py,
                    "BroadcastError",
                    (message, results),
                ))
            }
        }
    }
}

/// `{endpoint_id: answer or exception}`.
pub(crate) fn report_dict(py: Python<'_>, results: Results) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    for (id, r) in results {
        let value = match r {
            Ok(v) => v,
            Err(EndpointFailure::Failed(e)) => e.value(py).clone().into_any().unbind(),
            Err(EndpointFailure::Rejected(r)) => crate::errors::circuit_open(
                py,
                &pyo3::types::PyString::new(py, id.as_str()),
                r,
                None,
            )
            .value(py)
            .clone()
            .into_any()
            .unbind(),
        };
        d.set_item(id.as_str(), value)?;
    }
    Ok(d.into_any().unbind())
}
