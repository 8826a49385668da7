//! The `no_healthy_endpoint` refusal, and why no endpoint could take it.
//!
//! "No healthy endpoint" alone hides the breakers behind it: an operator
//! needs the cluster and what stands in the way of each endpoint. The
//! refusal names the cluster (`x-tripline-cluster`) and says, in its JSON
//! body's `detail`, how many endpoints it has and how many are ejected,
//! marked unhealthy, or behind an open (or forced-open, or half-open and
//! busy) breaker: "cluster orders: 2 endpoints, 2 with breaker open".
//!
//! The count walks the cluster's endpoints, so it is made only here, on
//! the refusal's path; the request path that finds an endpoint never pays
//! for it.

use std::time::Duration;

use tripline::{Clock, State};

use crate::http::rejection::{Reason, Rejection};
use crate::table::route::Route;

/// The refusal of a try for which `route`'s cluster had no endpoint.
pub(super) fn refusal(route: &Route) -> Rejection {
    Rejection::new(Reason::NoHealthyEndpoint, Some(&route.name))
        .retry_after(earliest_reopening(route))
        .cluster(route.cluster.name())
        .detail(explain(route))
}

/// "cluster orders: 3 endpoints, 1 ejected, 2 with breaker open".
fn explain(route: &Route) -> String {
    let cluster = &route.cluster;
    let endpoints = cluster.endpoints();
    let (mut ejected, mut unhealthy, mut open, mut forced, mut probing) = (0, 0, 0, 0, 0);
    for e in endpoints.iter() {
        if e.is_ejected() {
            ejected += 1;
        } else if e.is_marked_unhealthy() {
            unhealthy += 1;
        }
        match e.breaker().state() {
            State::Open => open += 1,
            State::ForcedOpen => forced += 1,
            State::HalfOpen => probing += 1,
            State::Closed | State::Disabled | State::MetricsOnly => {}
        }
    }
    let name = cluster.name();
    if endpoints.is_empty() {
        return format!("cluster {name}: no endpoints (discovery found none, or all were removed)");
    }
    let mut text = format!(
        "cluster {name}: {} endpoint{}",
        endpoints.len(),
        if endpoints.len() == 1 { "" } else { "s" }
    );
    let parts = [
        (ejected, "ejected"),
        (unhealthy, "marked unhealthy"),
        (open, "with breaker open"),
        (forced, "with breaker forced open"),
        (probing, "with breaker half-open, probe slots taken"),
    ];
    for (count, what) in parts {
        if count > 0 {
            text.push_str(&format!(", {count} {what}"));
        }
    }
    if parts.iter().all(|(count, _)| *count == 0) {
        // The endpoints recovered between the refusal and this count.
        text.push_str(", none refusing now");
    }
    text
}

/// When the first open endpoint breaker of the route's cluster lets a
/// call through again, if any is open: the `Retry-After` of a
/// `no_healthy_endpoint` refusal.
fn earliest_reopening(route: &Route) -> Option<Duration> {
    let endpoints = route.cluster.endpoints();
    let until = endpoints
        .iter()
        .filter_map(|e| e.breaker().open_until_time())
        .min()?;
    let now = route.cluster.clock().now();
    Some(until.saturating_duration_since(now)).filter(|d| !d.is_zero())
}
