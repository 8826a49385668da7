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
use pyo3::types::{PyDict, PyTuple};
use pyo3::{IntoPyObjectExt, intern};
use tripline::{Clock, OwnedPermit, Rejected, Timestamp};

use crate::iter_send::{Step, by_method, send_into};

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

    /// Runs one step of the coroutine (`op` is a send or a throw),
    /// starting the clock before the first and recording at the last.
    fn step(
        &mut self,
        py: Python<'_>,
        op: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<Step>,
    ) -> PyResult<Step> {
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
        let result = op(coro.bind(py));
        match &result {
            Ok(Step::Yielded(_)) => {}
            Ok(Step::Returned(value)) => self.finish(py, Ok(value.bind(py))),
            Err(err) => self.finish(py, Err(err)),
        }
        result
    }

    /// Records the outcome of the coroutine that returned or raised.
    fn finish(&mut self, py: Python<'_>, end: Result<&Bound<'_, PyAny>, &PyErr>) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let core = &self.breaker.get().core;
        let start = self.start.unwrap_or_else(|| core.breaker.clock().now());
        let elapsed = core.breaker.clock().now() - start;
        let outcome = match end {
            Ok(value) => Some(core.classify.returned(py, value)),
            Err(err) => core.classify.raised(py, err),
        };
        if let Some(outcome) = outcome {
            permit.record(outcome, elapsed);
        }
    }
}

/// The exception that ends an iteration with `value`, built at once:
/// PyO3's lazily built errors (a boxed closure run when raised) cost more
/// than making `StopIteration(value)` here (~23 ns an awaited call, on
/// CPython 3.11).
pub(crate) fn stop_iteration(py: Python<'_>, value: Py<PyAny>) -> PyErr {
    match py.get_type::<PyStopIteration>().call1((value,)) {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
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

    /// The step an `await` takes: `None` ends the iteration with no
    /// exception at all when the coroutine returned `None`.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.step(py, |c| send_into(c, &c.py().None().into_bound(c.py())))? {
            Step::Yielded(y) => Ok(Some(y)),
            Step::Returned(v) if v.is_none(py) => Ok(None),
            Step::Returned(v) => Err(stop_iteration(py, v)),
        }
    }

    /// Sends `value` into the coroutine.
    fn send(&mut self, py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        match self.step(py, |c| send_into(c, value.bind(c.py())))? {
            Step::Yielded(y) => Ok(y),
            Step::Returned(v) => Err(stop_iteration(py, v)),
        }
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
        let step = self.step(py, |c| {
            let py = c.py();
            let args = match (val, tb) {
                (None, None) => PyTuple::new(py, [typ])?,
                (Some(v), None) => PyTuple::new(py, [typ, v])?,
                (v, Some(tb)) => PyTuple::new(py, [typ, v.unwrap_or_else(|| py.None()), tb])?,
            };
            by_method(py, c.call_method1(intern!(py, "throw"), args))
        })?;
        match step {
            Step::Yielded(y) => Ok(y),
            Step::Returned(v) => Err(stop_iteration(py, v)),
        }
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
