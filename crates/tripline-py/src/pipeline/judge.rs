//! What the pipeline makes of a Python attempt: the breaker's outcome,
//! the retry decision (with a server's `retry_after`), and the Python
//! exception for the pipeline's own refusals. Shared by `call` and `acall`.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tripline::Outcome;
use tripline::pipeline::PolicyError;
use tripline::retry::RetryDecision;

use crate::breaker::CircuitBreaker;
use crate::classify::Classify;

/// An attempt's result.
pub(crate) type PyResultAny = Result<Py<PyAny>, PyErr>;

/// The breaker's outcome of an attempt.
pub(crate) fn judge(py: Python<'_>, classify: &Classify, r: &PyResultAny) -> Outcome {
    match r {
        Ok(v) => classify.returned(py, v.bind(py)),
        Err(e) => classify.raised(py, e).unwrap_or(Outcome::Ignored),
    }
}

/// Whether an attempt is retried: an `Exception` in `retry_on` (default:
/// one the breaker counts as a failure), after at least its `retry_after`.
pub(crate) fn decide(
    py: Python<'_>,
    classify: &Classify,
    retry_on: Option<&Py<PyAny>>,
    r: &PyResultAny,
) -> RetryDecision {
    match r {
        Ok(_) => RetryDecision::Done,
        Err(e) if !e.is_instance_of::<PyException>(py) => RetryDecision::Done,
        Err(e) => {
            let retry = match retry_on {
                Some(types) => e.value(py).is_instance(types.bind(py)).unwrap_or(false),
                None => classify.raised(py, e) == Some(Outcome::Failure),
            };
            match (retry, server_wait(e.value(py).as_any())) {
                (false, _) => RetryDecision::Done,
                (true, Some(wait)) => RetryDecision::RetryAfter(wait),
                (true, None) => RetryDecision::Retry,
            }
        }
    }
}

/// The Python exception for a pipeline error.
pub(crate) fn error(
    py: Python<'_>,
    breaker: Option<&Py<CircuitBreaker>>,
    err: PolicyError<PyErr>,
) -> PyErr {
    match err {
        PolicyError::Inner(e) => e,
        PolicyError::CircuitOpen(rejected) => match breaker {
            Some(b) => b.get().core.reject(py, rejected),
            None => crate::errors::circuit_open(py, pyo3::intern!(py, "pipeline"), rejected, None),
        },
        PolicyError::BudgetExhausted { last, .. } => error(py, breaker, *last),
        PolicyError::BulkheadFull(full) => {
            crate::errors::named_error(py, "BulkheadFullError", full.to_string())
        }
        PolicyError::DeadlineExceeded(d) => {
            crate::errors::named_error(py, "DeadlineExceededError", d.to_string())
        }
        PolicyError::Timeout(t) => {
            crate::errors::named_error(py, "AttemptTimeoutError", t.to_string())
        }
    }
}

/// A server's pushback carried by the exception: a `retry_after`
/// attribute (seconds or a timedelta, as an HTTP client would set from
/// `Retry-After`); the retry waits at least that long.
fn server_wait(exc: &Bound<'_, PyAny>) -> Option<std::time::Duration> {
    let value = exc.getattr(pyo3::intern!(exc.py(), "retry_after")).ok()?;
    if value.is_none() {
        return None;
    }
    crate::convert::duration(&value, "retry_after").ok()
}
