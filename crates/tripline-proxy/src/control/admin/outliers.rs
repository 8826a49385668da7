//! `GET /api/outliers`: per cluster, whether outlier detection is on, the
//! panic mode, and per endpoint its ejection state.
//!
//! An endpoint is `routable` when the balancer could send it a request
//! now: neither ejected nor marked unhealthy, and its breaker lets calls
//! through (closed, half-open, or open with its wait over, so the next
//! call probes it). The cluster's `routable` counts those endpoints;
//! `outlier_routable` is outlier detection's own count (not ejected, not
//! marked unhealthy), the one panic mode is judged on.
//!
//! The ejection count and state are the cluster's own; when the current
//! ejection ends (`ejected_until`) and which detector ejected it come from
//! the cluster's ejection events as the admin hub heard them, so they are
//! known for ejections since the proxy (or the cluster, after a reload
//! that rebuilt it) started.

use serde_json::{Value, json};
use tripline::State;

use super::hub::{Hub, rfc3339};
use crate::table::Table;

/// The body of `GET /api/outliers`.
pub(crate) fn list(table: &Table, hub: &Hub) -> Value {
    let clusters: Vec<Value> = table
        .clusters
        .iter()
        .map(|(name, cluster)| {
            let health = cluster.health();
            let mut routable = 0;
            let endpoints: Vec<Value> = cluster
                .endpoints()
                .iter()
                .map(|e| {
                    let id = e.id().as_str();
                    let ejected = e.is_ejected();
                    let record = hub.ejection(name, id);
                    let counts = e.outlier_counts();
                    let breaker = e.breaker().metrics();
                    let admits = match breaker.state {
                        State::Open => breaker.probe_due,
                        State::ForcedOpen => false,
                        State::Closed | State::HalfOpen | State::Disabled | State::MetricsOnly => {
                            true
                        }
                    };
                    let is_routable = e.is_routable() && admits;
                    routable += usize::from(is_routable);
                    json!({
                        "endpoint": id,
                        "ejected": ejected,
                        "ejections": e.ejections(),
                        "ejected_until": record.until.filter(|_| ejected).map(rfc3339),
                        "last_detector": record.last_detector,
                        "routable": is_routable,
                        "breaker_state": breaker.state.as_str(),
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
                "routable": routable,
                "outlier_routable": health.routable,
                "ejected": health.ejected,
                "endpoints": endpoints,
                // The cluster's overflow limits and what they hold now.
                "overflow": table
                    .routes
                    .iter()
                    .find(|r| r.cluster.name() == name.as_str())
                    .and_then(|r| r.overflow.as_ref())
                    .map(|o| o.to_json()),
            })
        })
        .collect();
    json!({ "clusters": clusters })
}
