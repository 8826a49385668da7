//! `GET /api/outliers`: per cluster, whether outlier detection is on, the
//! panic mode, and per endpoint its ejection state.
//!
//! The ejection count and state are the cluster's own; when the current
//! ejection ends (`ejected_until`) and which detector ejected it come from
//! the cluster's ejection events as the admin hub heard them, so they are
//! known for ejections since the proxy (or the cluster, after a reload
//! that rebuilt it) started.

use serde_json::{Value, json};

use super::hub::{Hub, rfc3339};
use crate::table::Table;

/// The body of `GET /api/outliers`.
pub(crate) fn list(table: &Table, hub: &Hub) -> Value {
    let clusters: Vec<Value> = table
        .clusters
        .iter()
        .map(|(name, cluster)| {
            let health = cluster.health();
            let endpoints: Vec<Value> = cluster
                .endpoints()
                .iter()
                .map(|e| {
                    let id = e.id().as_str();
                    let ejected = e.is_ejected();
                    let record = hub.ejection(name, id);
                    let counts = e.outlier_counts();
                    json!({
                        "endpoint": id,
                        "ejected": ejected,
                        "ejections": e.ejections(),
                        "ejected_until": record.until.filter(|_| ejected).map(rfc3339),
                        "last_detector": record.last_detector,
                        "routable": e.is_routable(),
                        "breaker_state": e.breaker().state().as_str(),
                        "requests": counts.requests,
                        "failures": counts.failures,
                        "consecutive_failures": counts.consecutive_failures,
                    })
                })
                .collect();
            json!({
                "cluster": name,
                "outlier_detection": cluster.outlier_config().is_some(),
                "panic": health.panic,
                "endpoints_total": health.endpoints,
                "routable": health.routable,
                "ejected": health.ejected,
                "endpoints": endpoints,
            })
        })
        .collect();
    json!({ "clusters": clusters })
}
