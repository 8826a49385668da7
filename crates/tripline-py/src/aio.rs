//! asyncio under the library's async policies: a Rust future driven as a
//! Python awaitable.
//!
//! The async pipeline, cluster strategies and timeout are the Rust
//! library's own futures (`Pipeline::call_async`, `Failover::call_async_with`,
//! `Forking::call_with`, `timeout`), not Python re-implementations. An
//! [`AsyncCall`] owns one such future and steps it whenever the asyncio task
//! awaiting it steps. The future's leaves are Python awaitables:
//!
//! * [`leaf::AwaitLeaf`] steps the user's coroutine; when the coroutine
//!   yields an asyncio future, the leaf reports it to the poll's [`Frame`]
//!   and stays pending;
//! * [`timer::AsyncioTimer`] is the library's `Timer` on the running loop
//!   (`loop.call_later`): backoff waits and timeouts yield its future.
//!
//! After a poll, one future reported and nothing else waiting: it goes to
//! the task as is (the common case, no extra object). Several (an attempt
//! racing its timeout, forks racing each other), or a Rust waker stored by
//! the library (a bulkhead queue): the task waits on one future that any of
//! them, or the waker, completes.
//!
//! Cancellation is neutral, as a dropped future is in Rust: the task's
//! `CancelledError` is thrown into every suspended coroutine; when one lets
//! it (or any `BaseException` that is not an `Exception`) out, or when no
//! coroutine was there to take it (a backoff wait, a bulkhead queue), the
//! whole Rust future is dropped — breaker permits and bulkhead slots
//! released unrecorded, losing coroutines closed — and the exception
//! propagates.

mod frame;
mod leaf;
mod timer;
mod wake;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use pyo3::exceptions::{PyBaseException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{IntoPyObjectExt, intern};

use frame::running_loop;
pub(crate) use frame::{abort, event_loop, helpers, is_thrown_at, poll_id, take_thrown, wait_on};
pub(crate) use leaf::{AwaitLeaf, call_leaf};
pub(crate) use timer::AsyncioTimer;

use crate::iter_send::Step;

/// A Rust future whose output is a Python call's.
pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = PyResult<Py<PyAny>>> + Send>>;

/// An asyncio-awaitable tripline call (pipeline, cluster strategy,
/// timeout): `await` it once, or hand it to `asyncio.create_task`.
#[pyclass(module = "tripline")]
pub struct AsyncCall {
    /// In a mutex only to be `Sync`: reached through `&mut self`
    /// (`get_mut`), never locked.
    fut: std::sync::Mutex<Option<BoxFuture>>,
    event_loop: Option<Py<PyAny>>,
    wake: Arc<wake::WakeCell>,
    waker: Waker,
    /// The `_AnyOf` of the last suspension, unhooked at the next step.
    any_of: Option<Py<PyAny>>,
}

impl AsyncCall {
    /// An awaitable running `fut`.
    pub(crate) fn new(fut: BoxFuture) -> Self {
        let wake = Arc::new(wake::WakeCell::default());
        AsyncCall {
            fut: std::sync::Mutex::new(Some(fut)),
            event_loop: None,
            waker: Waker::from(wake.clone()),
            wake,
            any_of: None,
        }
    }

    /// Drops the future: what a finished, aborted or abandoned call does.
    fn drop_future(&mut self) {
        let fut = self.fut.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        drop(fut);
    }

    /// One poll of the future, with `thrown` for the suspended coroutines.
    fn step(&mut self, py: Python<'_>, thrown: Option<PyErr>) -> PyResult<Step> {
        if let Some(any) = self.any_of.take() {
            // Its callbacks would otherwise pile up on long-lived futures.
            let _ = any.bind(py).call_method0(intern!(py, "detach"));
        }
        let slot = self.fut.get_mut().unwrap_or_else(|p| p.into_inner());
        let Some(fut) = slot.as_mut() else {
            return Err(thrown.unwrap_or_else(|| {
                PyRuntimeError::new_err("cannot reuse an already awaited tripline call")
            }));
        };
        self.wake.arm();
        frame::enter(thrown, self.event_loop.take());
        let poll = fut.as_mut().poll(&mut Context::from_waker(&self.waker));
        let Some(frame) = frame::leave() else {
            return Err(PyRuntimeError::new_err("tripline: asyncio frame lost"));
        };
        self.event_loop = frame.event_loop;
        if let Some(err) = frame.abort {
            // Dropping the future releases every permit unrecorded.
            self.drop_future();
            return Err(err);
        }
        match poll {
            Poll::Ready(result) => {
                self.drop_future();
                result.map(Step::Returned)
            }
            Poll::Pending => match frame.thrown.filter(|_| !frame.thrown_used) {
                Some(err) => {
                    // Thrown while nothing could take it (a backoff wait, a
                    // bulkhead queue): the call ends here, unrecorded.
                    self.drop_future();
                    Err(err)
                }
                None => self.suspend(py, frame.yielded),
            },
        }
    }

    /// What the task waits on after a pending poll.
    fn suspend(&mut self, py: Python<'_>, mut yielded: Vec<Py<PyAny>>) -> PyResult<Step> {
        // The driver's cell and its waker hold two references; a third is
        // a waker the library stored to be woken later (a bulkhead queue).
        let stored = Arc::strong_count(&self.wake) > 2;
        if yielded.len() == 1
            && !stored
            && !self.wake.woken()
            && let Some(one) = yielded.pop()
        {
            return Ok(Step::Yielded(one));
        }
        if self.wake.woken() || yielded.iter().any(|y| y.is_none(py)) {
            return Ok(Step::Yielded(py.None()));
        }
        let event_loop = match &self.event_loop {
            Some(l) => l.clone_ref(py),
            None => {
                let l = running_loop(py)?;
                self.event_loop = Some(l.clone_ref(py));
                l
            }
        };
        let any = helpers(py)?
            .getattr(intern!(py, "AnyOf"))?
            .call1((event_loop.bind(py), PyList::new(py, yielded)?))?;
        let waiter = any.getattr(intern!(py, "waiter"))?.unbind();
        let wake_fn = any.getattr(intern!(py, "wake_threadsafe"))?.unbind();
        self.any_of = Some(any.unbind());
        if !self.wake.target(wake_fn) {
            // Woken between the poll and now (another thread): step again.
            return Ok(Step::Yielded(py.None()));
        }
        Ok(Step::Yielded(waiter))
    }
}

/// The exception `throw(typ, val, tb)` raises, as generators build it.
fn thrown_error(
    py: Python<'_>,
    typ: Bound<'_, PyAny>,
    val: Option<Bound<'_, PyAny>>,
) -> PyResult<PyErr> {
    if let Some(v) = val.filter(|v| !v.is_none()) {
        if v.is_instance_of::<PyBaseException>() {
            return Ok(PyErr::from_value(v));
        }
        return Ok(PyErr::from_value(typ.call1((v,))?));
    }
    if typ.is_instance_of::<PyBaseException>() {
        return Ok(PyErr::from_value(typ));
    }
    let _ = py;
    Ok(PyErr::from_value(typ.call0()?))
}

#[pymethods]
impl AsyncCall {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.step(py, None)? {
            Step::Yielded(y) => Ok(Some(y)),
            Step::Returned(v) if v.is_none(py) => Ok(None),
            Step::Returned(v) => Err(crate::guard_async::stop_iteration(py, v)),
        }
    }

    /// Steps the call (asyncio sends `None` only).
    fn send(&mut self, py: Python<'_>, _value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        match self.step(py, None)? {
            Step::Yielded(y) => Ok(y),
            Step::Returned(v) => Err(crate::guard_async::stop_iteration(py, v)),
        }
    }

    /// Raises an exception inside the suspended coroutines (how asyncio
    /// cancels); see the module's notes on cancellation.
    #[pyo3(signature = (typ, val=None, _tb=None))]
    fn throw(
        &mut self,
        py: Python<'_>,
        typ: Bound<'_, PyAny>,
        val: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let err = thrown_error(py, typ, val)?;
        match self.step(py, Some(err))? {
            Step::Yielded(y) => Ok(y),
            Step::Returned(v) => Err(crate::guard_async::stop_iteration(py, v)),
        }
    }

    /// Abandons the call: permits released unrecorded, coroutines closed.
    fn close(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.drop_future();
        py.None().into_py_any(py)
    }
}
