//! Fallback answers: a degraded answer instead of a refusal or a failed
//! upstream, and saying so.
//!
//! A route's `fallback` replaces the causes it lists (`on`) with a fixed
//! answer, or with the same request sent to a secondary cluster. Every
//! fallback answer carries [`DEGRADED_HEADER`] naming the cause it
//! replaces — `circuit_open`, `no_healthy_endpoint`, `upstream_failure`
//! (an upstream answer with a failure status) — so clients and dashboards
//! can tell a degraded answer from a real one; the proxy counts them in
//! `tripline_proxy_fallbacks_total{route,reason}`.
//!
//! The cause is read from the answer the route produced: its
//! `x-tripline-rejected` or `x-tripline-flag`, else its status against
//! the route's failure statuses. A replaced upstream answer is still read
//! to its end in the background, so its failure settles the endpoint's
//! and the route's breakers as if the client had received it: a fallback
//! hides failures from clients, never from breakers.
//!
//! A secondary cluster gets the request only if its body can still be
//! sent (a route with a secondary cluster keeps bodies up to
//! `retry.max_buffered_body` for it; a larger one is sent once), and, when
//! the primary may have received it (`upstream_failure`,
//! `upstream_timeout`, `upstream_reset`), only if it may be sent twice
//! (an idempotent method, or `retry.retryable`). Otherwise the primary's
//! answer stands. The secondary's endpoints' breakers and outlier
//! detection are its own.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::config::{ConfigError, FALLBACK_CAUSES, RouteSection, UPSTREAM_FAILURE};
use crate::http::body::ProxyBody;
use crate::http::rejection::{FLAG_HEADER, REJECTED_HEADER, Reason};
use crate::table::route::Route;

pub use crate::http::rejection::DEGRADED_HEADER;

/// A route's fallback, built.
pub(crate) struct RouteFallback {
    /// Indexed like [`FALLBACK_CAUSES`]: whether the cause is replaced.
    on: [bool; FALLBACK_CAUSES.len()],
    pub(crate) kind: Kind,
}

/// What a fallback answers with.
pub(crate) enum Kind {
    Fixed {
        status: StatusCode,
        body: Bytes,
        content_type: Option<HeaderValue>,
    },
    /// The secondary cluster, as a route of its own (same name, timeouts
    /// and failure statuses; no breaker, retries or fallback).
    Cluster(Box<Route>),
}

impl RouteFallback {
    /// The cause `response` (an answer of `route`) stands for, when this
    /// fallback replaces it.
    pub(crate) fn replaces(
        &self,
        route: &Route,
        response: &Response<ProxyBody>,
    ) -> Option<&'static str> {
        let cause = cause_of(route, response)?;
        FALLBACK_CAUSES
            .iter()
            .position(|c| *c == cause)
            .and_then(|i| self.on.get(i).copied())
            .unwrap_or(false)
            .then_some(cause)
    }

    /// Whether the route should keep request bodies for this fallback
    /// (a secondary cluster may need to send them).
    pub(crate) fn keeps_body(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }

    /// The fallback of `section`, if any (validated already).
    pub(crate) fn build(
        at: &str,
        section: &RouteSection,
        clusters: &std::collections::BTreeMap<String, Cluster>,
        upstreams: &std::collections::BTreeMap<String, crate::upstream::ClusterUpstream>,
        clock: &SharedClock,
    ) -> Result<Option<RouteFallback>, ConfigError> {
        let Some(f) = &section.fallback else {
            return Ok(None);
        };
        let on = FALLBACK_CAUSES.map(|c| f.on.iter().any(|o| o == c));
        let kind = match (&f.status, &f.cluster) {
            (Some(status), _) => Kind::Fixed {
                status: StatusCode::from_u16(*status).map_err(|e| {
                    ConfigError::invalid(format!("{at}.fallback.status"), e.to_string())
                })?,
                body: Bytes::from(f.body.clone()),
                content_type: match &f.content_type {
                    Some(ct) => Some(HeaderValue::from_str(ct).map_err(|e| {
                        ConfigError::invalid(format!("{at}.fallback.content_type"), e.to_string())
                    })?),
                    None => None,
                },
            },
            (None, Some(name)) => {
                let cluster = clusters.get(name).cloned().ok_or_else(|| {
                    ConfigError::invalid(format!("{at}.fallback.cluster"), "names no cluster")
                })?;
                let secondary = RouteSection {
                    name: section.name.clone(),
                    cluster: name.clone(),
                    timeout: section.timeout.clone(),
                    failure_statuses: section.failure_statuses.clone(),
                    grpc_failure_codes: section.grpc_failure_codes.clone(),
                    ..RouteSection::default()
                };
                let upstream =
                    upstreams
                        .get(name)
                        .map(|u| u.upstream.clone())
                        .ok_or_else(|| {
                            ConfigError::invalid(
                                format!("{at}.fallback.cluster"),
                                "names no cluster",
                            )
                        })?;
                let at = format!("{at}.fallback");
                Kind::Cluster(Box::new(Route::build(
                    &at, &secondary, cluster, upstream, clock,
                )?))
            }
            (None, None) => {
                return Err(ConfigError::invalid(
                    format!("{at}.fallback"),
                    "needs `status` or `cluster`",
                ));
            }
        };
        Ok(Some(RouteFallback { on, kind }))
    }
}

/// The cause `response` stands for, if it is a refusal or a failure.
fn cause_of(route: &Route, response: &Response<ProxyBody>) -> Option<&'static str> {
    let headers = response.headers();
    let named = headers
        .get(REJECTED_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Reason::ALL.into_iter().find(|r| r.as_str() == v));
    let flagged = || {
        let flag = headers.get(FLAG_HEADER)?.to_str().ok()?;
        Reason::ALL.into_iter().find(|r| r.flag() == flag)
    };
    if let Some(reason) = named.or_else(flagged) {
        return Some(reason.as_str());
    }
    route
        .classify(response.status().as_u16())
        .is_failure()
        .then_some(UPSTREAM_FAILURE)
}
