//! Envoy compatibility: `x-envoy-overloaded` on the proxy's own overload
//! refusals.
//!
//! Clients, SDKs and meshes written against Envoy read
//! `x-envoy-overloaded: true` as "the proxy shed this request, not the
//! service": do not count it against the service, back off. With
//! `[proxy] envoy_compat = true` the proxy adds it to every answer it
//! makes because something is overloaded — an open or probing breaker, a
//! full bulkhead, a rate limit, no healthy endpoint — and to an upstream's
//! answer whose retry the budget refused. Not to upstream failures
//! (`UF`, `UT`, `UC`), a spent deadline or a bad request: those are not
//! overload.

use http::{HeaderName, HeaderValue, Response};

use super::{REJECTED_HEADER, RETRY_REFUSED_HEADER, Reason};

/// Envoy's header for answers the proxy shed under overload.
pub const ENVOY_OVERLOADED_HEADER: HeaderName = HeaderName::from_static("x-envoy-overloaded");

impl Reason {
    /// Whether the reason is the proxy shedding load (Envoy sets
    /// `x-envoy-overloaded` for these).
    pub const fn is_overload(self) -> bool {
        matches!(
            self,
            Reason::CircuitOpen
                | Reason::HalfOpenFull
                | Reason::BulkheadFull
                | Reason::BudgetExhausted
                | Reason::RateLimited
                | Reason::NoHealthyEndpoint
                | Reason::UpstreamOverflow
        )
    }
}

/// Adds `x-envoy-overloaded: true` to `response` if it is an overload
/// refusal, or carries a budget-refused retry.
pub(crate) fn mark_overloaded<B>(response: &mut Response<B>) {
    let headers = response.headers();
    let refused = headers
        .get(REJECTED_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Reason::ALL.into_iter().find(|r| r.as_str() == v))
        .is_some_and(Reason::is_overload);
    if refused || headers.contains_key(RETRY_REFUSED_HEADER) {
        response
            .headers_mut()
            .insert(ENVOY_OVERLOADED_HEADER, HeaderValue::from_static("true"));
    }
}
