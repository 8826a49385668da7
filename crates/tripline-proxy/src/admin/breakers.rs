//! `GET /api/breakers[/{name}]` and `POST /api/breakers/{name}/{action}`.
//!
//! Every breaker the proxy runs, under one name space:
//!
//! - a route's breaker: its name (the route's `breaker.name`, else the
//!   route's name);
//! - a keyed route breaker: `<family>:<key>` (`(none)` for requests
//!   without the header), as refusals name it;
//! - an endpoint's breaker: the cluster's name for it,
//!   `<cluster>:<endpoint>`, e.g. `backend:10.0.0.2:8080` (as its events
//!   and metrics name it).
//!
//! The actions are the library's operator overrides: `force-open`,
//! `disable`, `metrics-only`, and `reset` (clears any override and closes
//! with an empty window). An override lasts until reset; a reload keeps a
//! route breaker whose name did not change, and its override with it.

use serde_json::{Value, json};
use tripline::CircuitBreaker;

use super::hub::{Hub, rfc3339};
use crate::table::Table;

/// What kind of breaker a name denotes, and what owns it.
pub(crate) enum Owner<'a> {
    Route(&'a str),
    Keyed(&'a str),
    Endpoint { cluster: &'a str, endpoint: String },
}

/// Calls `f` with every breaker of `table` and its API name.
pub(crate) fn for_each(table: &Table, mut f: impl FnMut(&str, Owner<'_>, &CircuitBreaker)) {
    for route in &table.routes {
        if let Some(b) = &route.breaker {
            f(b.name(), Owner::Route(&route.name), b);
        }
        if let Some(keyed) = &route.guard.keyed_breaker {
            keyed.registry.for_each_breaker(|_, b| {
                f(b.name(), Owner::Keyed(&route.name), b);
            });
            if let Some(b) = keyed.registry.overflow_breaker() {
                f(b.name(), Owner::Keyed(&route.name), &b);
            }
        }
    }
    for (cluster_name, cluster) in &table.clusters {
        for endpoint in cluster.endpoints() {
            let id = endpoint.id().as_str().to_owned();
            f(
                endpoint.breaker().name(),
                Owner::Endpoint {
                    cluster: cluster_name,
                    endpoint: id,
                },
                endpoint.breaker(),
            );
        }
    }
}

/// The breaker named `name`, if the table has one.
pub(crate) fn find(table: &Table, name: &str) -> Option<CircuitBreaker> {
    let mut found = None;
    for_each(table, |n, _, b| {
        if found.is_none() && n == name {
            found = Some(b.clone());
        }
    });
    found
}

/// Every breaker, described.
pub(crate) fn list(table: &Table, hub: &Hub) -> Value {
    let mut breakers = Vec::new();
    for_each(table, |name, owner, b| {
        breakers.push(describe(name, &owner, b, hub))
    });
    json!({ "breakers": breakers })
}

/// One breaker, described; `None` if no breaker has that name.
pub(crate) fn one(table: &Table, hub: &Hub, name: &str) -> Option<Value> {
    let mut found = None;
    for_each(table, |n, owner, b| {
        if found.is_none() && n == name {
            found = Some(describe(n, &owner, b, hub));
        }
    });
    found
}

/// State, window, rates against thresholds, open-until, recent transitions.
pub(crate) fn describe(name: &str, owner: &Owner<'_>, b: &CircuitBreaker, hub: &Hub) -> Value {
    let m = b.metrics();
    let config = b.config();
    let (kind, owner) = match owner {
        Owner::Route(route) => ("route", json!({ "route": route })),
        Owner::Keyed(route) => ("keyed", json!({ "route": route })),
        Owner::Endpoint { cluster, endpoint } => (
            "endpoint",
            json!({ "cluster": cluster, "endpoint": endpoint }),
        ),
    };
    // The wall-clock deadline comes from the snapshot, which converts the
    // breaker's monotonic deadline once.
    let open_until = b.snapshot().open_until.map(rfc3339);
    json!({
        "name": name,
        "kind": kind,
        "owner": owner,
        "state": m.state.as_str(),
        "probe_due": m.probe_due,
        "window": {
            "calls": m.window.calls,
            "failures": m.window.failures,
            "slow": m.window.slow,
        },
        "failure_rate": m.window.failure_rate(),
        "failure_rate_threshold": config.failure_rate_threshold,
        "slow_call_rate": m.window.slow_call_rate(),
        "slow_call_rate_threshold": config.slow_call_rate_threshold,
        "slow_call_threshold_ms": m.slow_call_threshold.map(|d| d.as_millis() as u64),
        "minimum_calls": config.minimum_calls,
        "open_until": open_until,
        "calls": {
            "successful": m.calls.successful,
            "failed": m.calls.failed,
            "rejected": m.calls.rejected,
            "slow": m.calls.slow,
        },
        "transitions_total": m.transitions,
        "config_version": m.config_version,
        "transitions": hub.transitions(name),
    })
}

/// The operator actions, by their path segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
}

impl Action {
    /// Every action, for the API description.
    pub(crate) const ALL: [Action; 4] = [
        Action::ForceOpen,
        Action::Disable,
        Action::MetricsOnly,
        Action::Reset,
    ];

    pub(crate) fn parse(segment: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.segment() == segment)
    }

    /// The path segment.
    pub(crate) fn segment(self) -> &'static str {
        match self {
            Action::ForceOpen => "force-open",
            Action::Disable => "disable",
            Action::MetricsOnly => "metrics-only",
            Action::Reset => "reset",
        }
    }

    /// The audit log's name for it.
    pub(crate) fn audit_name(self) -> &'static str {
        match self {
            Action::ForceOpen => "force_open",
            Action::Disable => "disable",
            Action::MetricsOnly => "metrics_only",
            Action::Reset => "reset",
        }
    }

    /// Applies the override.
    pub(crate) fn apply(self, b: &CircuitBreaker) {
        match self {
            Action::ForceOpen => b.force_open(),
            Action::Disable => b.disable(),
            Action::MetricsOnly => b.metrics_only(),
            Action::Reset => b.reset(),
        }
    }
}
