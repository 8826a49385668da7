//! `@breaker` on a `def`: a native callable, so the closed path costs one
//! Rust call around the user's function — no Python frame of its own.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::breaker::CircuitBreaker;

static IS_COROUTINE_FUNCTION: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static UPDATE_WRAPPER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static METHOD_TYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn cached<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    name: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import(module)?.getattr(name)?.unbind())
    })
    .map(|f| f.bind(py))
}

/// `inspect.iscoroutinefunction(func)`.
pub(crate) fn is_coroutine_function(func: &Bound<'_, PyAny>) -> PyResult<bool> {
    cached(
        func.py(),
        &IS_COROUTINE_FUNCTION,
        "inspect",
        "iscoroutinefunction",
    )?
    .call1((func,))?
    .is_truthy()
}

/// Wraps `func` in the guard for its kind, with `functools.wraps` metadata
/// (`__name__`, `__doc__`, `__wrapped__`, annotations).
pub(crate) fn decorate(
    breaker: &Bound<'_, CircuitBreaker>,
    func: Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let py = breaker.py();
    if !func.is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a breaker decorates a callable, not {}",
            func.get_type().name()?
        )));
    }
    let wrapper = if is_coroutine_function(&func)? {
        Py::new(
            py,
            crate::guard_async::AsyncGuarded::new(breaker.clone().unbind(), func.clone().unbind()),
        )?
        .into_any()
    } else {
        Py::new(
            py,
            Guarded {
                breaker: breaker.clone().unbind(),
                func: func.clone().unbind(),
            },
        )?
        .into_any()
    };
    cached(py, &UPDATE_WRAPPER, "functools", "update_wrapper")?.call1((wrapper.bind(py), func))?;
    Ok(wrapper)
}

/// Binds a guard to an instance, as a function is bound when it is a
/// method: `@breaker` works on methods.
pub(crate) fn bind_method(
    slf: Bound<'_, PyAny>,
    obj: Option<Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(slf.unbind()),
        Some(obj) => Ok(cached(slf.py(), &METHOD_TYPE, "types", "MethodType")?
            .call1((slf, obj))?
            .unbind()),
    }
}

/// A function decorated with a breaker (`@breaker def f(...)`). Calling it
/// calls the function through the breaker; `.breaker` is the breaker.
#[pyclass(frozen, module = "tripline", dict, weakref)]
pub struct Guarded {
    breaker: Py<CircuitBreaker>,
    func: Py<PyAny>,
}

#[pymethods]
impl Guarded {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.breaker
            .get()
            .core
            .call(py, self.func.bind(py), args, kwargs)
    }

    fn __get__(
        slf: Bound<'_, Self>,
        obj: Option<Bound<'_, PyAny>>,
        _objtype: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        bind_method(slf.into_any(), obj)
    }

    /// The breaker guarding this function.
    #[getter]
    fn breaker(&self, py: Python<'_>) -> Py<CircuitBreaker> {
        self.breaker.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<tripline.Guarded {} by {:?}>",
            self.func
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.breaker.get().core.breaker.name()
        )
    }
}
