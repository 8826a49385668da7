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
//! With a `[config_source]`, each description says whether its applier
//! manages the breaker (`managed`: under which name — a keyed or endpoint
//! breaker under its family's — and which pushed document version last
//! configured it), and every description says which operator override is
//! in force (`override`), if any, and for a managed breaker which of the
//! fleet's document and this instance's operator holds it (`override_by`:
//! `fleet`, `local` or null).
//!
//! The actions are the library's operator overrides: `force-open`,
//! `disable`, `metrics-only`, and `reset` (clears any override and closes
//! with an empty window). Named after a family — a keyed route's breaker
//! or a cluster — an action holds every breaker of it, those of keys or
//! endpoints that appear later included, and `reset` lifts the hold. An override lasts until reset; a reload keeps a
//! route breaker whose name did not change, and its override with it.

use serde_json::{Value, json};
use tripline::registry::{BreakerRegistry, RegistryKey};
use tripline::{CircuitBreaker, Clock, State};
use tripline_config::Applier;

use super::hub::{Hub, rfc3339};
use crate::table::Table;

/// What kind of breaker a name denotes, and what owns it.
pub(crate) enum Owner<'a> {
    Route(&'a str),
    /// A breaker of the route's keyed family, named `family`.
    Keyed {
        route: &'a str,
        family: &'a str,
    },
    /// An endpoint's breaker, of the cluster's family named `family`.
    Endpoint {
        cluster: &'a str,
        endpoint: String,
        family: &'a str,
    },
}

impl Owner<'_> {
    /// The name a `[config_source]` applier manages the breaker `name`
    /// under: its own for a route breaker, its family's otherwise.
    fn managed_as<'n>(&'n self, name: &'n str) -> &'n str {
        match self {
            Owner::Route(_) => name,
            Owner::Keyed { family, .. } | Owner::Endpoint { family, .. } => family,
        }
    }
}

/// Calls `f` with every breaker of `table` and its API name.
pub(crate) fn for_each(table: &Table, mut f: impl FnMut(&str, Owner<'_>, &CircuitBreaker)) {
    for route in &table.routes {
        if let Some(b) = &route.breaker {
            f(b.name(), Owner::Route(&route.name), b);
        }
        if let Some(keyed) = &route.guard.keyed_breaker {
            let owner = || Owner::Keyed {
                route: &route.name,
                family: keyed.registry.family(),
            };
            keyed.registry.for_each_breaker(|_, b| {
                f(b.name(), owner(), b);
            });
            if let Some(b) = keyed.registry.overflow_breaker() {
                f(b.name(), owner(), &b);
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
                    family: cluster.breakers().family(),
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

/// A family of breakers held whole by one action: a keyed route's, or a
/// cluster's endpoint breakers. Holding one holds every breaker of it,
/// those made later included ([`BreakerRegistry::hold_family`]).
pub(crate) trait Family {
    /// Holds every breaker in an operator state, or lifts the hold.
    fn hold(&self, state: Option<State>);
    /// The state it is held in, if any.
    fn held(&self) -> Option<State>;
    /// Its live breakers.
    fn breakers(&self) -> usize;
}

impl<K: RegistryKey> Family for BreakerRegistry<K> {
    fn hold(&self, state: Option<State>) {
        // Actions give only operator states, which a family never refuses.
        if let Err(e) = self.hold_family(state) {
            tracing::error!(family = %self.family(), "tripline proxy: family hold refused: {e}");
        }
    }

    fn held(&self) -> Option<State> {
        self.family_hold()
    }

    fn breakers(&self) -> usize {
        self.len()
    }
}

/// The family named `name`, if the table has one: a keyed route's (named
/// like the route's breaker) or a cluster's endpoint breakers (named like
/// the cluster).
pub(crate) fn find_family(table: &Table, name: &str) -> Option<Box<dyn Family>> {
    for route in &table.routes {
        if let Some(keyed) = &route.guard.keyed_breaker
            && keyed.registry.family() == name
        {
            return Some(Box::new(keyed.registry.clone()));
        }
    }
    table
        .clusters
        .values()
        .map(|c| c.breakers())
        .find(|r| r.family() == name)
        .map(|r| Box::new(r.clone()) as Box<dyn Family>)
}

/// Every breaker, described; `applier` is the `[config_source]`'s, if
/// the proxy has one.
pub(crate) fn list(table: &Table, hub: &Hub, applier: Option<&Applier>) -> Value {
    let mut breakers = Vec::new();
    for_each(table, |name, owner, b| {
        breakers.push(describe(name, &owner, b, hub, applier))
    });
    json!({ "breakers": breakers })
}

/// One breaker, described; `None` if no breaker has that name.
pub(crate) fn one(
    table: &Table,
    hub: &Hub,
    applier: Option<&Applier>,
    name: &str,
) -> Option<Value> {
    let mut found = None;
    for_each(table, |n, owner, b| {
        if found.is_none() && n == name {
            found = Some(describe(n, &owner, b, hub, applier));
        }
    });
    found
}

/// State, window, rates against thresholds, open-until, recent
/// transitions, the whole config in force (`config`), and who decides its
/// config and state (`managed`, `override`).
pub(crate) fn describe(
    name: &str,
    owner: &Owner<'_>,
    b: &CircuitBreaker,
    hub: &Hub,
    applier: Option<&Applier>,
) -> Value {
    let m = b.metrics();
    let config = b.config();
    let managed = managed(applier, owner.managed_as(name));
    let (kind, owner) = match owner {
        Owner::Route(route) => ("route", json!({ "route": route })),
        Owner::Keyed { route, .. } => ("keyed", json!({ "route": route })),
        Owner::Endpoint {
            cluster, endpoint, ..
        } => (
            "endpoint",
            json!({ "cluster": cluster, "endpoint": endpoint }),
        ),
    };
    let open_until = open_until(name, b, hub).map(rfc3339);
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
            "ignored": m.calls.ignored,
            "cancelled": m.calls.cancelled,
        },
        "transitions_total": m.transitions,
        "config_version": m.config_version,
        // Every field in force, in the config files' vocabulary: what a
        // pushed table changed and what it left as the file set it.
        "config": serde_json::to_value(&config).unwrap_or(Value::Null),
        "override_by": managed["holds"].clone(),
        "managed": managed,
        "override": operator_override(m.state),
        "transitions": hub.transitions(name),
    })
}

/// When the breaker's open state ends, on the wall clock: a fixed instant
/// for one open period, also once it has passed and no call has probed
/// yet (converting "deadline minus now" at each query would show the
/// query's own time then). Anchored on the breaker's last transition as
/// the hub heard it; a breaker it never heard change (a keyed family past
/// the hub's memory) is converted against the clocks' present readings.
fn open_until(name: &str, b: &CircuitBreaker, hub: &Hub) -> Option<std::time::SystemTime> {
    let deadline = b.open_until_time()?;
    hub.wall_time_of(name, deadline).or_else(|| {
        let now = b.clock().now();
        let wall = tripline::clock::system_time_after(std::time::Duration::ZERO);
        Some(if deadline >= now {
            wall + deadline.saturating_duration_since(now)
        } else {
            wall - now.saturating_duration_since(deadline)
        })
    })
}

/// `{as, family, pushed: {version, source, revision} | null,
/// override_recorded, holds: "fleet" | "local" | null, fleet_override}`
/// if `applier` manages `managed_as`, else `null`. `holds` says which of
/// the fleet's `[[override]]` and this instance's operator holds the
/// breaker (a local override holds over the fleet's until reset);
/// `fleet_override` is the unexpired fleet override naming it
/// (`{breaker, state, until, reason, author}`), held or not.
fn managed(applier: Option<&Applier>, managed_as: &str) -> Value {
    let Some(status) = applier.and_then(|a| a.managed_status(managed_as)) else {
        return Value::Null;
    };
    json!({
        "as": status.name,
        "family": status.family,
        "pushed": status.pushed,
        "override_recorded": status.overridden,
        "holds": status.holds,
        "fleet_override": status.fleet_override,
    })
}

/// The operator override a state stands for: only an operator's call puts
/// a proxy breaker in one of these states, and only `reset` takes it out.
fn operator_override(state: State) -> Option<&'static str> {
    match state {
        State::ForcedOpen | State::Disabled | State::MetricsOnly => Some(state.as_str()),
        State::Closed | State::Open | State::HalfOpen => None,
    }
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

    /// The operator state it puts a breaker in; `None` for `reset`.
    pub(crate) fn operator_state(self) -> Option<State> {
        match self {
            Action::ForceOpen => Some(State::ForcedOpen),
            Action::Disable => Some(State::Disabled),
            Action::MetricsOnly => Some(State::MetricsOnly),
            Action::Reset => None,
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
