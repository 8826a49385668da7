//! `tripline.Pipeline`: the library's composed policies — retry with a
//! budget, breaker, bulkhead, deadlines, fallback — in the one order where
//! they help each other:
//!
//! ```text
//! fallback → overall deadline → retry (with budget) → circuit breaker → bulkhead → per-attempt timeout → call
//! ```
//!
//! The loop is the Rust pipeline's; this file converts the Python call's
//! result and exceptions, and the policies' refusals into exceptions.

use std::sync::Arc;

use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::pipeline::PolicyError;
use tripline::retry::{RetryConfig, RetryDecision};
use tripline::timeout::TimeoutConfig;
use tripline::{Outcome, Rejected};

use crate::breaker::{CircuitBreaker, ManualClock};
use crate::classify::Classify;
use crate::config::{from_json, kwargs_json};

/// Policies composed around calls: `tripline.pipeline(breaker=...,
/// retry={...}, budget={...}, bulkhead={...}, timeout={...},
/// fallback=fn)`; each dict takes the config-file vocabulary of its
/// policy. Call with `pipeline.call(fn, *args)` or decorate a `def`.
#[pyclass(frozen, module = "tripline")]
pub struct Pipeline {
    pipeline: tripline::Pipeline,
    breaker: Option<Py<CircuitBreaker>>,
    classify: Arc<Classify>,
    retry_exceptions: Option<Py<PyAny>>,
    fallback: Option<Py<PyAny>>,
}

/// A policy's dict as its config type, errors naming `policy.field`.
fn policy<T: serde::de::DeserializeOwned>(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Option<T>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let dict = value.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!("`{name}` must be a dict of {name} config fields"))
    })?;
    from_json(serde_json::Value::Object(kwargs_json(Some(dict))?))
        .map(Some)
        .map_err(|e: PyErr| {
            let py = value.py();
            let text = e
                .value(py)
                .to_string()
                .replace("invalid breaker config", &format!("invalid {name} config"));
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(text)
            } else {
                PyValueError::new_err(text)
            }
        })
}

fn policy_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (*, breaker=None, retry=None, budget=None, bulkhead=None, timeout=None, fallback=None, retry_exceptions=None, clock=None, seed=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, keyword-only
    fn new(
        py: Python<'_>,
        breaker: Option<Py<CircuitBreaker>>,
        retry: Option<&Bound<'_, PyAny>>,
        budget: Option<&Bound<'_, PyAny>>,
        bulkhead: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        fallback: Option<Bound<'_, PyAny>>,
        retry_exceptions: Option<Bound<'_, PyAny>>,
        clock: Option<PyRef<'_, ManualClock>>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let mut builder = tripline::Pipeline::builder();
        let manual = clock.as_ref().map(|c| c.clock.clone());
        if let Some(c) = &manual {
            builder = builder.clock(c.clone());
        } else {
            // Waits between attempts release the GIL: other threads run.
            builder = builder.sleeper(|d| {
                Python::attach(|py| py.detach(|| tripline::clock::block_thread_for(d)));
            });
        }
        if let Some(s) = seed {
            builder = builder.seed(s);
        }
        if let Some(config) = policy::<RetryConfig>(retry, "retry")? {
            builder = builder.retry(config);
        }
        if let Some(config) = policy::<RetryBudgetConfig>(budget, "budget")? {
            let b = match &manual {
                Some(c) => RetryBudget::with_clock(config, c.clone()),
                None => RetryBudget::try_new(config),
            };
            builder = builder.budget(b.map_err(policy_error)?);
        }
        if let Some(config) = policy::<BulkheadConfig>(bulkhead, "bulkhead")? {
            builder = builder.bulkhead(Bulkhead::try_new(config).map_err(policy_error)?);
        }
        if let Some(config) = policy::<TimeoutConfig>(timeout, "timeout")? {
            builder = builder.timeouts(config);
        }
        let classify = match &breaker {
            Some(b) => {
                builder = builder.circuit_breaker((*b.get().core.breaker).clone());
                b.get().core.classify.clone()
            }
            None => Arc::new(Classify::new(None, None, None)?),
        };
        if let Some(f) = fallback
            .as_ref()
            .filter(|f| !f.is_none() && !f.is_callable())
        {
            return Err(PyTypeError::new_err(format!(
                "`fallback` must be a callable taking the exception, not {}",
                f.get_type().name()?
            )));
        }
        let retry_exceptions = match retry_exceptions.filter(|r| !r.is_none()) {
            Some(r) => Some(crate::classify::exception_types(r, "retry_exceptions")?),
            None => None,
        };
        let _ = py;
        Ok(Pipeline {
            pipeline: builder.build().map_err(policy_error)?,
            breaker,
            classify,
            retry_exceptions,
            fallback: fallback.filter(|f| !f.is_none()).map(Bound::unbind),
        })
    }

    /// Calls `func(*args, **kwargs)` through every policy; with a
    /// `fallback`, its answer replaces any error.
    #[pyo3(signature = (func, /, *args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        match self.run(py, func, args, kwargs) {
            Ok(v) => Ok(v),
            Err(err) => match &self.fallback {
                Some(f) if err.is_instance_of::<PyException>(py) => {
                    f.bind(py).call1((err.value(py),)).map(Bound::unbind)
                }
                _ => Err(err),
            },
        }
    }

    /// Decorates a `def` so every call goes through the pipeline.
    fn __call__(slf: &Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if crate::guard::is_coroutine_function(&func)? {
            return Err(PyTypeError::new_err(
                "a pipeline guards synchronous functions; for an async def, decorate it with the breaker",
            ));
        }
        let bound = slf.getattr("call")?;
        let partial = py
            .import("functools")?
            .getattr("partial")?
            .call1((bound, &func))?;
        py.import("functools")?
            .getattr("update_wrapper")?
            .call1((&partial, func))?;
        Ok(partial.unbind())
    }
}

impl Pipeline {
    fn run(
        &self,
        py: Python<'_>,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let classify = &*self.classify;
        let retry_on = self.retry_exceptions.as_ref().map(|t| t.bind(py));
        let result = self
            .pipeline
            .request()
            .classify(|r: &Result<Py<PyAny>, PyErr>| match r {
                Ok(v) => classify.returned(py, v.bind(py)),
                Err(e) => classify.raised(py, e).unwrap_or(Outcome::Ignored),
            })
            .retry_on(|r: &Result<Py<PyAny>, PyErr>| match r {
                Ok(_) => RetryDecision::Done,
                Err(e) if !e.is_instance_of::<PyException>(py) => RetryDecision::Done,
                Err(e) => {
                    let retry = match retry_on {
                        Some(types) => e.value(py).is_instance(types).unwrap_or(false),
                        None => classify.raised(py, e) == Some(Outcome::Failure),
                    };
                    match (retry, server_wait(e.value(py).as_any())) {
                        (false, _) => RetryDecision::Done,
                        (true, Some(wait)) => RetryDecision::RetryAfter(wait),
                        (true, None) => RetryDecision::Retry,
                    }
                }
            })
            .call(|_attempt| func.call(args, kwargs).map(Bound::unbind));
        result.map_err(|e| self.error(py, e))
    }

    /// The Python exception for a pipeline error.
    fn error(&self, py: Python<'_>, err: PolicyError<PyErr>) -> PyErr {
        match err {
            PolicyError::Inner(e) => e,
            PolicyError::CircuitOpen(open) => {
                let rejected = Rejected::new(open.state, open.retry_after);
                match &self.breaker {
                    Some(b) => b.get().core.reject(py, rejected),
                    None => crate::errors::circuit_open(
                        py,
                        pyo3::intern!(py, "pipeline"),
                        rejected,
                        None,
                    ),
                }
            }
            PolicyError::BudgetExhausted { last, .. } => self.error(py, *last),
            PolicyError::BulkheadFull(full) => raise(py, "BulkheadFullError", full.to_string()),
            PolicyError::DeadlineExceeded(d) => raise(py, "DeadlineExceededError", d.to_string()),
            PolicyError::Timeout(t) => raise(py, "AttemptTimeoutError", t.to_string()),
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

static ERRORS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `tripline._errors.<class>(message)`.
fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    let class = ERRORS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("tripline._errors")?.into_any().unbind())
        })
        .and_then(|m| {
            m.bind(py)
                .getattr(class)?
                .cast_into::<PyType>()
                .map_err(PyErr::from)
        });
    match class {
        Ok(c) => PyErr::from_type(c, (message,)),
        Err(e) => e,
    }
}
