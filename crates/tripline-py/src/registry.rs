//! `tripline.BreakerRegistry`: keyed breakers (per tenant, per key),
//! bounded in number, over the library's lock-free registry.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use serde_json::Value;
use tripline::registry::RegistrySubscription;
use tripline::{RegistryConfig, RegistryError};

use crate::breaker::{CircuitBreaker, ManualClock, Reasons};
use crate::classify::Classify;
use crate::config::{from_json, kwargs_json, validate};

static FULL: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A family of breakers, one per key, created on first use from one
/// config: `BreakerRegistry("tenants", max_breakers=10_000, **config)`.
///
/// `overflow` says what a new key gets once `max_breakers` are live:
/// `"shared_overflow"` (one shared breaker for all of them) or `"reject"`
/// (`tripline.RegistryFullError`). `idle_ttl` bounds how long an idle,
/// closed breaker is kept (see `evict_idle`).
#[pyclass(frozen, module = "tripline")]
pub struct BreakerRegistry {
    registry: Arc<tripline::BreakerRegistry<String>>,
    classify: Arc<Classify>,
    reasons: Arc<Reasons>,
    _reasons_feed: RegistrySubscription,
}

#[pymethods]
impl BreakerRegistry {
    #[new]
    #[pyo3(signature = (family, *, max_breakers=10_000, overflow="shared_overflow", idle_ttl=None, clock=None, failure_exceptions=None, ignore_exceptions=None, classify=None, **config))]
    #[allow(clippy::too_many_arguments)] // the Python signature, keyword-only
    fn new(
        family: &str,
        max_breakers: usize,
        overflow: &str,
        idle_ttl: Option<&Bound<'_, PyAny>>,
        clock: Option<PyRef<'_, ManualClock>>,
        failure_exceptions: Option<Bound<'_, PyAny>>,
        ignore_exceptions: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let rules = Classify::new(failure_exceptions, ignore_exceptions, classify)?;
        let mut breaker = kwargs_json(config)?;
        breaker.insert("name".into(), Value::String(family.to_owned()));
        let mut fields = serde_json::Map::new();
        fields.insert("max_breakers".into(), Value::from(max_breakers));
        fields.insert("overflow".into(), Value::String(overflow.to_owned()));
        let ttl = match idle_ttl.filter(|t| !t.is_none()) {
            Some(t) => Value::String(crate::convert::duration_text(t, "idle_ttl")?),
            None => Value::Null,
        };
        fields.insert("idle_ttl".into(), ttl);
        fields.insert("breaker".into(), Value::Object(breaker));
        let config: RegistryConfig = from_json(Value::Object(fields))?;
        validate(&config.breaker)?;
        let mut builder = tripline::BreakerRegistry::<String>::builder(config);
        if let Some(c) = clock {
            builder = builder.clock(c.clock.clone());
        }
        let registry = builder
            .build()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let registry = Arc::new(registry);
        crate::tracked::track_registry(&registry);
        let reasons = Arc::new(Reasons::default());
        let feed = reasons.clone();
        let subscription = registry.subscribe(move |_, event| feed.observe(event));
        Ok(BreakerRegistry {
            registry,
            classify: Arc::new(rules),
            reasons,
            _reasons_feed: subscription,
        })
    }

    /// The breaker of `key`, created on first use. Raises
    /// `RegistryFullError` when full under `overflow="reject"`.
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<CircuitBreaker> {
        let key = key_of(key)?;
        match self.registry.get(&key) {
            Ok(b) => Ok(self.wrap(b)),
            Err(e @ RegistryError::Full { .. }) => {
                let class = FULL.get_or_try_init(py, || {
                    Ok::<_, PyErr>(
                        py.import("tripline._errors")?
                            .getattr("RegistryFullError")?
                            .cast_into::<PyType>()?
                            .unbind(),
                    )
                })?;
                Err(PyErr::from_type(class.bind(py).clone(), (e.to_string(),)))
            }
            Err(e) => Err(PyValueError::new_err(e.to_string())),
        }
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<CircuitBreaker> {
        self.get(py, key)
    }

    /// Whether the registry holds a breaker for `key` (never creates one).
    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.registry.peek(&key_of(key)?).is_some())
    }

    /// Live breakers (the shared overflow breaker excluded).
    fn __len__(&self) -> usize {
        self.registry.len()
    }

    /// Drops the breaker of `key`; returns whether there was one.
    fn remove(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.registry.remove(&key_of(key)?).is_some())
    }

    /// Drops the closed breakers idle for `idle_ttl`; returns how many.
    /// Call it from a timer: eviction adds nothing to the call path.
    fn evict_idle(&self) -> usize {
        self.registry.evict_idle()
    }

    /// The keys held now.
    fn keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        self.registry.for_each_breaker(|k, _| keys.push(k.clone()));
        keys
    }

    /// `{key: Metrics}` for every breaker held.
    fn metrics(&self) -> std::collections::HashMap<String, crate::metrics::Metrics> {
        self.registry
            .metrics()
            .into_iter()
            .map(|(k, m)| (k, crate::metrics::Metrics::from(m)))
            .collect()
    }

    /// Holds every breaker of the family in `state` (`"forced_open"`,
    /// `"disabled"` or `"metrics_only"`), those of keys first seen while it
    /// lasts included: an operator's action on the whole dependency, every
    /// tenant at once. `None` lifts it: the breakers still in the held
    /// state go back to automatic operation.
    #[pyo3(signature = (state))]
    fn hold_family(&self, state: Option<&str>) -> PyResult<()> {
        use tripline::State;
        let state = match state {
            None => None,
            Some("forced_open") => Some(State::ForcedOpen),
            Some("disabled") => Some(State::Disabled),
            Some("metrics_only") => Some(State::MetricsOnly),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "`state`: must be \"forced_open\", \"disabled\", \"metrics_only\" or None, not {other:?}"
                )));
            }
        };
        self.registry
            .hold_family(state)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The state the family is held in (`"forced_open"`, ...), or `None`.
    #[getter]
    fn family_hold(&self) -> Option<&'static str> {
        self.registry.family_hold().map(tripline::State::as_str)
    }

    /// The family's name.
    #[getter]
    fn family(&self) -> &str {
        self.registry.family()
    }

    fn __repr__(&self) -> String {
        format!(
            "<tripline.BreakerRegistry {:?} breakers={}>",
            self.registry.family(),
            self.registry.len()
        )
    }
}

impl BreakerRegistry {
    fn wrap(&self, breaker: tripline::CircuitBreaker) -> CircuitBreaker {
        CircuitBreaker::wrap(breaker, self.classify.clone(), self.reasons.clone(), false)
    }
}

fn key_of(key: &Bound<'_, PyAny>) -> PyResult<String> {
    key.extract::<String>()
        .map_err(|_| PyTypeError::new_err("a registry key must be a str"))
}
