//! Building a cluster: its endpoints from Python values, and what the
//! exporter tracks of it.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;

use super::Strategy;
use crate::convert::to_json;
use crate::tracked::{TrackedCluster, track_cluster};
use tripline::cluster::EjectionTally;

/// `endpoints` (addresses, or dicts with `id`, `address`, `weight`) as JSON.
pub(crate) fn endpoints_json(endpoints: &Bound<'_, PyAny>) -> PyResult<Value> {
    let not_a_list = || {
        PyTypeError::new_err(
            "`endpoints` must be a list of addresses or of {id, address, weight} dicts",
        )
    };
    if endpoints.is_instance_of::<PyString>() {
        return Err(not_a_list());
    }
    let mut out = Vec::new();
    for (i, e) in endpoints.try_iter().map_err(|_| not_a_list())?.enumerate() {
        let e = e?;
        if let Ok(s) = e.cast::<PyString>() {
            let address = s.to_cow()?.into_owned();
            out.push(serde_json::json!({"id": address, "address": address}));
        } else {
            out.push(to_json(&e, "", &format!("endpoints[{i}]"))?);
        }
    }
    Ok(Value::Array(out))
}

/// The cluster as the exporter sees it: health and outlier counts (fed by
/// its events from now on), and its strategy's queue or budget.
pub(crate) fn tracked(
    cluster: &tripline::cluster::Cluster,
    strategy: &Strategy,
) -> Arc<TrackedCluster> {
    let tally = Arc::new(EjectionTally::default());
    let tracked = Arc::new(TrackedCluster {
        _subscription: cluster.subscribe(tally.subscriber()),
        _transitions: crate::tracked::count_registry_transitions(cluster.breakers()),
        tally,
        cluster: cluster.clone(),
        failback: match strategy {
            Strategy::Failback(f) => Some(f.clone()),
            _ => None,
        },
        budget: match strategy {
            Strategy::Failover(f) => f.budget().cloned(),
            Strategy::Forking(_, b) => b.clone(),
            _ => None,
        },
    });
    track_cluster(&tracked);
    tracked
}
