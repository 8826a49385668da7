//! `tripline.AdaptiveThrottle`: client-side adaptive throttling (the SRE
//! book's formula) over the library's throttle, in-process.
//!
//! The native half: the throttle and its permits. `call`, `acall` and the
//! decorator are Python (`tripline/_throttle.py`): each call's answer is
//! classified by the exception types the caller names, and a Python
//! wrapper costs little beside a throttle that exists to shed load.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, OwnedThrottlePermit};

use crate::breaker::ManualClock;
use crate::config::{from_json_as, kwargs_json};
use crate::errors::config_text;

/// The throttle: `try_acquire()` admits a request or raises
/// `tripline.ThrottledError`; the permit reports the backend's answer.
#[pyclass(frozen, module = "tripline", name = "_AdaptiveThrottle")]
pub struct NativeThrottle {
    /// Shared with the exporter's weak list of live throttles.
    throttle: Arc<AdaptiveThrottle>,
}

/// Permission to send one request: report the backend's answer with
/// `accepted()` or `rejected_by_backend()`, once. Dropped unreported, it
/// says nothing (a cancelled call is no evidence of overload).
#[pyclass(frozen, module = "tripline")]
pub struct ThrottlePermit {
    permit: Mutex<Option<OwnedThrottlePermit>>,
}

#[pymethods]
impl NativeThrottle {
    #[new]
    #[pyo3(signature = (name, *, clock=None, seed=None, **config))]
    fn new(
        name: &str,
        clock: Option<PyRef<'_, ManualClock>>,
        seed: Option<u64>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut fields = kwargs_json(config)?;
        fields.insert("name".into(), Value::String(name.to_owned()));
        let config: AdaptiveThrottleConfig = from_json_as("throttle", Value::Object(fields))?;
        let mut builder = AdaptiveThrottle::builder().config(config);
        if let Some(c) = clock {
            builder = builder.clock(c.clock.clone());
        }
        if let Some(seed) = seed {
            builder = builder.seed(seed);
        }
        let throttle = builder
            .build()
            .map_err(|e| PyValueError::new_err(config_text("throttle", &e.field, &e.constraint)))?;
        let throttle = Arc::new(throttle);
        crate::tracked::track_throttle(&throttle);
        Ok(NativeThrottle { throttle })
    }

    /// The throttle's name.
    #[getter]
    fn name(&self) -> &str {
        self.throttle.name()
    }

    /// The probability with which the next request would be shed.
    #[getter]
    fn rejection_probability(&self) -> f64 {
        self.throttle.rejection_probability()
    }

    /// A permit for one request, or `tripline.ThrottledError` when the
    /// request is shed here (it never reaches the backend).
    fn try_acquire(&self, py: Python<'_>) -> PyResult<ThrottlePermit> {
        match self.throttle.try_acquire_owned() {
            Ok(permit) => Ok(ThrottlePermit {
                permit: Mutex::new(Some(permit)),
            }),
            Err(shed) => Err(crate::errors::named_error_with(
                py,
                "ThrottledError",
                (self.throttle.name().to_owned(), shed.rejection_probability),
            )),
        }
    }

    /// `{"name", "rejection_probability", "active", "window": {...},
    /// "totals": {...}}`, the counts as `requests`, `accepts`, `throttled`.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::convert::serde_to_py(py, &self.throttle.metrics())
    }

    fn __repr__(&self) -> String {
        format!("tripline.AdaptiveThrottle({:?})", self.throttle.name())
    }
}

impl ThrottlePermit {
    fn take(&self) -> PyResult<OwnedThrottlePermit> {
        self.permit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this permit's answer was already reported"))
    }
}

#[pymethods]
impl ThrottlePermit {
    /// The backend processed the request (whatever the business result).
    fn accepted(&self) -> PyResult<()> {
        self.take()?.accepted();
        Ok(())
    }

    /// The backend refused the request as overloaded (HTTP 429 or 503,
    /// gRPC `RESOURCE_EXHAUSTED`).
    fn rejected_by_backend(&self) -> PyResult<()> {
        self.take()?.rejected_by_backend();
        Ok(())
    }
}
