//! `tripline.Cluster`: one dependency, many endpoints — a breaker per
//! endpoint, balancing, outlier ejection, and the library's cluster
//! strategies (failover, failfast, failsafe, broadcast, forking, failback)
//! over a Python function that calls one endpoint, sync (`call`) and on
//! asyncio (`acall`).

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};
use tripline::clock::SharedClock;
use tripline::cluster::ClusterConfig;

use crate::breaker::ManualClock;
use crate::classify::{Classify, exception_types};
use crate::config::{from_json, kwargs_json};

mod build;
pub(crate) mod call;
mod call_async;
mod failback;
mod forking_sync;
pub(crate) mod strategy;

pub(crate) use strategy::Strategy;

/// A dependency served by several endpoints:
/// `Cluster(["10.0.0.1:80", "10.0.0.2:80"], call=fetch, strategy="failover")`.
///
/// `call(address, *args, **kwargs)` calls one endpoint; calling the cluster
/// (`cluster(*args, **kwargs)` or `cluster.call(...)`) picks endpoints by
/// the balancer, skipping those whose breaker is open or that outlier
/// detection ejected, and applies the strategy when one fails.
#[pyclass(frozen, module = "tripline")]
pub struct Cluster {
    pub(crate) cluster: tripline::cluster::Cluster,
    pub(crate) strategy: Strategy,
    pub(crate) call: Py<PyAny>,
    pub(crate) classify: Arc<Classify>,
    pub(crate) connect: Py<PyAny>,
    pub(crate) default: Option<Py<PyAny>>,
    /// The worker threads of sync forking calls, made at the first.
    pub(crate) workers: pyo3::sync::PyOnceLock<Py<PyAny>>,
    /// What the exporter reads; dropped with the cluster.
    _tracked: Arc<crate::tracked::TrackedCluster>,
}

fn policy_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymethods]
impl Cluster {
    #[new]
    #[pyo3(signature = (endpoints, *, call, strategy="failover", name="cluster", balancer=None, breaker=None, outlier=None, retries=2, idempotent=true, budget=None, fail_percent=None, forks=2, failback=None, default=None, failure_exceptions=None, ignore_exceptions=None, connect_exceptions=None, classify=None, clock=None, seed=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, keyword-only
    fn new(
        py: Python<'_>,
        endpoints: &Bound<'_, PyAny>,
        call: Bound<'_, PyAny>,
        strategy: &str,
        name: &str,
        balancer: Option<&str>,
        breaker: Option<&Bound<'_, PyDict>>,
        outlier: Option<&Bound<'_, PyDict>>,
        retries: u32,
        idempotent: bool,
        budget: Option<&Bound<'_, PyDict>>,
        fail_percent: Option<u32>,
        forks: u32,
        failback: Option<&Bound<'_, PyDict>>,
        default: Option<Bound<'_, PyAny>>,
        failure_exceptions: Option<Bound<'_, PyAny>>,
        ignore_exceptions: Option<Bound<'_, PyAny>>,
        connect_exceptions: Option<Bound<'_, PyAny>>,
        classify: Option<Bound<'_, PyAny>>,
        clock: Option<PyRef<'_, ManualClock>>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        if !call.is_callable() {
            return Err(PyTypeError::new_err(
                "`call` must be a callable taking (address, *args, **kwargs)",
            ));
        }
        let mut fields = Map::new();
        fields.insert("name".into(), Value::String(name.to_owned()));
        fields.insert("endpoints".into(), build::endpoints_json(endpoints)?);
        if let Some(b) = balancer {
            fields.insert("balancer".into(), Value::String(b.to_owned()));
        }
        let mut breaker_fields = kwargs_json(breaker)?;
        breaker_fields
            .entry("name")
            .or_insert_with(|| Value::String(name.to_owned()));
        fields.insert("breaker".into(), Value::Object(breaker_fields));
        if let Some(o) = outlier {
            fields.insert("outlier".into(), Value::Object(kwargs_json(Some(o))?));
        }
        let config: ClusterConfig = from_json(Value::Object(fields))?;
        let mut builder = tripline::cluster::Cluster::builder().config(config);
        let manual = clock.as_ref().map(|c| c.clock.clone());
        if let Some(c) = &manual {
            builder = builder.clock(c.clone());
        }
        if let Some(s) = seed {
            builder = builder.seed(s);
        }
        let cluster = builder.build().map_err(policy_error)?;
        let clock: SharedClock = match &manual {
            Some(m) => m.clone().into(),
            None => SharedClock::monotonic(),
        };
        let strategy = strategy::build(
            &cluster,
            strategy,
            strategy::Args {
                retries,
                idempotent,
                budget,
                fail_percent,
                forks,
                failback,
                manual,
                clock,
                call: &call,
                seed,
            },
        )?;
        let tracked = build::tracked(&cluster, &strategy);
        let connect = match connect_exceptions {
            Some(c) => exception_types(c, "connect_exceptions")?,
            None => py
                .get_type::<pyo3::exceptions::PyConnectionRefusedError>()
                .into_any()
                .unbind(),
        };
        Ok(Cluster {
            cluster,
            strategy,
            call: call.unbind(),
            classify: Arc::new(Classify::new(
                failure_exceptions,
                ignore_exceptions,
                classify,
            )?),
            connect,
            default: default.filter(|d| !d.is_none()).map(Bound::unbind),
            workers: pyo3::sync::PyOnceLock::new(),
            _tracked: tracked,
        })
    }

    /// Every endpoint: id, address, weight, its breaker's state, whether it
    /// is ejected or routable.
    #[getter]
    fn endpoints<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.cluster
            .endpoints()
            .iter()
            .map(|e| {
                let d = PyDict::new(py);
                d.set_item("id", e.id().as_str())?;
                d.set_item("address", e.address())?;
                d.set_item("weight", e.weight())?;
                d.set_item("state", e.breaker().state().as_str())?;
                d.set_item("ejected", e.is_ejected())?;
                d.set_item("routable", e.is_routable())?;
                Ok(d)
            })
            .collect()
    }

    /// The cluster's name.
    #[getter]
    fn name(&self) -> &str {
        self.cluster.name()
    }

    /// Marks an endpoint unhealthy (skipped) or healthy again; returns
    /// whether it exists.
    #[pyo3(signature = (id, unhealthy=true))]
    fn mark_unhealthy(&self, id: &str, unhealthy: bool) -> bool {
        self.cluster.mark_unhealthy(id, unhealthy)
    }

    /// Calls the dependency through the strategy. Failover, failfast and
    /// forking return the answer or raise; failsafe returns a
    /// `tripline.Served`; broadcast returns `{endpoint_id: answer}`
    /// (raising `tripline.BroadcastError` when too many endpoints failed);
    /// failback takes one `bytes` payload and returns `"delivered"` or
    /// `"queued"` (raising `tripline.FailbackFullError` when the queue is
    /// at its bound). Sync forking runs its forks on worker threads.
    #[pyo3(signature = (*args, **kwargs))]
    fn call(
        &self,
        py: Python<'_>,
        args: &Bound<'_, pyo3::types::PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.call_strategy(py, args, kwargs)
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, pyo3::types::PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.call_strategy(py, args, kwargs)
    }

    /// Awaits the call through the strategy on asyncio: `call` may be an
    /// `async def` (or a `def`); answers as `call` does. Forking races its
    /// forks on this task and closes the losers; a cancelled task releases
    /// every endpoint's permit unrecorded.
    #[pyo3(signature = (*args, **kwargs))]
    fn acall(
        &self,
        py: Python<'_>,
        args: Py<pyo3::types::PyTuple>,
        kwargs: Option<Py<PyDict>>,
    ) -> PyResult<crate::aio::AsyncCall> {
        self.start(py, args, kwargs)
    }

    /// The strategy's name.
    #[getter]
    fn strategy(&self) -> &'static str {
        self.strategy_name()
    }

    /// Runs outlier detection now (normally run by traffic on its interval).
    fn analyze(&self) {
        self.cluster.analyze();
    }

    /// Failback: delivers every entry due now, one attempt each; returns
    /// `{"delivered", "retried", "gave_up", "pending"}`.
    fn run_due<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        failback::run_due(py, self.failback()?)
    }

    /// Failback: entries waiting for delivery.
    #[getter]
    fn pending(&self) -> PyResult<usize> {
        Ok(self.failback()?.pending())
    }

    /// Failback: the payloads given up (dead letters), oldest first.
    fn dead_letters<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Vec<Bound<'py, pyo3::types::PyBytes>>> {
        failback::dead_letters(py, self.failback()?)
    }

    /// The strategy's counts (failover: attempts, failovers, refusals;
    /// failback: submissions and deliveries; forking and the others: the
    /// cluster's endpoints) and, with one, the retry budget's.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        failback::stats(py, self)
    }

    /// Failback on asyncio: delivers due entries until cancelled, waking
    /// when the next is due (at most every `poll_interval`). Deliveries run
    /// on the loop's thread: keep `call` short.
    fn run_failback(&self) -> PyResult<crate::aio::AsyncCall> {
        let f = self.failback()?.clone();
        let timer = std::sync::Arc::new(crate::aio::AsyncioTimer::new(None));
        Ok(crate::aio::AsyncCall::new(Box::pin(async move {
            f.run(timer).await;
            Python::attach(|py| Ok(py.None()))
        })))
    }
}

impl Cluster {
    /// The strategy's name.
    pub(crate) fn strategy_name(&self) -> &'static str {
        match &self.strategy {
            Strategy::Failover(_) => "failover",
            Strategy::Failfast(_) => "failfast",
            Strategy::Failsafe(..) => "failsafe",
            Strategy::Broadcast(_) => "broadcast",
            Strategy::Forking(..) => "forking",
            Strategy::Failback(_) => "failback",
        }
    }
}
