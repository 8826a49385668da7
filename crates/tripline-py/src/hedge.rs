//! `tripline.Hedge`: the library's hedging policy around a coroutine, on
//! the asyncio loop.
//!
//! When an answer is late, ask again and take whichever answer comes
//! first: the Rust library's `Hedge::call` races the attempts, each a
//! call of the user's coroutine function stepped by the awaiting task, and
//! the losers are cancelled and closed. Hedges draw on a retry budget, so
//! under an outage hedging stops by itself. Only for `async def`: a sync
//! call cannot run twice at once on one thread.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use serde_json::Value;
use tripline::budget::RetryBudgetConfig;
use tripline::clock::SharedClock;
use tripline::hedge::HedgeConfig;

use crate::aio::{AsyncCall, AsyncioTimer, call_leaf};
use crate::breaker::ManualClock;
use crate::config::{from_json_as, kwargs_json};
use crate::convert::serde_to_py;
use crate::pipeline::{policy, policy_error, retry_budget};
use crate::tracked::{TrackedHedge, track_hedge};

/// A hedging policy: `await hedge.acall(fetch, url)` or `@hedge` on an
/// `async def`. The first attempt starts at once; while no answer has
/// come, another starts after `delay` (or at once when one fails), up to
/// `max_hedges` more; the first success wins and the others are
/// cancelled. When every attempt fails, the last one's exception is
/// raised.
///
/// `delay` is a duration (a fixed delay) or
/// `{"quantile": 0.95, "min_samples": 100, "initial": "100ms"}` (a moving
/// quantile of recent latencies, `initial` until enough are seen).
/// `budget={"ratio": 0.1}` makes hedges spend from a retry budget.
#[pyclass(frozen, module = "tripline")]
pub struct Hedge {
    tracked: Arc<TrackedHedge>,
}

#[pymethods]
impl Hedge {
    #[new]
    #[pyo3(signature = (*, name="hedge", budget=None, clock=None, **config))]
    fn new(
        name: &str,
        budget: Option<&Bound<'_, PyAny>>,
        clock: Option<PyRef<'_, ManualClock>>,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut fields = kwargs_json(config)?;
        // The delay's kind from its shape: a duration is fixed, a dict
        // with a quantile is a moving quantile.
        match fields.get_mut("delay") {
            Some(delay @ Value::String(_)) => {
                *delay = serde_json::json!({ "kind": "fixed", "delay": delay.take() });
            }
            Some(Value::Object(d)) if !d.contains_key("kind") && d.contains_key("quantile") => {
                d.insert("kind".into(), "quantile".into());
            }
            _ => {}
        }
        let config: HedgeConfig = from_json_as("hedge", Value::Object(fields))?;
        let manual = clock.as_ref().map(|c| c.clock.clone());
        let clock: SharedClock = match &manual {
            Some(c) => c.clone().into(),
            None => SharedClock::monotonic(),
        };
        let budget = policy::<RetryBudgetConfig>(budget, "budget")?
            .map(|config| retry_budget(config, manual.as_ref()))
            .transpose()?;
        let mut builder = tripline::hedge::Hedge::builder()
            .config(config)
            .timer(Arc::new(AsyncioTimer::new(Some(&clock))))
            .clock(clock);
        if let Some(b) = &budget {
            builder = builder.budget(b.clone());
        }
        let tracked = Arc::new(TrackedHedge {
            name: name.to_owned(),
            hedge: builder.build().map_err(policy_error)?,
            budget,
        });
        track_hedge(&tracked);
        Ok(Hedge { tracked })
    }

    /// The name it is exported under.
    #[getter]
    fn name(&self) -> &str {
        &self.tracked.name
    }

    /// The delay the next call would hedge after, in seconds.
    #[getter]
    fn current_delay(&self) -> f64 {
        self.tracked.hedge.current_delay().as_secs_f64()
    }

    /// `{"calls", "hedges", "hedge_wins", "refused_budget"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.tracked.hedge.stats())
    }

    /// Awaits `func(*args, **kwargs)`, hedged: called again while no
    /// answer has come.
    #[pyo3(signature = (func, /, *args, **kwargs))]
    fn acall(&self, func: Py<PyAny>, args: Py<PyTuple>, kwargs: Option<Py<PyDict>>) -> AsyncCall {
        let hedge = self.tracked.hedge.clone();
        AsyncCall::new(Box::pin(async move {
            hedge
                .call(|_| Python::attach(|py| call_leaf(py, &func, &args, kwargs.as_ref())))
                .await
        }))
    }

    /// Decorates an `async def`.
    fn __call__(slf: &Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !crate::guard::is_coroutine_function(&func)? {
            return Err(PyTypeError::new_err(
                "`tripline.Hedge` guards an async def: a sync call cannot run twice at once",
            ));
        }
        crate::pipeline::wraps(slf.getattr("acall")?, func)
    }

    fn __repr__(&self) -> String {
        let s = self.tracked.hedge.stats();
        format!(
            "<tripline.Hedge {:?} calls={} hedges={} hedge_wins={}>",
            self.tracked.name, s.calls, s.hedges, s.hedge_wins
        )
    }
}
