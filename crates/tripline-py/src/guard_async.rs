//! `@breaker` on an `async def`: a native awaitable drives the user's
//! coroutine (`send`/`throw`/`close`), so an awaited guarded call adds no
//! coroutine frame — only this object between the caller's `await` and
//! the coroutine.
//!
//! The permit is taken at the first step (when the call is awaited, as a
//! coroutine body starts then), recorded when the coroutine returns or
//! raises, and released neutrally on `asyncio.CancelledError`, on `close()`
//! and when the awaitable is dropped unfinished — a dropped future in Rust.

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{IntoPyObjectExt, intern};
use tripline::{Clock, OwnedPermit, Timestamp};

use crate::breaker::CircuitBreaker;

/// An `async def` decorated with a breaker.
#[pyclass(frozen, module = "tripline", dict, weakref)]
pub struct AsyncGuarded {
    breaker: Py<CircuitBreaker>,
    func: Py<PyAny>,
}

impl AsyncGuarded {
    pub(crate) fn new(breaker: Py<CircuitBreaker>, func: Py<PyAny>) -> Self {
        AsyncGuarded { breaker, func }
    }
}

#[pymethods]
impl AsyncGuarded {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<GuardedAwaitable> {
        let coro = self.func.bind(py).call(args, kwargs)?;
        GuardedAwaitable::start(self.breaker.clone_ref(py), coro.unbind())
    }

    fn __get__(
        slf: Bound<'_, Self>,
        obj: Option<Bound<'_, PyAny>>,
        _objtype: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        crate::guard::bind_method(slf.into_any(), obj)
    }

    /// The breaker guarding this function.
    #[getter]
    fn breaker(&self, py: Python<'_>) -> Py<CircuitBreaker> {
        self.breaker.clone_ref(py)
    }
}

/// One awaited call of a guarded `async def`.
#[pyclass(module = "tripline")]
pub struct GuardedAwaitable {
    breaker: Py<CircuitBreaker>,
    coro: Py<PyAny>,
    permit: Option<OwnedPermit>,
    start: Timestamp,
    started: bool,
}

impl GuardedAwaitable {
    pub(crate) fn start(breaker: Py<CircuitBreaker>, coro: Py<PyAny>) -> PyResult<Self> {
        Ok(GuardedAwaitable {
            breaker,
            coro,
            permit: None,
            start: Timestamp::default(),
            started: false,
        })
    }

    /// Runs one step of the coroutine (`step` is `send` or `throw`),
    /// acquiring the permit before the first and recording at the last.
    fn step(
        &mut self,
        py: Python<'_>,
        step: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if !self.started {
            self.started = true;
            let core = &self.breaker.get().core;
            match core.breaker.try_acquire_owned() {
                Ok(p) => {
                    self.permit = Some(p);
                    self.start = core.breaker.clock().now();
                }
                Err(r) => {
                    // The body never runs: close it, so Python does not warn
                    // that the coroutine was never awaited.
                    let _ = self.coro.bind(py).call_method0(intern!(py, "close"));
                    return Err(core.reject(py, r));
                }
            }
        }
        let result = step(self.coro.bind(py));
        if let Err(err) = &result {
            self.finish(py, err);
        }
        result
    }

    /// Records the outcome of the coroutine that ended with `err`
    /// (`StopIteration` carries its return value).
    fn finish(&mut self, py: Python<'_>, err: &PyErr) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let core = &self.breaker.get().core;
        let elapsed = core.breaker.clock().now() - self.start;
        if err.is_instance_of::<PyStopIteration>(py) {
            let outcome = if core.classify.has_func() {
                let value = err
                    .value(py)
                    .getattr(intern!(py, "value"))
                    .unwrap_or_else(|_| py.None().into_bound(py));
                core.classify.returned(py, &value)
            } else {
                tripline::Outcome::Success
            };
            permit.record(outcome, elapsed);
        } else if let Some(outcome) = core.classify.raised(py, err) {
            permit.record(outcome, elapsed);
        }
    }
}

#[pymethods]
impl GuardedAwaitable {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.step(py, |c| {
            Ok(c.call_method1(intern!(c.py(), "send"), (c.py().None(),))?
                .unbind())
        })
    }

    /// Sends `value` into the coroutine.
    fn send(&mut self, py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        self.step(py, |c| {
            Ok(c.call_method1(intern!(c.py(), "send"), (value,))?.unbind())
        })
    }

    /// Raises an exception inside the coroutine (how `asyncio` cancels it).
    #[pyo3(signature = (typ, val=None, tb=None))]
    fn throw(
        &mut self,
        py: Python<'_>,
        typ: Py<PyAny>,
        val: Option<Py<PyAny>>,
        tb: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.step(py, |c| {
            let py = c.py();
            let args = match (val, tb) {
                (None, None) => PyTuple::new(py, [typ])?,
                (Some(v), None) => PyTuple::new(py, [typ, v])?,
                (v, Some(tb)) => PyTuple::new(py, [typ, v.unwrap_or_else(|| py.None()), tb])?,
            };
            Ok(c.call_method1(intern!(py, "throw"), args)?.unbind())
        })
    }

    /// Closes the coroutine; its permit is released neutrally.
    fn close(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.started = true;
        self.permit = None;
        self.coro
            .bind(py)
            .call_method0(intern!(py, "close"))?
            .into_py_any(py)
    }
}
