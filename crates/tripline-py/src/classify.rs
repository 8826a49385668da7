//! Which Python results and exceptions count against the dependency.
//!
//! In order: an exception that is not an `Exception` (`KeyboardInterrupt`,
//! `asyncio.CancelledError`, `SystemExit`, `GeneratorExit`) is a neutral
//! cancellation — the permit is released unrecorded, as a dropped future
//! is in Rust; then the user's `classify` callable, if any; then
//! `ignore_exceptions` (not evidence either way); then
//! `failure_exceptions` (default: every `Exception`). An exception in
//! neither tuple is a success: the dependency answered (a `KeyError` from
//! the caller's own parsing says nothing about its health).

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};
use tripline::Outcome;

use crate::errors::log_raised;

/// A breaker's classification rules.
pub(crate) struct Classify {
    failure: Option<Py<PyAny>>,
    ignore: Option<Py<PyAny>>,
    func: Option<Py<PyAny>>,
}

/// `value` as an exception class or a tuple of them, or a `TypeError`
/// naming `field`.
pub(crate) fn exception_types_opt(
    value: Option<Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<Py<PyAny>>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let py = value.py();
    let base = py.get_type::<pyo3::exceptions::PyBaseException>();
    let is_exception_type = |v: &Bound<'_, PyAny>| {
        v.cast::<PyType>()
            .is_ok_and(|t| t.is_subclass(&base).unwrap_or(false))
    };
    let ok = if let Ok(tuple) = value.cast::<PyTuple>() {
        tuple.iter().all(|t| is_exception_type(&t))
    } else {
        is_exception_type(&value)
    };
    if !ok {
        return Err(PyTypeError::new_err(format!(
            "`{field}` must be an exception class or a tuple of exception classes"
        )));
    }
    Ok(Some(value.unbind()))
}

/// `value` as an exception class or a tuple of them, or a `TypeError`.
pub(crate) fn exception_types(value: Bound<'_, PyAny>, field: &str) -> PyResult<Py<PyAny>> {
    exception_types_opt(Some(value), field)?
        .ok_or_else(|| PyTypeError::new_err(format!("`{field}` must not be None")))
}

impl Classify {
    /// Rules from the keyword arguments of the same names.
    pub(crate) fn new(
        failure: Option<Bound<'_, PyAny>>,
        ignore: Option<Bound<'_, PyAny>>,
        func: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let func = func.filter(|f| !f.is_none());
        if func.as_ref().is_some_and(|f| !f.is_callable()) {
            return Err(PyTypeError::new_err(
                "`classify` must be a callable taking a result or an exception and returning \"success\", \"failure\" or \"ignored\"",
            ));
        }
        Ok(Classify {
            failure: exception_types_opt(failure, "failure_exceptions")?,
            ignore: exception_types_opt(ignore, "ignore_exceptions")?,
            func: func.map(Bound::unbind),
        })
    }

    /// The outcome of a call that returned `value`.
    #[inline]
    pub(crate) fn returned(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> Outcome {
        match &self.func {
            None => Outcome::Success,
            Some(f) => self.ask(py, f, value).unwrap_or(Outcome::Success),
        }
    }

    /// The outcome of a call that raised `err`; `None` for a cancellation.
    pub(crate) fn raised(&self, py: Python<'_>, err: &PyErr) -> Option<Outcome> {
        if !err.is_instance_of::<PyException>(py) {
            return None;
        }
        let value = err.value(py);
        if let Some(outcome) = self
            .func
            .as_ref()
            .and_then(|f| self.ask(py, f, value.as_any()))
        {
            return Some(outcome);
        }
        Some(self.by_type(value.as_any()))
    }

    /// The outcome of an exception by the two tuples alone.
    fn by_type(&self, value: &Bound<'_, PyAny>) -> Outcome {
        let py = value.py();
        let matches = |types: &Py<PyAny>| value.is_instance(types.bind(py)).unwrap_or(false);
        if self.ignore.as_ref().is_some_and(matches) {
            Outcome::Ignored
        } else if self.failure.as_ref().is_none_or(matches) {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }

    /// Asks the user's classifier; `None` (use the default rules) if it
    /// answered `None`, raised or answered something else (both logged).
    fn ask(&self, py: Python<'_>, f: &Py<PyAny>, value: &Bound<'_, PyAny>) -> Option<Outcome> {
        match f.bind(py).call1((value,)) {
            Ok(answer) if answer.is_none() => None,
            Ok(answer) => match answer
                .cast::<PyString>()
                .ok()
                .and_then(|s| s.to_cow().ok().map(|c| c.into_owned()))
            {
                Some(s) if s == "success" => Some(Outcome::Success),
                Some(s) if s == "failure" => Some(Outcome::Failure),
                Some(s) if s == "ignored" => Some(Outcome::Ignored),
                _ => {
                    let err = PyTypeError::new_err(format!(
                        "`classify` returned {answer:?}; it must return \"success\", \"failure\", \"ignored\" or None"
                    ));
                    log_raised(py, "classify", err);
                    None
                }
            },
            Err(e) => {
                log_raised(py, "classify", e);
                None
            }
        }
    }
}

/// An outcome from its name (`"success"`, `"failure"`, `"ignored"`).
pub(crate) fn outcome_named(name: &str) -> PyResult<Outcome> {
    match name {
        "success" => Ok(Outcome::Success),
        "failure" => Ok(Outcome::Failure),
        "ignored" => Ok(Outcome::Ignored),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "`outcome` must be \"success\", \"failure\" or \"ignored\", not {other:?}"
        ))),
    }
}
