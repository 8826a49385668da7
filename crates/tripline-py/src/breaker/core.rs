//! The shared core of a Python breaker: the Rust breaker, the
//! classification rules, and the trip reasons its rejections carry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use tripline::{Clock, EventKind, Subscription};

use crate::classify::Classify;
use crate::errors::circuit_open;

/// Why each currently open breaker tripped, by breaker name: the text a
/// `CircuitOpenError` carries. Filled from the breakers' own transition
/// events (built only on a transition), read only on a rejection — with
/// a fast hash, as the lookup is on the rejected path.
#[derive(Default)]
pub(crate) struct Reasons(Mutex<HashMap<String, Py<PyString>, foldhash::fast::FixedState>>);

impl Reasons {
    /// Records `event`'s reason if it opened a breaker, forgets it if it
    /// closed one.
    pub(crate) fn observe(&self, event: &tripline::Event) {
        let EventKind::Transition(t) = &event.kind else {
            return;
        };
        // The Python string is made before the lock is taken: a thread
        // must never wait for the interpreter while holding it.
        let opened =
            matches!(t.to, tripline::State::Open | tripline::State::ForcedOpen).then(|| {
                let text = crate::event::explanation(event);
                Python::attach(|py| PyString::new(py, &text).unbind())
            });
        let Ok(mut map) = self.0.lock() else {
            return;
        };
        match opened {
            Some(text) => {
                map.insert(event.breaker.to_string(), text);
            }
            None if t.to.admits_freely() => {
                map.remove(&*event.breaker);
            }
            None => {}
        }
    }

    fn get<'py>(&self, py: Python<'py>, name: &str) -> Option<Bound<'py, PyString>> {
        let map = self.0.lock().ok()?;
        map.get(name).map(|s| s.bind(py).clone())
    }
}

/// Everything a guarded call needs: the Rust breaker and the Python rules
/// around it. Shared (behind a `frozen` Python object) by the breaker, its
/// decorated functions and its permits.
pub(crate) struct Core {
    pub(crate) breaker: Arc<tripline::CircuitBreaker>,
    pub(crate) classify: Arc<Classify>,
    pub(crate) reasons: Arc<Reasons>,
    /// The breaker's name as a Python string, made at the first rejection.
    pub(crate) py_name: PyOnceLock<Py<PyString>>,
    /// The permits of `with breaker:` blocks, per thread and per task.
    pub(crate) permits: PyOnceLock<Py<PyAny>>,
    pub(crate) subscriptions: Mutex<Vec<Subscription>>,
}

impl Core {
    /// The error for a call the breaker refused.
    #[cold]
    pub(crate) fn reject(&self, py: Python<'_>, rejected: tripline::Rejected) -> PyErr {
        let name = self
            .py_name
            .get_or_init(py, || PyString::intern(py, self.breaker.name()).unbind())
            .bind(py);
        let reason = self.reasons.get(py, self.breaker.name());
        circuit_open(py, name, rejected, reason)
    }

    /// The closed path of every synchronous form: acquire, call, classify,
    /// record. No allocation of its own, no lock.
    #[inline]
    pub(crate) fn call(
        &self,
        py: Python<'_>,
        f: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let permit = match self.breaker.try_acquire() {
            Ok(p) => p,
            Err(r) => return Err(self.reject(py, r)),
        };
        let clock = self.breaker.clock();
        let start = clock.now();
        let result = f.call(args, kwargs);
        let elapsed = clock.now() - start;
        match result {
            Ok(value) => {
                permit.record(self.classify.returned(py, &value), elapsed);
                Ok(value.unbind())
            }
            Err(err) => {
                match self.classify.raised(py, &err) {
                    Some(outcome) => permit.record(outcome, elapsed),
                    None => drop(permit),
                }
                Err(err)
            }
        }
    }

    /// The context variable holding the stack of `with` permits.
    pub(crate) fn permit_stack<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyAny>> {
        self.permits
            .get_or_try_init(py, || {
                let var = py
                    .import("contextvars")?
                    .getattr("ContextVar")?
                    .call1((format!("tripline.{}.permits", self.breaker.name()),))?;
                Ok::<_, PyErr>(var.unbind())
            })
            .map(|v| v.bind(py))
    }
}
