//! A cluster call: the Python endpoint function under the Rust strategy,
//! and the strategy's answer back as a value or an exception.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tripline::Outcome;
use tripline::cluster::{
    BroadcastError, ClusterAttempt, ClusterError, Endpoint, EndpointFailure, EndpointOutcome,
};

use super::{Cluster, Strategy};

type PyResultAny = Result<Py<PyAny>, PyErr>;
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

impl Cluster {
    fn outcome(&self, py: Python<'_>, r: &PyResultAny) -> EndpointOutcome {
        let outcome = match r {
            Ok(v) => self.classify.returned(py, v.bind(py)),
            Err(e) => {
                if e.value(py)
                    .is_instance(self.connect.bind(py))
                    .unwrap_or(false)
                {
                    return EndpointOutcome::ConnectFailure;
                }
                match self.classify.raised(py, e) {
                    Some(o) => o,
                    None => Outcome::Ignored,
                }
            }
        };
        match outcome {
            Outcome::Success => EndpointOutcome::Success,
            Outcome::Ignored => EndpointOutcome::Ignored,
            Outcome::Failure => EndpointOutcome::UpstreamFailure,
        }
    }

    fn call_endpoint(
        &self,
        py: Python<'_>,
        endpoint: &Endpoint,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResultAny {
        let mut items: Vec<Bound<'_, PyAny>> = Vec::with_capacity(args.len() + 1);
        items.push(pyo3::types::PyString::new(py, endpoint.address()).into_any());
        items.extend(args.iter());
        let full = PyTuple::new(py, items)?;
        self.call.bind(py).call(full, kwargs).map(Bound::unbind)
    }
}

/// The exception for a cluster error (consuming it).
fn error(py: Python<'_>, err: ClusterError<PyErr>) -> PyErr {
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
fn error_ref(py: Python<'_>, err: &ClusterError<PyErr>) -> PyErr {
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
            Strategy::Failsafe(f) => {
                let default = |e: &ClusterError<PyErr>| match &self.default {
                    Some(d) if d.bind(py).is_callable() => {
                        match d.bind(py).call1((error_ref(py, e).value(py),)) {
                            Ok(v) => v.unbind(),
                            Err(err) => {
                                crate::errors::log_raised(py, "failsafe default", err);
                                py.None()
                            }
                        }
                    }
                    Some(d) => d.clone_ref(py),
                    None => py.None(),
                };
                let served = f.call_with(&classify, default, op);
                let reason = served.degraded.as_ref().map(|d| {
                    serde_json::to_value(d.reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| format!("{:?}", d.reason))
                });
                Ok(Py::new(
                    py,
                    Served {
                        degraded: served.degraded.is_some(),
                        reason,
                        value: served.value,
                    },
                )?
                .into_any())
            }
            Strategy::Broadcast(b) => match b.call_with(&classify, op) {
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
                        self.cluster.name(),
                        fail_percent.map_or("none".to_owned(), |p| format!("{p}% of endpoints"))
                    );
                    Err(crate::errors::named_error_with(
                        py,
                        "BroadcastError",
                        (message, results),
                    ))
                }
            },
        }
    }
}

/// `{endpoint_id: answer or exception}`.
fn report_dict(py: Python<'_>, results: Results) -> PyResult<Py<PyAny>> {
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
