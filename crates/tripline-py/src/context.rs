//! `with breaker:` and `async with breaker:`.
//!
//! A breaker object is shared by threads and tasks, so the permit of a
//! block cannot live on it: each block pushes its permit on a stack held
//! in a `contextvars.ContextVar`, which is per thread and per `asyncio`
//! task, and `__exit__` pops it. Nested and concurrent blocks on one
//! breaker each settle their own permit.

use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::breaker::CircuitBreaker;
use crate::permit::Permit;

/// Acquires a permit and pushes it on this context's stack.
pub(crate) fn enter(slf: &Bound<'_, CircuitBreaker>) -> PyResult<Py<Permit>> {
    let py = slf.py();
    let permit = Py::new(py, Permit::acquire(slf)?)?;
    let var = slf.get().core.permit_stack(py)?;
    let below = var.call_method1("get", (py.None(),))?;
    var.call_method1(
        "set",
        (PyTuple::new(
            py,
            [permit.clone_ref(py).into_any(), below.unbind()],
        )?,),
    )?;
    Ok(permit)
}

/// Pops this context's top permit and settles it by `exc`.
pub(crate) fn exit(slf: &Bound<'_, CircuitBreaker>, exc: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    let py = slf.py();
    let var = slf.get().core.permit_stack(py)?;
    let top = var.call_method1("get", (py.None(),))?;
    if top.is_none() {
        return Err(PyRuntimeError::new_err(
            "breaker __exit__ without a matching __enter__ in this thread or task",
        ));
    }
    let top = top.cast_into::<PyTuple>()?;
    let permit = top.get_item(0)?.cast_into::<Permit>()?;
    var.call_method1("set", (top.get_item(1)?,))?;
    permit.get().finish(py, exc);
    Ok(())
}

/// An awaitable that is already done: what `__aenter__` and `__aexit__`
/// return, since taking and settling a permit never waits.
#[pyclass(frozen, module = "tripline")]
pub struct Ready {
    value: Py<PyAny>,
}

impl Ready {
    pub(crate) fn new(value: Py<PyAny>) -> Self {
        Ready { value }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<()> {
        Err(PyStopIteration::new_err((self.value.clone_ref(py),)))
    }

    fn send(&self, py: Python<'_>, _value: Py<PyAny>) -> PyResult<()> {
        Err(PyStopIteration::new_err((self.value.clone_ref(py),)))
    }

    #[pyo3(signature = (typ, val=None, _tb=None))]
    fn throw(
        &self,
        typ: Bound<'_, PyAny>,
        val: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        Err(match val.filter(|v| !v.is_none()) {
            Some(v) => PyErr::from_value(v),
            None => PyErr::from_value(typ),
        })
    }

    fn close(&self) {}
}
