//! `tripline.timeout(after)`: the library's async timeout (`timeout` on a
//! `Timer`) around a coroutine, on the asyncio loop.
//!
//! Only for `async def`: a sync call cannot be abandoned from inside the
//! thread running it, so sync timeouts are the pipeline's per-attempt
//! timeout (judged when the call returns) or the dependency client's own.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::aio::{AsyncCall, AsyncioTimer, call_leaf};

/// An asyncio timeout: `await tripline.timeout(2.0).acall(fetch, url)` or
/// `@tripline.timeout("2s")` on an `async def`. A call still running after
/// `after` is abandoned — its coroutine cancelled and closed — and raises
/// `tripline.AttemptTimeoutError` (a `TimeoutError`).
#[pyclass(frozen, module = "tripline")]
pub struct Timeout {
    after: Duration,
}

#[pymethods]
impl Timeout {
    #[new]
    fn new(after: &Bound<'_, PyAny>) -> PyResult<Self> {
        let after = crate::convert::duration(after, "after")?;
        if after.is_zero() {
            return Err(PyValueError::new_err(
                "invalid timeout: `after` must be positive, got 0s",
            ));
        }
        Ok(Timeout { after })
    }

    /// The timeout, in seconds.
    #[getter]
    fn after(&self) -> f64 {
        self.after.as_secs_f64()
    }

    /// Awaits `func(*args, **kwargs)`, abandoning it after `after`.
    #[pyo3(signature = (func, /, *args, **kwargs))]
    fn acall(
        &self,
        py: Python<'_>,
        func: Py<PyAny>,
        args: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    ) -> AsyncCall {
        let after = self.after;
        let leaf = call_leaf(py, &func, &args, kwargs.as_ref());
        AsyncCall::new(Box::pin(async move {
            match tripline::timeout::timeout(Arc::new(AsyncioTimer::new(None)), after, leaf).await {
                Ok(r) => r,
                Err(t) => Err(Python::attach(|py| {
                    crate::errors::named_error(py, "AttemptTimeoutError", t.to_string())
                })),
            }
        }))
    }

    /// Decorates an `async def`.
    fn __call__(slf: &Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !crate::guard::is_coroutine_function(&func)? {
            return Err(PyTypeError::new_err(
                "`tripline.timeout` guards an async def (a running sync call cannot be abandoned); \
                 for a def, use a pipeline's timeout={\"per_attempt\": ...}",
            ));
        }
        crate::pipeline::wraps(slf.getattr("acall")?, func)
    }

    fn __repr__(&self) -> String {
        format!("tripline.timeout({}s)", self.after.as_secs_f64())
    }
}
