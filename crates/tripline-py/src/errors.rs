//! Errors crossing into Python: rejections as `tripline.CircuitOpenError`,
//! bad config as `ValueError`/`TypeError` naming the field.
//!
//! The exception classes live in `tripline/_errors.py` (Python classes, so
//! users subclass and pickle them as usual) and are built here from an
//! argument tuple only: `BaseException.__new__` stores it and the class's
//! properties read it back, so a rejection runs no Python `__init__` — the
//! rejected path stays in the hundreds of nanoseconds.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

static CIRCUIT_OPEN: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `tripline._errors.<name>`, imported once.
fn error_class<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyType>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(
            py.import("tripline._errors")?
                .getattr(name)?
                .cast_into::<PyType>()?
                .unbind(),
        )
    })
    .map(|t| t.bind(py))
}

/// A `CircuitOpenError` for a call `breaker` refused.
pub(crate) fn circuit_open(
    py: Python<'_>,
    breaker: &Bound<'_, PyString>,
    rejected: tripline::Rejected,
    reason: Option<Bound<'_, PyString>>,
) -> PyErr {
    let retry_after = rejected.retry_after().map(|d| d.as_secs_f64());
    let built = error_class(py, &CIRCUIT_OPEN, "CircuitOpenError").and_then(|class| {
        let args = (
            breaker,
            retry_after,
            reason,
            state_name(py, rejected.state()),
        );
        class.call1(args)
    });
    match built {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// A state's name as an interned Python string (no allocation per call).
fn state_name(py: Python<'_>, state: tripline::State) -> &Bound<'_, PyString> {
    use tripline::State;
    match state {
        State::Closed => pyo3::intern!(py, "closed"),
        State::Open => pyo3::intern!(py, "open"),
        State::HalfOpen => pyo3::intern!(py, "half_open"),
        State::ForcedOpen => pyo3::intern!(py, "forced_open"),
        State::Disabled => pyo3::intern!(py, "disabled"),
        State::MetricsOnly => pyo3::intern!(py, "metrics_only"),
    }
}

/// A config error of a `subject` (`"breaker"`, `"throttle"`) read from
/// Python values: `TypeError` for a value of the wrong type, `ValueError`
/// for the rest (unknown keyword, out-of-range value).
pub(crate) fn config_error(subject: &str, field: &str, message: &str) -> PyErr {
    let text = config_text(subject, field, message);
    if message.starts_with("invalid type") || message.contains("must be a") {
        PyTypeError::new_err(text)
    } else {
        PyValueError::new_err(text)
    }
}

/// A config error's text: the subject, the field and the constraint.
pub(crate) fn config_text(subject: &str, field: &str, message: &str) -> String {
    if field.is_empty() || field == "." {
        format!("invalid {subject} config: {message}")
    } else {
        format!("invalid {subject} config: `{field}`: {message}")
    }
}

/// The `logging.getLogger("tripline")` logger.
pub(crate) fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOGGER
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("logging")?
                    .call_method1("getLogger", ("tripline",))?
                    .unbind(),
            )
        })
        .map(|l| l.bind(py))
}

/// Logs `err` (raised by user code tripline called: an event callback, a
/// classifier) with its traceback, and swallows it: user code that fails
/// must never break the call it observes.
pub(crate) fn log_raised(py: Python<'_>, what: &str, err: PyErr) {
    let logged = logger(py).and_then(|log| {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("exc_info", err.value(py))?;
        log.call_method("error", ("%s raised; ignored", what), Some(&kwargs))
    });
    if let Err(e) = logged {
        // Logging itself failed (interpreter shutting down): report it the
        // way CPython reports errors nobody can catch.
        e.write_unraisable(py, None);
    }
}

/// Logs a warning line on the `tripline` logger.
pub(crate) fn log_warning(py: Python<'_>, text: &str) {
    if let Err(e) = logger(py).and_then(|log| log.call_method1("warning", ("%s", text))) {
        e.write_unraisable(py, None);
    }
}

static ERRORS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `tripline._errors.<class>(*args)`, raised lazily.
pub(crate) fn named_error_with<A>(py: Python<'_>, class: &str, args: A) -> PyErr
where
    A: for<'py> pyo3::IntoPyObject<'py> + Send + Sync + 'static,
    for<'py> <A as pyo3::IntoPyObject<'py>>::Target: pyo3::PyTypeCheck,
{
    let class = ERRORS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("tripline._errors")?.into_any().unbind())
        })
        .and_then(|m| {
            m.bind(py)
                .getattr(class)?
                .cast_into::<PyType>()
                .map_err(PyErr::from)
        });
    match class {
        Ok(c) => PyErr::from_type(c, args),
        Err(e) => e,
    }
}

/// `tripline._errors.<class>(message)`.
pub(crate) fn named_error(py: Python<'_>, class: &str, message: String) -> PyErr {
    named_error_with(py, class, (message,))
}
