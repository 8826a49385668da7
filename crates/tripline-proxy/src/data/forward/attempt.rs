//! One try on one endpoint.

use std::task::Poll;
use std::time::Duration;

use http::{Response, header};
use http_body_util::BodyExt;
use tripline::Clock;
use tripline::cluster::{EndpointOutcome, Lease};
use tripline::retry::RetryDecision;
use tripline::timeout::{Deadline, TokioClock};

use super::TriedEndpoints;
use crate::data::Ctx;
use crate::http::body::{ClientUpload, ProxyBody, RequestBody, Tracked};
use crate::http::grpc;
use crate::http::headers::strip_answer_hop_by_hop;
use crate::http::rejection::{Reason, Rejection};
use crate::table::overflow::EndpointSlot;
use crate::table::route::Route;
use crate::table::shadow::ShadowFeed;
use crate::upstream::Outbound;

use super::limits::Limits;

/// What one try came to.
pub(super) enum Tried {
    /// The endpoint answered; the lease is settled when the answer's body ends.
    Answered {
        response: Response<ProxyBody>,
        lease: Lease,
        outcome: EndpointOutcome,
        /// The endpoint's shadow twin, while a rollout's shadow runs.
        shadow: Option<ShadowFeed>,
        /// Whether the answer is gRPC ([`grpc::is_grpc`], looked up once).
        grpc: bool,
        /// The try's place among its endpoint's `max_concurrent`, held to
        /// the end of the answer's body.
        slot: Option<EndpointSlot>,
    },
    /// The try failed on the connection (already recorded on the endpoint).
    Failed {
        reason: Reason,
        outcome: EndpointOutcome,
    },
    /// An answer already recorded on its endpoint, kept while a retry is
    /// tried: if the retry cannot even be sent (no endpoint left, no time),
    /// the client gets this answer rather than the retry's refusal.
    Settled {
        response: Response<ProxyBody>,
        outcome: EndpointOutcome,
    },
    /// Nothing was sent: no endpoint, or no time left.
    Refused(Rejection),
    /// The client's own body broke while it was being sent, or the try
    /// was waiting for the client to send more of it when its time ran
    /// out: the try is neither the endpoint's failure nor the route's (its
    /// lease was released unrecorded), and it is not retried.
    ClientFault(Rejection),
}

impl Tried {
    /// The endpoint's outcome, if an endpoint was tried.
    pub(super) fn outcome(&self) -> Option<EndpointOutcome> {
        match self {
            Tried::Answered { outcome, .. }
            | Tried::Failed { outcome, .. }
            | Tried::Settled { outcome, .. } => Some(*outcome),
            Tried::Refused(_) | Tried::ClientFault(_) => None,
        }
    }

    /// What the access log calls the try.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Tried::ClientFault(_) => "client_body",
            tried => tried.outcome().map_or("refused", EndpointOutcome::as_str),
        }
    }

    /// Records a try that will be retried on its endpoint, keeping its
    /// answer in case the retry cannot be sent.
    pub(super) fn settle(self) -> Tried {
        match self {
            Tried::Answered {
                response,
                lease,
                outcome,
                shadow,
                slot,
                ..
            } => {
                record(lease, outcome, shadow);
                drop(slot);
                Tried::Settled { response, outcome }
            }
            other => other,
        }
    }

    /// The client's answer; `settle_route` runs with the final outcome
    /// when the answer has been sent whole (or failed mid-body).
    pub(super) fn into_response(
        self,
        route: &Route,
        settle_route: impl FnOnce(Option<EndpointOutcome>) + Send + Sync + Unpin + 'static,
    ) -> Response<ProxyBody> {
        match self {
            Tried::Answered {
                response,
                lease,
                outcome,
                shadow,
                grpc: is_grpc,
                slot,
            } => {
                let (mut parts, body) = response.into_parts();
                strip_answer_hop_by_hop(parts.status, &mut parts.headers);
                // A gRPC answer's outcome may come in its trailers.
                let (body, trailers) = grpc::watch(is_grpc, body);
                let grpc = route.guard.grpc;
                let body = Tracked::new(body, move |ok: bool| {
                    let outcome = match (ok, trailers.code()) {
                        (false, _) => EndpointOutcome::LocalOriginFailure,
                        (true, Some(code)) if !outcome.is_failure() => grpc.outcome(code),
                        (true, _) => outcome,
                    };
                    record(lease, outcome, shadow);
                    drop(slot);
                    settle_route(Some(outcome));
                });
                Response::from_parts(parts, body.boxed())
            }
            Tried::Settled { response, outcome } => {
                settle_route(Some(outcome));
                let (mut parts, body) = response.into_parts();
                strip_answer_hop_by_hop(parts.status, &mut parts.headers);
                Response::from_parts(parts, body)
            }
            Tried::Failed { reason, outcome } => {
                settle_route(Some(outcome));
                Rejection::new(reason, Some(&route.name)).response()
            }
            Tried::ClientFault(rejection) => {
                settle_route(None);
                rejection.response()
            }
            Tried::Refused(rejection) => {
                // The proxy's own refusal of its try (no endpoint, no time
                // left) is no evidence about the dependency: the failures
                // that opened the endpoints' breakers were booked already.
                // Ignored, not cancelled: the route's call did end.
                settle_route(None);
                rejection.response()
            }
        }
    }
}

/// Sends the request to one endpoint of the route's cluster.
pub(super) async fn try_once(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    limits: Limits,
    tried: &mut TriedEndpoints,
) -> Tried {
    match prepare(route, body, limits.deadline, tried) {
        Ok(ready) => send(proxy, route, parts, ready, limits).await,
        Err(refused) => Tried::Refused(refused),
    }
}

/// A try ready to be sent: its endpoint and its copy of the body.
pub(super) struct Ready {
    lease: Lease,
    body: ProxyBody,
}

/// Picks the try's endpoint and body (synchronously, so that concurrent
/// hedged tries each take their own), or says why nothing can be sent.
pub(super) fn prepare(
    route: &Route,
    body: &mut RequestBody,
    deadline: Option<Deadline>,
    tried: &mut TriedEndpoints,
) -> Result<Ready, Rejection> {
    if deadline.is_some_and(|d| d.remaining(&TokioClock).is_zero()) {
        return Err(Rejection::new(Reason::DeadlineExceeded, Some(&route.name)));
    }
    // A retry goes to another endpoint when there is one; with a single
    // routable endpoint, to the same one again (a blip may have passed).
    let selected = match route.cluster.select_avoiding(tried) {
        Err(_) if !tried.is_empty() => route.cluster.select(),
        selected => selected,
    };
    let lease = match selected {
        Ok(lease) => {
            tried.push(lease.endpoint().id().clone());
            lease
        }
        Err(_) => return Err(super::no_healthy::refusal(route)),
    };
    let Some(body) = body.for_try() else {
        return Err(Rejection::new(Reason::UpstreamReset, Some(&route.name)));
    };
    Ok(Ready { lease, body })
}

/// Sends a prepared try. Dropping the future (a hedge that lost) drops
/// the lease unrecorded: the library releases it neutrally, so a
/// cancelled try is never charged to its endpoint.
pub(super) async fn send(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    ready: Ready,
    limits: Limits,
) -> Tried {
    let deadline = limits.deadline;
    let Ready { lease, body } = ready;
    // The endpoint's own limit (`endpoint_limits`), waited for in its
    // queue; a refusal is the proxy's own and releases the lease unrecorded.
    let slot = match &route.overflow {
        Some(o) => {
            match o
                .admit_try(lease.endpoint().id().as_str(), limits.until())
                .await
            {
                Ok(slot) => slot,
                Err(limit) => {
                    drop(lease);
                    return Tried::Refused(super::overflow::refusal(route, limit));
                }
            }
        }
        None => None,
    };
    let shadow = route.endpoint_shadow_feed(lease.endpoint().id());
    let remaining = deadline.map(|d| d.remaining(&TokioClock));
    let address = lease.endpoint().address();
    let Ok(uri) = route.upstream.uri(address, parts) else {
        return Tried::Refused(Rejection::new(Reason::NoRoute, Some(&route.name)));
    };
    let limit = match (route.timeout.per_try, remaining) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // The deadline forwarded is the try's own when that is the earlier: an
    // endpoint that did not know the per-try timeout would work on after
    // the proxy gave up on the try. Without a request deadline nothing is
    // forwarded, as before (that keeps the bodiless HTTP/1.1 fast path).
    let forwarded = deadline.map(|d| match route.timeout.per_try {
        Some(per_try) => d.min(Deadline::after(&TokioClock, per_try)),
        None => d,
    });
    let fault = proxy.faults.roll(&route.name, parts, address);
    let sent = async {
        fault.delay().await;
        if let Some(refused) = fault.refused() {
            return Err(refused);
        }
        match fault.abort() {
            Some(answer) => Ok(answer),
            None => {
                fault.hang().await;
                let answer = route.upstream.send(address, parts, uri, body, forwarded);
                answer.await.map(|response| fault.cut(response))
            }
        }
    };
    // The try's time to its answer's head, for the cluster's histogram.
    let sent_at = route.latency.as_ref().map(|_| tokio::time::Instant::now());
    let result = match (limit, limits.guard) {
        (None, None) => Ok(sent.await),
        (Some(limit), None) => tokio::time::timeout(limit, sent).await.map_err(|_| ()),
        // The default limit of a route that sets none: it almost never
        // fires, so the coarse timer ends the try, not a runtime timer.
        (limit, Some(guard)) => {
            // Pinned in place and raced by hand: no copy of the try's
            // future into a combinator's.
            let mut sent = std::pin::pin!(sent);
            let mut due = std::pin::pin!(proxy.coarse.sleep_until(guard));
            let guarded = std::future::poll_fn(|cx| {
                if let Poll::Ready(sent) = sent.as_mut().poll(cx) {
                    return Poll::Ready(Ok(sent));
                }
                due.as_mut().poll(cx).map(|()| Err(()))
            });
            match limit {
                Some(limit) => tokio::time::timeout(limit, guarded)
                    .await
                    .unwrap_or(Err(())),
                None => guarded.await,
            }
        }
    };
    match result {
        Ok(Ok(mut response)) => {
            if let (Some(latency), Some(sent_at)) = (&route.latency, sent_at) {
                latency.observe_upstream(lease.endpoint().id().as_str(), sent_at.elapsed());
            }
            fault.mark(&mut response);
            let status = response.status().as_u16();
            let grpc = grpc::is_grpc(response.headers());
            let outcome =
                route
                    .guard
                    .grpc
                    .classify_headers(response.headers(), grpc, route.classify(status));
            if matches!(status, 429 | 503) {
                honour_retry_after(&lease, &response);
            }
            Tried::Answered {
                response,
                lease,
                outcome,
                shadow,
                grpc,
                slot,
            }
        }
        Ok(Err(_)) if parts.client_body.as_ref().is_some_and(ClientUpload::broke) => {
            // Dropped unrecorded: the library releases the lease neutrally.
            drop(lease);
            let reason = match parts
                .client_body
                .as_ref()
                .is_some_and(ClientUpload::timed_out)
            {
                true => Reason::ClientTimeout,
                false => Reason::ProtocolError,
            };
            Tried::ClientFault(Rejection::new(reason, Some(&route.name)))
        }
        Ok(Err(e)) => {
            if e.is_connect() {
                proxy.connect_log.connect_failed(
                    route.cluster.name(),
                    lease.endpoint().id().as_str(),
                    &route.name,
                    &e,
                    route.cluster.clock().now(),
                );
            }
            let (reason, outcome) = if e.is_connect() {
                (
                    Reason::UpstreamConnectFailure,
                    EndpointOutcome::ConnectFailure,
                )
            } else {
                (Reason::UpstreamReset, EndpointOutcome::LocalOriginFailure)
            };
            record(lease, outcome, shadow);
            Tried::Failed { reason, outcome }
        }
        Err(())
            if parts
                .client_body
                .as_ref()
                .is_some_and(ClientUpload::waiting_for_client) =>
        {
            // The time ran out while the client was still sending: the
            // endpoint never had the whole request to answer. As when a
            // body kept for retries arrives too slowly, the request's time
            // is spent before it could be sent.
            drop(lease);
            Tried::ClientFault(Rejection::new(Reason::DeadlineExceeded, Some(&route.name)))
        }
        Err(()) => {
            record(lease, EndpointOutcome::LocalOriginFailure, shadow);
            Tried::Failed {
                reason: Reason::UpstreamTimeout,
                outcome: EndpointOutcome::LocalOriginFailure,
            }
        }
    }
}

/// Records a try's outcome on its endpoint, and on the endpoint's shadow
/// twin while a rollout's shadow runs.
fn record(lease: Lease, outcome: EndpointOutcome, shadow: Option<ShadowFeed>) {
    match shadow {
        Some(shadow) => {
            let elapsed = lease.elapsed();
            shadow.observe(outcome.breaker_outcome(), elapsed);
            lease.record_elapsed(outcome, elapsed);
        }
        None => lease.record(outcome),
    }
}

/// The longest an endpoint's `Retry-After` keeps it out of rotation.
/// One answer must not take an endpoint away for a day (a misconfigured
/// `Retry-After: 86400`, or a date far ahead): past this the endpoint is
/// probed again and may ask anew. Five minutes, the default ceiling of
/// Envoy's rate-limited retry back-off.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// An endpoint that says when to come back (429 or 503 with
/// `Retry-After`) is left alone until then, at most [`MAX_RETRY_AFTER`]:
/// its breaker opens until that instant, on the breaker's own clock.
fn honour_retry_after<B>(lease: &Lease, response: &Response<B>) {
    let Some(value) = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
    else {
        return;
    };
    if let RetryDecision::RetryAfter(wait) = RetryDecision::from_retry_after(value)
        && wait > Duration::ZERO
    {
        let breaker = lease.endpoint().breaker();
        let wait = wait.min(MAX_RETRY_AFTER);
        breaker.open_until(breaker.clock().now().saturating_add(wait));
    }
}
