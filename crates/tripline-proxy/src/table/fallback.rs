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

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode, header};
use http_body::Body as _;
use http_body_util::BodyExt;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;
use tripline::timeout::Deadline;

use crate::config::{ConfigError, FALLBACK_CAUSES, RouteSection, UPSTREAM_FAILURE};
use crate::http::body::{ProxyBody, RequestBody, full};
use crate::http::rejection::{FLAG_HEADER, REJECTED_HEADER, RETRY_REFUSED_HEADER, Reason};
use crate::table::route::{Route, is_idempotent};

/// Names the cause a fallback answer replaces.
pub const DEGRADED_HEADER: HeaderName = HeaderName::from_static("x-tripline-degraded");

/// How long a replaced upstream answer may take to be read to its end
/// (so it settles the breakers) before it is dropped, neutrally.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// A route's fallback, built.
pub(crate) struct RouteFallback {
    /// Indexed like [`FALLBACK_CAUSES`]: whether the cause is replaced.
    on: [bool; FALLBACK_CAUSES.len()],
    kind: Kind,
}

enum Kind {
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

/// Replaces `response` by the route's fallback when it stands for a cause
/// the fallback covers.
pub(crate) async fn apply(
    proxy: &crate::proxy::Inner,
    route: &Route,
    parts: &crate::data::forward::Outbound,
    body: &mut RequestBody,
    deadline: Option<Deadline>,
    response: Response<ProxyBody>,
    trail: Option<&mut crate::data::access_log::Trail>,
) -> Response<ProxyBody> {
    let Some(fallback) = &route.guard.fallback else {
        return response;
    };
    let Some(cause) = cause_of(route, &response) else {
        return response;
    };
    let covered = FALLBACK_CAUSES
        .iter()
        .position(|c| *c == cause)
        .and_then(|i| fallback.on.get(i).copied())
        .unwrap_or(false);
    if !covered {
        return response;
    }
    // A retry the budget refused stays told on the degraded answer (the
    // access log and the metrics read it there).
    let retry_refused = response.headers().get(RETRY_REFUSED_HEADER).cloned();
    let mut answer = match &fallback.kind {
        Kind::Fixed {
            status,
            body,
            content_type,
        } => {
            drain(response);
            let mut answer = Response::new(full(body.clone()));
            *answer.status_mut() = *status;
            if let Some(ct) = content_type {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, ct.clone());
            }
            answer
        }
        Kind::Cluster(secondary) => {
            let maybe_received = matches!(
                cause,
                UPSTREAM_FAILURE | "upstream_timeout" | "upstream_reset"
            );
            let may_repeat = route.retry.retryable || is_idempotent(&parts.method);
            if !body.can_send() || (maybe_received && !may_repeat) {
                return response;
            }
            drain(response);
            crate::data::forward::answer_from(proxy, secondary, parts, body, deadline, trail).await
        }
    };
    let headers = answer.headers_mut();
    headers.insert(DEGRADED_HEADER, HeaderValue::from_static(cause));
    if let Some(refused) = retry_refused {
        headers.insert(RETRY_REFUSED_HEADER, refused);
    }
    answer
}

/// Reads a replaced answer to its end in the background, so its outcome
/// reaches the breakers (see the module docs).
fn drain(response: Response<ProxyBody>) {
    let body = response.into_body();
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN_LIMIT, body.collect()).await;
    });
}
