//! `tripline.CircuitBreaker`: the library's breaker as a Python object.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use tripline::Outcome;

use crate::classify::Classify;
use crate::config::{breaker_config, from_path, kwargs_json, merged};
use crate::convert::{duration, serde_to_py};
use crate::errors::log_raised;

mod clock;
mod core;

pub use clock::ManualClock;
pub(crate) use core::{Core, Reasons};

/// A circuit breaker: `CircuitBreaker(name, **config)`.
///
/// Wraps calls as a decorator (`@breaker`, on `def` and `async def`), a
/// context manager (`with breaker:` / `async with breaker:`),
/// `breaker.call(fn, *args)` or explicit permits (`try_acquire`). A
/// rejected call raises `tripline.CircuitOpenError`.
#[pyclass(frozen, module = "tripline", weakref)]
pub struct CircuitBreaker {
    pub(crate) core: Core,
}

impl CircuitBreaker {
    /// Wraps an existing Rust breaker with Python classification rules.
    pub(crate) fn wrap(
        breaker: tripline::CircuitBreaker,
        classify: Arc<Classify>,
        reasons: Arc<Reasons>,
        subscribe: bool,
    ) -> Self {
        let mut subscriptions = Vec::new();
        if subscribe {
            let r = reasons.clone();
            subscriptions.push(breaker.subscribe(move |e| r.observe(e)));
            subscriptions.push(crate::tracked::count_transitions(&breaker));
        }
        let breaker = Arc::new(breaker);
        if subscribe {
            crate::tracked::track_breaker(&breaker);
        }
        CircuitBreaker {
            core: Core {
                breaker,
                classify,
                reasons,
                py_name: PyOnceLock::new(),
                permits: PyOnceLock::new(),
                subscriptions: Mutex::new(subscriptions),
            },
        }
    }

    fn build(
        config: tripline::CircuitBreakerConfig,
        clock: Option<PyRef<'_, ManualClock>>,
        classify: Classify,
    ) -> PyResult<Self> {
        let mut builder = tripline::CircuitBreaker::builder().config(config);
        if let Some(c) = clock {
            builder = builder.clock(c.clock.clone());
        }
        let breaker = builder
            .build()
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        Ok(Self::wrap(
            breaker,
            Arc::new(classify),
            Arc::default(),
            true,
        ))
    }
}

#[pymethods]
impl CircuitBreaker {
    #[new]
    #[pyo3(signature = (name, *, clock=None, failure_exceptions=None, ignore_exceptions=None, classify=None, **config))]
    fn new(
        name: &str,
        clock: Option<PyRef<'_, ManualClock>>,
        failure_exceptions: Option<Bound<'_, PyAny>>,
        ignore_exceptions: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let rules = Classify::new(failure_exceptions, ignore_exceptions, classify)?;
        let config = breaker_config(name, kwargs_json(config)?)?;
        Self::build(config, clock, rules)
    }

    /// A breaker from a dict in the config-file vocabulary (`name` in the
    /// dict, or given).
    #[staticmethod]
    #[pyo3(signature = (data, *, name=None, clock=None, failure_exceptions=None, ignore_exceptions=None, classify=None))]
    fn from_dict(
        data: &Bound<'_, PyAny>,
        name: Option<&str>,
        clock: Option<PyRef<'_, ManualClock>>,
        failure_exceptions: Option<Bound<'_, PyAny>>,
        ignore_exceptions: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dict = data
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err("`data` must be a dict of breaker config fields"))?;
        let rules = Classify::new(failure_exceptions, ignore_exceptions, classify)?;
        let mut fields = kwargs_json(Some(dict))?;
        let name = match (name, fields.remove("name")) {
            (Some(n), _) => n.to_owned(),
            (None, Some(serde_json::Value::String(n))) => n,
            (None, Some(_)) => {
                return Err(PyTypeError::new_err(
                    "invalid breaker config: `name` must be a string",
                ));
            }
            (None, None) => "default".to_owned(),
        };
        Self::build(breaker_config(&name, fields)?, clock, rules)
    }

    /// A breaker from a TOML, YAML or JSON file (by extension), read by the
    /// library's own reader: errors name the file, line and field.
    #[staticmethod]
    #[pyo3(signature = (path, *, clock=None, failure_exceptions=None, ignore_exceptions=None, classify=None))]
    fn from_file(
        path: PathBuf,
        clock: Option<PyRef<'_, ManualClock>>,
        failure_exceptions: Option<Bound<'_, PyAny>>,
        ignore_exceptions: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let rules = Classify::new(failure_exceptions, ignore_exceptions, classify)?;
        Self::build(from_path(path)?, clock, rules)
    }

    /// The breaker's name.
    #[getter]
    fn name(&self) -> &str {
        self.core.breaker.name()
    }

    /// The state: `"closed"`, `"open"`, `"half_open"`, `"forced_open"`,
    /// `"disabled"` or `"metrics_only"`.
    #[getter]
    fn state(&self) -> &'static str {
        self.core.breaker.state().as_str()
    }

    /// The config in force, as a dict in the config-file vocabulary.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.core.breaker.config())
    }

    /// Counters and state, as a `tripline.Metrics`.
    fn metrics(&self) -> crate::metrics::Metrics {
        crate::metrics::Metrics::from(self.core.breaker.metrics())
    }

    /// The state as a dict, to keep across a restart.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.core.breaker.snapshot())
    }

    /// Rejects every call until `reset()` (an operator isolating the
    /// dependency).
    fn force_open(&self) {
        self.core.breaker.force_open();
    }

    /// Lets every call through and never trips, still recording.
    fn disable(&self) {
        self.core.breaker.disable();
    }

    /// Shadow mode: never rejects, reports when it would have tripped.
    fn metrics_only(&self) {
        self.core.breaker.metrics_only();
    }

    /// Back to closed with an empty window.
    fn reset(&self) {
        self.core.breaker.reset();
    }

    /// Opens for `duration` (timedelta, seconds or `"5s"`), then probes.
    fn open_for(&self, duration_: &Bound<'_, PyAny>) -> PyResult<()> {
        self.core.breaker.open_for(duration(duration_, "duration")?);
        Ok(())
    }

    /// Changes the given config fields, keeping the state and the window
    /// where the window's shape allows.
    #[pyo3(signature = (**config))]
    fn reconfigure(&self, config: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let new = merged(&self.core.breaker.config(), kwargs_json(config)?)?;
        self.core
            .breaker
            .reconfigure(new)
            .map(drop)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
    }

    /// Calls `callback(event)` with every event of this breaker (a
    /// `tripline.Event`; `str(event)` is the library's explanation).
    /// A callback that raises is logged on the `tripline` logger and never
    /// breaks the call that triggered it. Returns `callback`, so it works
    /// as a decorator.
    fn on_event<'py>(&self, callback: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if !callback.is_callable() {
            return Err(PyTypeError::new_err("`callback` must be callable"));
        }
        let cb = callback.clone().unbind();
        let subscription = self.core.breaker.subscribe(move |event| {
            Python::attach(|py| {
                let ev = crate::event::Event::from(event.clone());
                if let Err(e) = cb.bind(py).call1((ev,)) {
                    log_raised(py, "on_event callback", e);
                }
            });
        });
        self.core
            .subscriptions
            .lock()
            .map_err(|_| PyRuntimeError::new_err("breaker subscriptions poisoned"))?
            .push(subscription);
        Ok(callback)
    }

    /// Decorates `func` (a `def` or an `async def`): every call of the
    /// result goes through the breaker. Keeps `functools.wraps` metadata.
    fn __call__(slf: &Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        crate::guard::decorate(slf, func)
    }

    /// Calls `func(*args, **kwargs)` through the breaker; for an
    /// `async def`, returns the awaitable to await.
    #[pyo3(signature = (func, /, *args, **kwargs))]
    fn call(
        slf: &Bound<'_, Self>,
        func: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if crate::guard::is_coroutine_function(func)? {
            let breaker = slf.clone().unbind();
            let awaitable =
                crate::guard_async::GuardedAwaitable::call(py, &breaker, func, args, kwargs)?;
            return Ok(Py::new(py, awaitable)?.into_any());
        }
        slf.get().core.call(py, func, args, kwargs)
    }

    /// A permit for one call, or `CircuitOpenError`. Record its outcome
    /// with `permit.record(...)`; an unrecorded permit is released neutrally
    /// when garbage collected.
    fn try_acquire(slf: &Bound<'_, Self>) -> PyResult<crate::permit::Permit> {
        crate::permit::Permit::acquire(slf)
    }

    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<crate::permit::Permit>> {
        crate::context::enter(slf)
    }

    #[pyo3(signature = (_exc_type=None, exc=None, _tb=None))]
    fn __exit__(
        slf: &Bound<'_, Self>,
        _exc_type: Option<Bound<'_, PyAny>>,
        exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        crate::context::exit(slf, exc)?;
        Ok(false)
    }

    fn __aenter__(slf: &Bound<'_, Self>) -> PyResult<crate::context::Ready> {
        let permit = crate::context::enter(slf)?;
        Ok(crate::context::Ready::new(permit.into_any()))
    }

    #[pyo3(signature = (_exc_type=None, exc=None, _tb=None))]
    fn __aexit__(
        slf: &Bound<'_, Self>,
        _exc_type: Option<Bound<'_, PyAny>>,
        exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<crate::context::Ready> {
        let py = slf.py();
        crate::context::exit(slf, exc)?;
        Ok(crate::context::Ready::new(
            pyo3::types::PyBool::new(py, false)
                .to_owned()
                .into_any()
                .unbind(),
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "<tripline.CircuitBreaker {:?} state={}>",
            self.core.breaker.name(),
            self.core.breaker.state().as_str()
        )
    }
}

/// The outcome `record` applies for `success`.
pub(crate) fn outcome_of(success: bool) -> Outcome {
    if success {
        Outcome::Success
    } else {
        Outcome::Failure
    }
}
