//! The user's awaitable as a Rust future: each poll steps the coroutine
//! once (send or throw) and reports the asyncio future it then waits on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pyo3::exceptions::PyException;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::iter_send::{Step, by_method, send_into};

static COROUTINE_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CANCELLED: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `asyncio.CancelledError`.
fn cancelled_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    CANCELLED
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("asyncio")?
                    .getattr("CancelledError")?
                    .cast_into::<PyType>()?
                    .unbind(),
            )
        })
        .map(|t| t.bind(py))
}

/// One awaitable, stepped by polls; `Ok` with its return value, `Err` with
/// the `Exception` it raised. A `BaseException` that is not an `Exception`
/// (`CancelledError`, `KeyboardInterrupt`) aborts the whole call instead.
pub(crate) struct AwaitLeaf {
    /// The coroutine (or `__await__` iterator); `None` once finished.
    iter: Option<Py<PyAny>>,
    /// The future it last yielded, until it is done.
    waiting: Option<Py<PyAny>>,
    /// The poll in which it last yielded (0: not suspended).
    suspended_at: u64,
    /// A value known at once (a plain function's result, or its error).
    ready: Option<PyResult<Py<PyAny>>>,
}

/// Calls `func(*args, **kwargs)` and wraps what it returns: a coroutine or
/// other awaitable is stepped by polls; a plain value (a `def` used where
/// an `async def` may be) is the result at once.
pub(crate) fn call_leaf(
    py: Python<'_>,
    func: &Py<PyAny>,
    args: &Py<PyTuple>,
    kwargs: Option<&Py<PyDict>>,
) -> AwaitLeaf {
    let ready = AwaitLeaf::ready;
    let value = match func
        .bind(py)
        .call(args.bind(py), kwargs.map(|k| k.bind(py)))
    {
        Ok(v) => v,
        Err(e) => return ready(Err(e)),
    };
    match AwaitLeaf::new(&value) {
        Ok(Some(leaf)) => leaf,
        Ok(None) => ready(Ok(value.unbind())),
        Err(e) => ready(Err(e)),
    }
}

impl AwaitLeaf {
    /// A leaf whose result is known already.
    pub(crate) fn ready(r: PyResult<Py<PyAny>>) -> Self {
        AwaitLeaf {
            iter: None,
            waiting: None,
            suspended_at: 0,
            ready: Some(r),
        }
    }

    /// A leaf stepping `value`, `None` when it is not awaitable.
    pub(crate) fn new(value: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let py = value.py();
        let coroutine = COROUTINE_TYPE.get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("types")?
                    .getattr("CoroutineType")?
                    .cast_into::<PyType>()?
                    .unbind(),
            )
        })?;
        let iter = if value.get_type().is(coroutine.bind(py)) {
            value.clone()
        } else if value.hasattr(intern!(py, "__await__"))? {
            value.call_method0(intern!(py, "__await__"))?
        } else {
            return Ok(None);
        };
        Ok(Some(AwaitLeaf {
            iter: Some(iter.unbind()),
            waiting: None,
            suspended_at: 0,
            ready: None,
        }))
    }

    fn step(&mut self, py: Python<'_>) -> Poll<PyResult<Py<PyAny>>> {
        if let Some(r) = self.ready.take() {
            return Poll::Ready(r);
        }
        let Some(iter) = &self.iter else {
            return Poll::Pending;
        };
        let iter = iter.bind(py).clone();
        let result = match super::take_thrown(py, self.suspended_at) {
            Some(err) => {
                let is_cancel = cancelled_error(py).is_ok_and(|t| err.is_instance(py, t.as_any()));
                if let Some(f) = self.waiting.take()
                    && is_cancel
                    && !f.is_none(py)
                {
                    // As a task cancels: the awaited future first.
                    let _ = f.bind(py).call_method0(intern!(py, "cancel"));
                }
                by_method(
                    py,
                    iter.call_method1(intern!(py, "throw"), (err.value(py),)),
                )
            }
            None => {
                if let Some(f) = &self.waiting {
                    let f = f.bind(py);
                    if !f.is_none() && !is_done(f) {
                        let _ = f.setattr(intern!(py, "_asyncio_future_blocking"), true);
                        super::wait_on(f.clone().unbind());
                        return Poll::Pending;
                    }
                }
                self.waiting = None;
                send_into(&iter, &py.None().into_bound(py))
            }
        };
        match result {
            Ok(Step::Yielded(y)) => {
                super::wait_on(y.clone_ref(py));
                self.waiting = Some(y);
                self.suspended_at = super::poll_id();
                Poll::Pending
            }
            Ok(Step::Returned(v)) => {
                self.iter = None;
                Poll::Ready(Ok(v))
            }
            Err(e) if e.is_instance_of::<PyException>(py) => {
                self.iter = None;
                Poll::Ready(Err(e))
            }
            Err(e) => {
                self.iter = None;
                super::abort(e);
                Poll::Pending
            }
        }
    }
}

/// `future.done()`, true when it cannot be asked (then stepping the
/// coroutine surfaces the problem).
fn is_done(f: &Bound<'_, PyAny>) -> bool {
    f.call_method0(intern!(f.py(), "done"))
        .and_then(|d| d.is_truthy())
        .unwrap_or(true)
}

impl Future for AwaitLeaf {
    type Output = PyResult<Py<PyAny>>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        Python::attach(|py| this.step(py))
    }
}

impl Drop for AwaitLeaf {
    /// Abandoned unfinished (a timeout, a lost race, a cancelled call):
    /// the awaited future is cancelled and the coroutine closed.
    fn drop(&mut self) {
        let Some(iter) = self.iter.take() else {
            return;
        };
        Python::attach(|py| {
            if let Some(f) = self.waiting.take()
                && !f.is_none(py)
            {
                let _ = f.bind(py).call_method0(intern!(py, "cancel"));
            }
            if let Err(e) = iter.bind(py).call_method0(intern!(py, "close")) {
                e.write_unraisable(py, None);
            }
        });
    }
}
