//! `Cluster.acall`: the Rust strategies' async calls (failover, failfast,
//! broadcast, forking; failsafe over failfast) over the endpoint function's
//! coroutines, awaited from asyncio.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tripline::cluster::{ClusterAttempt, Endpoint};

use super::call::{
    PyResultAny, broadcast_answer, default_for, endpoint_args, endpoint_outcome, error, served,
};
use super::{Cluster, Strategy};
use crate::aio::{AsyncCall, AwaitLeaf, BoxFuture, call_leaf};

impl Cluster {
    /// `Cluster.acall` (see its docstring).
    pub(crate) fn start(
        &self,
        py: Python<'_>,
        args: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    ) -> PyResult<AsyncCall> {
        if let Strategy::Failback(f) = &self.strategy {
            // Deliveries are sync: the first one runs here, on the loop's
            // thread, as the queue's retries do (run_failback).
            let r =
                super::failback::submit(py, f, args.bind(py), kwargs.as_ref().map(|k| k.bind(py)));
            return Ok(AsyncCall::new(Box::pin(async move { r })));
        }
        let call = self.call.clone_ref(py);
        let classify = self.classify.clone();
        let connect = self.connect.clone_ref(py);
        let classifier = move |r: &PyResultAny| {
            Python::attach(|py| endpoint_outcome(py, &classify, &connect, r))
        };
        let op = move |e: Endpoint, _: ClusterAttempt| {
            Python::attach(|py| match endpoint_args(py, &e, args.bind(py)) {
                Ok(full) => call_leaf(py, &call, &full.unbind(), kwargs.as_ref()),
                Err(err) => AwaitLeaf::ready(Err(err)),
            })
        };
        let fut: BoxFuture = match &self.strategy {
            Strategy::Failover(f) => {
                let f = f.clone();
                Box::pin(async move {
                    let r = f.call_async_with(&classifier, op).await;
                    r.map_err(|e| Python::attach(|py| error(py, e)))
                })
            }
            Strategy::Failfast(f) => {
                let f = f.clone();
                Box::pin(async move {
                    let r = f.call_async_with(&classifier, op).await;
                    r.map_err(|e| Python::attach(|py| error(py, e)))
                })
            }
            Strategy::Failsafe(_, f) => {
                let f = f.clone();
                let default = self.default.as_ref().map(|d| d.clone_ref(py));
                Box::pin(async move {
                    let r = f.call_async_with(&classifier, op).await;
                    Python::attach(|py| match r {
                        Ok(v) => served(py, v, None),
                        Err(e) => {
                            let value = default_for(py, default.as_ref(), &e);
                            served(py, value, Some(e.degraded_reason()))
                        }
                    })
                })
            }
            Strategy::Broadcast(b) => {
                let b = b.clone();
                let name = self.cluster.name().to_owned();
                Box::pin(async move {
                    let r = b.call_async_with(&classifier, op).await;
                    Python::attach(|py| broadcast_answer(py, &name, r))
                })
            }
            Strategy::Forking(f, _) => {
                let f = f.clone();
                Box::pin(async move {
                    let r = f.call_with(&classifier, op).await;
                    r.map_err(|e| Python::attach(|py| error(py, e)))
                })
            }
            Strategy::Failback(_) => unreachable_failback(),
        };
        Ok(AsyncCall::new(fut))
    }
}

/// The failback strategy answered before its future was made.
fn unreachable_failback() -> BoxFuture {
    Box::pin(async {
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "failback cluster call reached the async strategies",
        ))
    })
}
