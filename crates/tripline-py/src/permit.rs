//! `tripline.Permit`: explicit admission, for calls no wrapper fits.

use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use tripline::{Clock, OwnedPermit, Timestamp};

use crate::breaker::{CircuitBreaker, outcome_of};
use crate::classify::outcome_named;

/// Permission for one call (`breaker.try_acquire()`). Record the outcome
/// once with `record(...)`; `release()` — or garbage collection — gives it
/// back without a verdict, as a cancelled call does.
#[pyclass(frozen, module = "tripline")]
pub struct Permit {
    breaker: Py<CircuitBreaker>,
    slot: Mutex<Option<(OwnedPermit, Timestamp)>>,
    probe: bool,
}

impl Permit {
    /// Acquires a permit from `breaker`, or raises `CircuitOpenError`.
    pub(crate) fn acquire(breaker: &Bound<'_, CircuitBreaker>) -> PyResult<Self> {
        let core = &breaker.get().core;
        match core.breaker.try_acquire_owned() {
            Ok(p) => Ok(Permit {
                breaker: breaker.clone().unbind(),
                probe: p.is_probe(),
                slot: Mutex::new(Some((p, core.breaker.clock().now()))),
            }),
            Err(r) => Err(core.reject(breaker.py(), r)),
        }
    }

    fn take(&self) -> Option<(OwnedPermit, Timestamp)> {
        // A poisoned lock can only come from a panic mid-take; the permit
        // inside is still valid.
        match self.slot.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        }
    }

    /// Settles the permit for a `with` block that ended with `exc`.
    pub(crate) fn finish(&self, py: Python<'_>, exc: Option<Bound<'_, PyAny>>) {
        let Some((permit, start)) = self.take() else {
            return;
        };
        let core = &self.breaker.get().core;
        let elapsed = core.breaker.clock().now() - start;
        match exc.filter(|e| !e.is_none()) {
            None => permit.record(tripline::Outcome::Success, elapsed),
            Some(exc) => {
                if let Some(outcome) = core.classify.raised(py, &PyErr::from_value(exc)) {
                    permit.record(outcome, elapsed);
                }
            }
        }
    }
}

#[pymethods]
impl Permit {
    /// Records the call's outcome: `success=True/False`, or
    /// `outcome="success" | "failure" | "ignored"`; `duration` (timedelta
    /// or seconds) defaults to the time since the permit was acquired.
    /// A second record is ignored.
    #[pyo3(signature = (success=None, *, outcome=None, duration=None))]
    fn record(
        &self,
        success: Option<bool>,
        outcome: Option<&str>,
        duration: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let outcome = match (success, outcome) {
            (Some(s), None) => outcome_of(s),
            (None, Some(o)) => outcome_named(o)?,
            _ => {
                return Err(PyTypeError::new_err(
                    "record() takes exactly one of `success` (bool) and `outcome` (\"success\", \"failure\", \"ignored\")",
                ));
            }
        };
        let elapsed = duration
            .map(|d| crate::convert::duration(d, "duration"))
            .transpose()?;
        let Some((permit, start)) = self.take() else {
            return Ok(());
        };
        let elapsed = match elapsed {
            Some(d) => d,
            None => self.breaker.get().core.breaker.clock().now() - start,
        };
        permit.record(outcome, elapsed);
        Ok(())
    }

    /// Gives the permit back without a verdict (a cancelled call).
    fn release(&self) {
        drop(self.take());
    }

    /// Whether the permit is a half-open probe.
    #[getter]
    fn is_probe(&self) -> bool {
        self.probe
    }

    /// Whether the permit was recorded or released.
    #[getter]
    fn settled(&self) -> PyResult<bool> {
        self.slot
            .lock()
            .map(|g| g.is_none())
            .map_err(|_| PyValueError::new_err("permit lock poisoned"))
    }
}
