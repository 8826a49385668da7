//! `Pipeline.acall`: the Rust pipeline's async loop (`Call::call_async`)
//! over a coroutine, awaited from asyncio.
//!
//! The same order and decisions as the sync call; what async adds is the
//! Rust pipeline's: a bulkhead that queues (up to its `max_wait`, on the
//! loop's timer), per-attempt timeouts and the overall deadline that
//! really abandon a slow attempt (the coroutine is closed, its breaker
//! permit recorded as a failure), and backoff waits that suspend the task,
//! not the thread.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::{Pipeline, PyResultAny, decide, error, judge};
use crate::aio::{AsyncCall, AwaitLeaf, call_leaf};

/// What a fallback answered: a value, or an awaitable to await.
enum Answer {
    Value(Py<PyAny>),
    Awaiting(AwaitLeaf),
}

/// `fallback(exc)` for an `Exception` (a `BaseException` propagates).
fn fall_back(py: Python<'_>, fallback: &Py<PyAny>, err: PyErr) -> PyResult<Answer> {
    if !err.is_instance_of::<PyException>(py) {
        return Err(err);
    }
    let value = fallback.bind(py).call1((err.value(py),))?;
    Ok(match AwaitLeaf::new(&value)? {
        Some(leaf) => Answer::Awaiting(leaf),
        None => Answer::Value(value.unbind()),
    })
}

impl Pipeline {
    /// `Pipeline.acall` (see its docstring).
    pub(super) fn start(
        &self,
        py: Python<'_>,
        func: Py<PyAny>,
        args: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    ) -> AsyncCall {
        let pipeline = self.pipeline.clone();
        let classify = self.classify.clone();
        let retry_on = self.retry_exceptions.as_ref().map(|t| t.clone_ref(py));
        let breaker = self.breaker.as_ref().map(|b| b.clone_ref(py));
        let fallback = self.fallback.as_ref().map(|f| f.clone_ref(py));
        AsyncCall::new(Box::pin(async move {
            let result = pipeline
                .request()
                .classify(|r: &PyResultAny| Python::attach(|py| judge(py, &classify, r)))
                .retry_on(|r: &PyResultAny| {
                    Python::attach(|py| decide(py, &classify, retry_on.as_ref(), r))
                })
                .call_async(|_attempt| {
                    Python::attach(|py| call_leaf(py, &func, &args, kwargs.as_ref()))
                })
                .await;
            let err = match result {
                Ok(v) => return Ok(v),
                Err(e) => Python::attach(|py| error(py, breaker.as_ref(), e)),
            };
            let Some(f) = fallback else {
                return Err(err);
            };
            match Python::attach(|py| fall_back(py, &f, err))? {
                Answer::Value(v) => Ok(v),
                Answer::Awaiting(leaf) => leaf.await,
            }
        }))
    }
}
