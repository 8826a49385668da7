//! `@breaker` on an `async def`: a native awaitable drives the user's
//! coroutine (`send`/`throw`/`close`), so an awaited guarded call adds no
//! coroutine frame — only this object between the caller's `await` and
//! the coroutine.
//!
//! The permit is taken when the guarded function is called (a rejected
//! call creates no coroutine and raises `CircuitOpenError` when awaited),
//! timed from the coroutine's first step, recorded when it returns or
//! raises, and released neutrally on `asyncio.CancelledError`, on `close()`
//! and when the awaitable is dropped unfinished — a dropped future in Rust.

use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{IntoPyObjectExt, intern};
use tripline::{Clock, OwnedPermit, Rejected, Timestamp};

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
        GuardedAwaitable::call(py, &self.breaker, self.func.bind(py), args, kwargs)
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
    /// The user's coroutine; `None` when the call was rejected.
    coro: Option<Py<PyAny>>,
    permit: Option<OwnedPermit>,
    rejected: Option<Rejected>,
    /// When the coroutine first ran.
    start: Option<Timestamp>,
}

static CORO_TYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static CORO_SEND: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `types.CoroutineType` and its unbound `send`: calling the descriptor
/// with the coroutine skips creating a bound method on every step.
fn coroutine_send(py: Python<'_>) -> PyResult<(&Bound<'_, PyAny>, &Bound<'_, PyAny>)> {
    let ty = CORO_TYPE.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("types")?.getattr("CoroutineType")?.unbind())
    })?;
    let send =
        CORO_SEND.get_or_try_init(py, || Ok::<_, PyErr>(ty.bind(py).getattr("send")?.unbind()))?;
    Ok((ty.bind(py), send.bind(py)))
}

impl GuardedAwaitable {
    /// Admits the call (or records the rejection, raised when awaited) and
    /// creates the coroutine only if admitted: a rejected call costs no
    /// coroutine, and no "never awaited" warning.
    pub(crate) fn call(
        py: Python<'_>,
        breaker: &Py<CircuitBreaker>,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let (coro, permit, rejected) = match breaker.get().core.breaker.try_acquire_owned() {
            // A function that raises before returning its coroutine drops
            // the permit here: released neutrally.
            Ok(p) => (Some(func.call(args, kwargs)?.unbind()), Some(p), None),
            Err(r) => (None, None, Some(r)),
        };
        Ok(GuardedAwaitable {
            breaker: breaker.clone_ref(py),
            coro,
            permit,
            rejected,
            start: None,
        })
    }

    /// Runs one step of the coroutine (`step` is `send` or `throw`),
    /// starting the clock before the first and recording at the last.
    fn step(
        &mut self,
        py: Python<'_>,
        step: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let Some(coro) = &self.coro else {
            let core = &self.breaker.get().core;
            return Err(match self.rejected.take() {
                Some(r) => core.reject(py, r),
                None => PyRuntimeError::new_err("cannot reuse an already awaited guarded call"),
            });
        };
        if self.start.is_none() {
            self.start = Some(self.breaker.get().core.breaker.clock().now());
        }
        let result = step(coro.bind(py));
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
        let start = self.start.unwrap_or_else(|| core.breaker.clock().now());
        let elapsed = core.breaker.clock().now() - start;
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
            let py = c.py();
            let (ty, send) = coroutine_send(py)?;
            if c.get_type().is(ty) {
                Ok(send.call1((c, py.None()))?.unbind())
            } else {
                Ok(c.call_method1(intern!(py, "send"), (py.None(),))?.unbind())
            }
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
        self.permit = None;
        self.rejected = None;
        match &self.coro {
            Some(c) => c
                .bind(py)
                .call_method0(intern!(py, "close"))?
                .into_py_any(py),
            None => Ok(py.None()),
        }
    }
}
