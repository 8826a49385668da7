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
use pyo3::types::{PyDict, PyTuple};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::clock::SharedClock;
use tripline::retry::RetryConfig;
use tripline::timeout::TimeoutConfig;

use crate::breaker::{CircuitBreaker, ManualClock};
use crate::classify::Classify;

mod async_call;
mod judge;

use judge::{PyResultAny, decide, error, judge};
pub(crate) mod stats;

/// Policies composed around calls: `tripline.pipeline(breaker=...,
/// retry={...}, budget={...}, bulkhead={...}, timeout={...},
/// fallback=fn)`; each dict takes the config-file vocabulary of its
/// policy. Call with `pipeline.call(fn, *args)` or decorate a `def`.
#[pyclass(frozen, module = "tripline")]
pub struct Pipeline {
    /// The name its policies are exported under.
    name: String,
    pipeline: tripline::Pipeline,
    breaker: Option<Py<CircuitBreaker>>,
    classify: Arc<Classify>,
    retry_exceptions: Option<Py<PyAny>>,
    fallback: Option<Py<PyAny>>,
    /// What the exporter reads; dropped with the pipeline.
    _tracked: Arc<crate::tracked::TrackedPipeline>,
}

/// A policy's dict as its config type, errors naming `policy.field`.
pub(crate) fn policy<T: serde::de::DeserializeOwned>(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Option<T>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let dict = value.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!("`{name}` must be a dict of {name} config fields"))
    })?;
    crate::config::section(dict, name).map(Some)
}

/// A retry budget on `manual` if the caller gave a manual clock (tests
/// move it), else on the library's clock.
pub(crate) fn retry_budget(
    config: RetryBudgetConfig,
    manual: Option<&tripline::ManualClock>,
) -> PyResult<RetryBudget> {
    match manual {
        Some(c) => RetryBudget::with_clock(config, c.clone()),
        None => RetryBudget::try_new(config),
    }
    .map_err(policy_error)
}

pub(crate) fn policy_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (*, name="pipeline", breaker=None, retry=None, budget=None, bulkhead=None, timeout=None, fallback=None, retry_exceptions=None, clock=None, seed=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, keyword-only
    fn new(
        py: Python<'_>,
        name: &str,
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
        // The pipeline's clock, as the builder would pick it, so the async
        // timer's sleeps last their time on it too.
        let clock: SharedClock = match (&manual, &breaker) {
            (Some(c), _) => c.clone().into(),
            (None, Some(b)) => b.get().core.breaker.clock().clone(),
            (None, None) => SharedClock::monotonic(),
        };
        // Async calls wait and time out on the awaiting task's loop.
        builder = builder
            .clock(clock.clone())
            .timer(Arc::new(crate::aio::AsyncioTimer::new(Some(&clock))));
        if let Some(s) = seed {
            builder = builder.seed(s);
        }
        if let Some(config) = policy::<RetryConfig>(retry, "retry")? {
            builder = builder.retry(config);
        }
        if let Some(config) = policy::<RetryBudgetConfig>(budget, "budget")? {
            builder = builder.budget(retry_budget(config, manual.as_ref())?);
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
        let pipeline = builder.build().map_err(policy_error)?;
        let tracked = Arc::new(crate::tracked::TrackedPipeline {
            name: name.to_owned(),
            pipeline: pipeline.clone(),
        });
        crate::tracked::track_pipeline(&tracked);
        Ok(Pipeline {
            _tracked: tracked,
            name: name.to_owned(),
            pipeline,
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

    /// The name the pipeline's policies are exported under.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The policies' counts: `{"name", "retry": {"attempts", "retries",
    /// "refused": {reason: n}}, "budget": {"available", "deposits",
    /// "withdrawals", "refused"}, "bulkhead": {"in_flight", "waiting",
    /// "admitted", "rejected", "max_concurrent", "max_queue"}}`, an absent
    /// policy as `None`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats::stats(py, &self.name, &self.pipeline)
    }

    /// Awaits `func(*args, **kwargs)` (an `async def`, or any function
    /// returning an awaitable) through every policy; with a `fallback`
    /// (sync or async), its answer replaces any error. A cancelled task
    /// releases the breaker permit and the bulkhead slot unrecorded.
    #[pyo3(signature = (func, /, *args, **kwargs))]
    fn acall(
        &self,
        py: Python<'_>,
        func: Py<PyAny>,
        args: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    ) -> crate::aio::AsyncCall {
        self.start(py, func, args, kwargs)
    }

    /// Decorates a `def` (through `call`) or an `async def` (through
    /// `acall`) so every call goes through the pipeline.
    fn __call__(slf: &Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let method = if crate::guard::is_coroutine_function(&func)? {
            "acall"
        } else {
            "call"
        };
        wraps(slf.getattr(method)?, func)
    }
}

/// `functools.partial(method, func)` with `func`'s name, doc and hints.
pub(crate) fn wraps(method: Bound<'_, PyAny>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let py = method.py();
    let functools = py.import("functools")?;
    let partial = functools.getattr("partial")?.call1((method, &func))?;
    functools
        .getattr("update_wrapper")?
        .call1((&partial, func))?;
    Ok(partial.unbind())
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
        let retry_on = self.retry_exceptions.as_ref();
        let result = self
            .pipeline
            .request()
            .classify(|r: &PyResultAny| judge(py, classify, r))
            .retry_on(|r: &PyResultAny| decide(py, classify, retry_on, r))
            .call(|_attempt| func.call(args, kwargs).map(Bound::unbind));
        result.map_err(|e| error(py, self.breaker.as_ref(), e))
    }
}
