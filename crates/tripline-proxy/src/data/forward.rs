//! One request through the proxy, in the order that does not amplify a
//! failure: rate limit, bulkhead, deadline, route breaker, then the retry
//! loop over the cluster's endpoints, each try (hedged, when the route
//! says so) bounded by the per-try timeout and the deadline, each retry
//! and hedge paid from the route's budget; last, the route's fallback may
//! replace a refusal or failure.

mod attempt;
mod backoff;
mod fallback;
mod hedge;
mod limits;
mod no_healthy;
mod overflow;
mod retry_on;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::{HeaderValue, Request, Response, header};
use tripline::cluster::EndpointOutcome;
use tripline::timeout::{Deadline, SharedTimer, TokioClock, TokioTimer};
use tripline::{Outcome, OwnedPermit};

use crate::config::DEFAULT_OVERALL;
use crate::data::Ctx;
use crate::data::access_log::{Pending, Trail};
use crate::http::body::{ProxyBody, RequestBody, read_for_replay, watch};
use crate::http::headers::{ForwardedValues, has_hop_by_hop, strip_hop_by_hop};
use crate::http::rejection::{RETRY_REFUSED_HEADER, Reason, Rejection, mark_overloaded};
use crate::table::route::Route;
use crate::upstream::Outbound;
use crate::upstream::tls::ClientCert;
use attempt::Tried;
use limits::Limits;

/// The endpoints a request has tried, in order: inline for the first two
/// (nearly every request tries one), so that a request allocates nothing
/// for the list.
pub(crate) type TriedEndpoints = smallvec::SmallVec<[tripline::cluster::EndpointId; 2]>;

/// Who sent a request and over what: fixed for its connection, with the
/// `forwarded` elements that say so to the upstream built once for it.
#[derive(Clone, Debug)]
pub(crate) struct Downstream {
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// This hop's `x-forwarded-for` and `forwarded` elements. `proto` is
    /// `https` on a TLS listener: a service that builds absolute URLs or
    /// sets `Secure` cookies from it must not be told `http` on HTTPS.
    forwarded: ForwardedValues,
    /// The client's verified certificate, on a mutual-TLS listener that
    /// forwards or logs it.
    client_cert: Option<Arc<ClientCert>>,
}

impl Downstream {
    /// The client at `peer`, connected over TLS or not.
    pub(crate) fn new(peer: SocketAddr, tls: bool) -> Downstream {
        let proto = if tls { "https" } else { "http" };
        Downstream {
            peer,
            forwarded: ForwardedValues::new(peer.ip(), proto),
            client_cert: None,
        }
    }

    /// The same client, identified by its certificate.
    pub(crate) fn with_client_cert(mut self, cert: Option<Arc<ClientCert>>) -> Downstream {
        self.client_cert = cert;
        self
    }
}

/// Answers one request, and counts the answer.
pub(crate) async fn handle(
    proxy: &Ctx,
    req: Request<ProxyBody>,
    downstream: Downstream,
) -> Response<ProxyBody> {
    if has_one_host(req.headers(), req.version()) {
        return handle_with_one_host(proxy, req, downstream).await;
    }
    let (parts, _) = req.into_parts();
    let line = Pending::begin(&proxy.access_log, &parts, downstream.peer);
    let what = "a Host missing from an HTTP/1.1 request, or given twice";
    crate::http::rejection::log::refused(downstream.peer, Reason::ProtocolError, what);
    refuse_unrouted(proxy, line, Reason::ProtocolError)
}

/// [`handle`] for a request whose parser has already checked that it
/// names its host once (the proxy's own HTTP/1.1 loop counts the `Host`
/// lines as it builds the header map, sparing a hashed lookup here).
pub(crate) async fn handle_with_one_host(
    proxy: &Ctx,
    req: Request<ProxyBody>,
    downstream: Downstream,
) -> Response<ProxyBody> {
    let peer = downstream.peer;
    let (parts, body) = req.into_parts();
    // One table for the whole request, whatever a reload does meanwhile.
    let table = proxy.table.load_full();
    let mut line = Pending::begin(&proxy.access_log, &parts, peer);
    if let (Some(trail), Some(cert)) = (line.trail.as_mut(), &downstream.client_cert) {
        trail.client_cert = cert.subject.clone();
    }
    let Some(index) = table.routes.iter().position(|r| r.matches(&parts)) else {
        return refuse_unrouted(proxy, line, Reason::NoRoute);
    };
    let Some(route) = table.routes.get(index) else {
        return Rejection::new(Reason::NoRoute, None).response();
    };
    if line.trail.is_some() {
        let cluster = table.config.routes.get(index).map(|r| r.cluster.as_str());
        line.route = Some((&route.name, cluster.unwrap_or("")));
    }
    let mut response = forward(proxy, route, parts, body, downstream, &mut line.trail).await;
    if proxy.settings.envoy_compat {
        mark_overloaded(&mut response);
    }
    proxy.metrics.observe(table.counters.get(index), &response);
    line.answered(&response);
    response
}

/// The refusal of a request no route took (or none may take), counted.
fn refuse_unrouted(proxy: &Ctx, line: Pending<'_>, reason: Reason) -> Response<ProxyBody> {
    let response = Rejection::new(reason, None).response();
    proxy.metrics.observe(None, &response);
    line.answered(&response);
    response
}

/// Whether the request names its host unambiguously (RFC 9112 §3.2): an
/// HTTP/1.1 request must carry exactly one `Host`, an HTTP/1.0 or HTTP/2
/// one at most one. Two `Host` lines are refused rather than one picked:
/// routes match on one, and the upstream (or a cache in front of it) may
/// read the other — the disagreement request smuggling and cache
/// poisoning are built on.
fn has_one_host(headers: &http::HeaderMap, version: http::Version) -> bool {
    let mut hosts = headers.get_all(http::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), None) => true,
        (None, _) => version != http::Version::HTTP_11,
        (Some(_), Some(_)) => false,
    }
}

/// Sends one request along `route`, then lets the route's fallback
/// replace a refusal or failure.
async fn forward(
    proxy: &Ctx,
    route: &Route,
    mut parts: http::request::Parts,
    body: ProxyBody,
    downstream: Downstream,
    trail: &mut Option<Trail>,
) -> Response<ProxyBody> {
    let clock = TokioClock;
    let incoming = match route.timeout.honour_incoming {
        true => Deadline::from_headers(&parts.headers, &clock),
        false => None,
    };
    let own = route.timeout.overall.map(|d| Deadline::after(&clock, d));
    // The default limit of a route that sets none guards the request but
    // is not forwarded: upstreams see a deadline only when the client or
    // the route set one (then cut to the default, which the proxy keeps).
    let default_limit = own.is_none() && !route.timeout.unlimited;
    let (deadline, default_guard) = match (incoming, default_limit) {
        (Some(incoming), true) => {
            let default = Deadline::after(&clock, DEFAULT_OVERALL);
            (Deadline::earliest(Some(incoming), Some(default)), false)
        }
        (incoming, default_limit) => (Deadline::earliest(incoming, own), default_limit),
    };
    // Only a request with hop-by-hop headers can ask for an upgrade; the
    // others (nearly all) pay one pass over their header names.
    let upgrade = match has_hop_by_hop(&parts.headers) {
        true => {
            let upgrade = route.upgrade_of(&parts);
            strip_hop_by_hop(&mut parts.headers);
            upgrade
        }
        false => None,
    };
    if let Some(protocols) = &upgrade {
        let headers = &mut parts.headers;
        headers.insert(header::UPGRADE, protocols.clone());
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    let peer = downstream.peer;
    if let Some(cert) = &downstream.client_cert {
        cert.apply(&mut parts.headers);
    }
    let (body, client_body) = watch(body);
    let parts = Outbound {
        parts,
        forwarded: downstream.forwarded,
        client_body,
        upgrade: upgrade.is_some(),
    };
    let mut body = RequestBody::Once(Some(body));
    let response = protected(
        proxy,
        route,
        &parts,
        &mut body,
        (deadline, default_guard),
        peer,
        trail,
    )
    .await;
    fallback::apply(
        proxy,
        route,
        &parts,
        &mut body,
        Limits::lazy(deadline, default_guard),
        response,
        trail.as_mut(),
    )
    .await
}

/// The route's answer itself: rate limit, bulkhead, deadline, breaker,
/// then the retry loop.
async fn protected(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    (deadline, default_guard): (Option<Deadline>, bool),
    peer: SocketAddr,
    trail: &mut Option<Trail>,
) -> Response<ProxyBody> {
    let reject = |reason| Rejection::new(reason, Some(&route.name));
    if let Some(limit) = &route.guard.rate_limit
        && let Err(wait) = limit.check(parts, peer.ip())
    {
        return reject(Reason::RateLimited)
            .retry_after(Some(wait))
            .response();
    }
    let clock = TokioClock;
    let bulkhead = match &route.bulkhead {
        Some(b) => {
            // Without a queue (the default) a full bulkhead refuses at once,
            // for one CAS. With one, the request waits its turn (FIFO) for
            // at most `max_wait`, cut by its deadline: a slot that comes
            // after the caller gave up would serve nobody. The library's
            // queue decides in its first poll, so a free slot or a full
            // queue still answers without waiting.
            let admitted = match b.config().max_queue {
                0 => b.try_acquire_owned(),
                _ => {
                    let limit = deadline.map(|d| d.remaining(&clock));
                    b.acquire(Some(queue_timer()), limit).await
                }
            };
            match admitted {
                Ok(p) => Some(p),
                Err(_) => return reject(Reason::BulkheadFull).response(),
            }
        }
        None => None,
    };
    let start = tokio::time::Instant::now();
    // The default limit counts from here, on the reading just taken.
    let limits = Limits {
        deadline,
        guard: default_guard.then(|| start + DEFAULT_OVERALL),
    };
    if deadline.is_some_and(|d| d.is_expired(&clock)) {
        return reject(Reason::DeadlineExceeded).response();
    }
    // The cluster's limits, before the route breaker: a refusal here is the
    // proxy's own and takes no permit from it.
    let cluster_slot = match &route.overflow {
        Some(o) => match o.admit_request(limits.until()).await {
            Ok(slot) => Some(slot),
            Err(limit) => return overflow::refusal(route, limit).response(),
        },
        None => None,
    };
    let route_permit = match route.acquire_breaker(parts) {
        Ok(p) => p,
        Err(rejection) => return rejection.response(),
    };
    route.budget.deposit();
    let keep_body = route.may_retry(&parts.method)
        || route.may_hedge(&parts.method)
        || route
            .guard
            .fallback
            .as_ref()
            .is_some_and(|f| f.keeps_body());
    if keep_body && let Some(once) = body.for_try() {
        // Keeping the body waits for the client: within the deadline, so a
        // client that sends its body slowly cannot hold the route's permits.
        let read = read_for_replay(once, route.retry.max_buffered_body);
        let read = match deadline {
            Some(d) => tokio::time::timeout(d.remaining(&clock), read).await,
            None => Ok(read.await),
        };
        *body = match read {
            Ok(Ok(b)) => b,
            Err(_) => return reject(Reason::DeadlineExceeded).response(),
            // The client sent nothing for `client_body_timeout`.
            Ok(Err(e)) if e.is::<crate::http::body::ClientBodyTimedOut>() => {
                return reject(Reason::ClientTimeout).response();
            }
            // The client's own body could not be read (malformed chunks,
            // or the client went away): nothing was sent upstream.
            Ok(Err(_)) => return reject(Reason::ProtocolError).response(),
        };
    }
    let finish = Finish {
        shadow: route_permit.as_ref().and_then(|_| route.shadow_feed(parts)),
        route_permit,
        bulkhead,
        cluster_slot,
        start,
    };
    let mut retry_refused = None;
    let mut number = 1;
    let mut endpoints = TriedEndpoints::new();
    let mut previous = None;
    // The retry in flight's place among the cluster's `max_retries`.
    let mut _retry_slot = None;
    loop {
        // Each try sent (hedges included) is listed on the trail by the
        // code that sends it, with its own endpoint, outcome and time.
        let tried = hedge::try_maybe_hedged(
            proxy,
            route,
            parts,
            body,
            limits,
            &mut endpoints,
            trail.as_mut(),
        )
        .await;
        let outcome = tried.outcome();
        let again = retry_on::wants_retry(route, &tried)
            && number < route.retry.attempts
            && body.is_replayable()
            && (route.may_retry(&parts.method) || outcome.is_some_and(|o| o.never_sent()))
            && deadline.is_none_or(|d| !d.is_expired(&clock));
        // The cluster's `max_retries` first: a retry it refuses leaves the
        // budget untouched, and the answer stands (as the budget's refusal).
        let retry_slot = match (&route.overflow, again) {
            (Some(o), true) => o.admit_retry(),
            _ => Ok(None),
        };
        if again && retry_slot.is_err() {
            retry_refused = Some(Reason::UpstreamOverflow);
        } else if again {
            if route.budget.try_withdraw() {
                _retry_slot = retry_slot.ok().flatten();
                let settled = tried.settle();
                backoff::sleep_before_retry(route, number, &settled, limits).await;
                previous = Some(settled);
                number += 1;
                continue;
            }
            retry_refused = Some(Reason::BudgetExhausted);
        }
        // A retry that could not be sent leaves the last real answer.
        let tried = match (tried, previous) {
            (Tried::Refused(_), Some(previous)) => previous,
            (tried, _) => tried,
        };
        let mut response = finish.respond(route, tried);
        if let Some(reason) = retry_refused {
            response.headers_mut().insert(
                RETRY_REFUSED_HEADER,
                HeaderValue::from_static(reason.as_str()),
            );
        }
        return response;
    }
}

/// The timer a route's bulkhead queue sleeps on while a request waits for
/// a slot: one for the process, so a queued request allocates no timer
/// handle of its own.
fn queue_timer() -> &'static SharedTimer {
    static TIMER: OnceLock<SharedTimer> = OnceLock::new();
    TIMER.get_or_init(|| Arc::new(TokioTimer))
}

/// What the request holds until its answer has been sent.
struct Finish {
    route_permit: Option<OwnedPermit>,
    /// A rollout's shadow twin of the route breaker (or of the request's
    /// key's breaker), while one runs.
    shadow: Option<crate::table::shadow::ShadowFeed>,
    bulkhead: Option<tripline::bulkhead::OwnedBulkheadPermit>,
    /// The request's place in its cluster's overflow limits.
    cluster_slot: Option<crate::table::overflow::RequestSlot>,
    start: tokio::time::Instant,
}

impl Finish {
    /// Turns the last try into the client's answer, settling the route's
    /// breaker when the answer's body ends.
    fn respond(self, route: &Route, tried: Tried) -> Response<ProxyBody> {
        let Finish {
            route_permit,
            shadow,
            bulkhead,
            cluster_slot,
            start,
        } = self;
        // `None`: no verdict on the route, booked as ignored (the client's
        // own body broke, or the try's time ran out waiting for it; or the
        // proxy refused its own try: no endpoint could take it, or no time
        // was left — the failures behind an `NH` reached the route breaker
        // already, as the answers of the tries that opened the endpoints'
        // breakers).
        let latency = route.latency.as_ref().map(|l| l.request.clone());
        let settle_route = move |outcome: Option<EndpointOutcome>| {
            // One clock reading for the histogram and the breaker alike.
            let took = (route_permit.is_some() || latency.is_some()).then(|| elapsed(start));
            if let (Some(latency), Some(took)) = (&latency, took) {
                latency.observe(took);
            }
            if let (Some(permit), Some(took)) = (route_permit, took) {
                let outcome = match outcome {
                    None => Outcome::Ignored,
                    Some(EndpointOutcome::Ignored) => Outcome::Success,
                    Some(o) => o.breaker_outcome(),
                };
                permit.record(outcome, took);
                if let Some(shadow) = shadow {
                    shadow.observe(outcome, took);
                }
            }
            drop(bulkhead);
            drop(cluster_slot);
        };
        tried.into_response(route, settle_route)
    }
}

/// One try of `parts` on `route`'s cluster, as the client's answer (for
/// a fallback's secondary cluster: no retries, no route breaker).
pub(crate) async fn answer_from(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    limits: Limits,
    trail: Option<&mut Trail>,
) -> Response<ProxyBody> {
    let mut tried = TriedEndpoints::new();
    let tried = match trail {
        Some(trail) => {
            hedge::try_logged(proxy, route, parts, body, limits, &mut tried, trail).await
        }
        None => attempt::try_once(proxy, route, parts, body, limits, &mut tried).await,
    };
    tried.into_response(route, |_| {})
}

fn elapsed(start: tokio::time::Instant) -> Duration {
    tokio::time::Instant::now().saturating_duration_since(start)
}
