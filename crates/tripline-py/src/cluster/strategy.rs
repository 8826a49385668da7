//! The strategy a `tripline.Cluster` calls with, built from its keyword
//! arguments: each one the Rust cluster module's own type.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::clock::{ManualClock, SharedClock};
use tripline::cluster::{
    Broadcast, BroadcastConfig, Cluster, Failback, FailbackConfig, Failfast, Failover,
    FailoverConfig, Failsafe, Forking, ForkingConfig,
};

use crate::config::section;
use crate::pipeline::{policy_error, retry_budget};

/// The strategy a cluster calls with.
pub(crate) enum Strategy {
    Failover(Failover),
    Failfast(Failfast),
    /// Failsafe, and the failfast its async calls run through (the Rust
    /// failsafe's async call serves only `T::default()`).
    Failsafe(Failsafe, Failfast),
    Broadcast(Broadcast),
    /// Forking, and its retry budget (for stats).
    Forking(Forking, Option<RetryBudget>),
    /// Deliveries fail back to a durable, bounded on-disk queue.
    Failback(Failback<PyErr>),
}

/// The strategy's keyword arguments.
pub(crate) struct Args<'a, 'py> {
    pub(crate) retries: u32,
    pub(crate) idempotent: bool,
    pub(crate) budget: Option<&'a Bound<'py, PyDict>>,
    pub(crate) fail_percent: Option<u32>,
    pub(crate) forks: u32,
    pub(crate) failback: Option<&'a Bound<'py, PyDict>>,
    pub(crate) manual: Option<ManualClock>,
    pub(crate) clock: SharedClock,
    pub(crate) call: &'a Bound<'py, PyAny>,
    pub(crate) seed: Option<u64>,
}

const STRATEGIES: &str =
    "\"failover\", \"failfast\", \"failsafe\", \"broadcast\", \"forking\" or \"failback\"";

impl Args<'_, '_> {
    fn budget(&self) -> PyResult<Option<RetryBudget>> {
        let Some(b) = self.budget else {
            return Ok(None);
        };
        let config: RetryBudgetConfig = section(b, "budget")?;
        retry_budget(config, self.manual.as_ref()).map(Some)
    }
}

/// The strategy named `name` over `cluster`.
pub(crate) fn build(cluster: &Cluster, name: &str, a: Args<'_, '_>) -> PyResult<Strategy> {
    let only = |what: &str, strategies: &str, set: bool| -> PyResult<()> {
        if set {
            return Err(PyValueError::new_err(format!(
                "`{what}` applies to the {strategies} strategy only, not {name:?}"
            )));
        }
        Ok(())
    };
    only(
        "failback",
        "failback",
        a.failback.is_some() && name != "failback",
    )?;
    only(
        "budget",
        "failover and forking",
        a.budget.is_some() && !matches!(name, "failover" | "forking"),
    )?;
    Ok(match name {
        "failover" => {
            let config = FailoverConfig {
                retries: a.retries,
                idempotent: a.idempotent,
                ..Default::default()
            };
            let mut b = Failover::builder(cluster.clone())
                .config(config)
                .timer(Arc::new(crate::aio::AsyncioTimer::new(Some(&a.clock))));
            if let Some(budget) = a.budget()? {
                b = b.budget(budget);
            }
            if let Some(s) = a.seed {
                b = b.seed(s);
            }
            Strategy::Failover(b.build().map_err(policy_error)?)
        }
        "failfast" => Strategy::Failfast(Failfast::new(cluster.clone())),
        "failsafe" => Strategy::Failsafe(
            Failsafe::new(cluster.clone()),
            Failfast::new(cluster.clone()),
        ),
        "broadcast" => Strategy::Broadcast(
            Broadcast::try_new(
                cluster.clone(),
                BroadcastConfig {
                    fail_percent: a.fail_percent,
                },
            )
            .map_err(policy_error)?,
        ),
        "forking" => {
            let mut f = Forking::try_new(cluster.clone(), ForkingConfig { forks: a.forks })
                .map_err(policy_error)?;
            let budget = a.budget()?;
            if let Some(b) = &budget {
                f = f.with_budget(b.clone());
            }
            Strategy::Forking(f, budget)
        }
        "failback" => Strategy::Failback(failback(cluster, &a)?),
        other => {
            return Err(PyValueError::new_err(format!(
                "`strategy` must be {STRATEGIES}, not {other:?}"
            )));
        }
    })
}

/// A failback queue delivering through `call(address, payload)`.
fn failback(cluster: &Cluster, a: &Args<'_, '_>) -> PyResult<Failback<PyErr>> {
    let Some(section_dict) = a.failback else {
        return Err(PyValueError::new_err(
            "invalid failback config: `failback` must be a dict with at least `dir` (the queue's directory)",
        ));
    };
    if crate::guard::is_coroutine_function(a.call)? {
        return Err(PyTypeError::new_err(
            "`call` must be a def for the failback strategy: deliveries are retried from a scheduler \
             (run_due, run_failback) and must finish there",
        ));
    }
    let config: FailbackConfig = section(section_dict, "failback")?;
    let call = a.call.clone().unbind();
    let mut b = Failback::builder(cluster.clone(), config).deliver(
        move |e: &tripline::cluster::Endpoint, payload: &[u8]| -> Result<(), PyErr> {
            Python::attach(|py| {
                call.bind(py)
                    .call1((e.address(), PyBytes::new(py, payload)))
                    .map(drop)
            })
        },
    );
    if let Some(m) = &a.manual {
        b = b.clock(m.clone());
    }
    if let Some(s) = a.seed {
        b = b.seed(s);
    }
    b.open().map_err(|e| match e {
        tripline::cluster::FailbackError::Io { .. } => {
            pyo3::exceptions::PyOSError::new_err(e.to_string())
        }
        other => policy_error(other),
    })
}
