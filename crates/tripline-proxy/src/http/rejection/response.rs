//! The answer the proxy sends for a [`Rejection`](super::Rejection).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode, header};

use super::Reason;
use crate::http::body::{ProxyBody, full};

/// The cause of a refusal, by [`Reason::as_str`].
pub const REJECTED_HEADER: HeaderName = HeaderName::from_static("x-tripline-rejected");
/// The cause's short flag ([`Reason::flag`]).
pub const FLAG_HEADER: HeaderName = HeaderName::from_static("x-tripline-flag");
/// The route that took the request.
pub const ROUTE_HEADER: HeaderName = HeaderName::from_static("x-tripline-route");
/// The breaker that refused it.
pub const BREAKER_HEADER: HeaderName = HeaderName::from_static("x-tripline-breaker");
/// The cluster a `no_healthy_endpoint` refusal is about.
pub const CLUSTER_HEADER: HeaderName = HeaderName::from_static("x-tripline-cluster");
/// On an upstream's answer: a retry was due and refused (`budget_exhausted`).
pub const RETRY_REFUSED_HEADER: HeaderName = HeaderName::from_static("x-tripline-retry-refused");

/// Everything a refusal says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Why.
    pub reason: Reason,
    /// The route, if one took the request.
    pub route: Option<String>,
    /// The breaker that refused, if one did (the route's name, or
    /// `cluster:endpoint` for an endpoint's breaker).
    pub breaker: Option<String>,
    /// When a retry may succeed, if known.
    pub retry_after: Option<Duration>,
    /// The cluster that had no endpoint for the request
    /// (`no_healthy_endpoint`).
    pub cluster: Option<String>,
    /// Why, for a person: e.g. "cluster orders: 2 endpoints, 2 with
    /// breaker open". Built only on the refusal's path.
    pub detail: Option<String>,
}

impl Rejection {
    /// A rejection for `reason` on `route`.
    pub fn new(reason: Reason, route: Option<&str>) -> Self {
        Rejection {
            reason,
            route: route.map(str::to_owned),
            breaker: None,
            retry_after: None,
            cluster: None,
            detail: None,
        }
    }

    /// Names the cluster the refusal is about.
    pub fn cluster(mut self, name: &str) -> Self {
        self.cluster = Some(name.to_owned());
        self
    }

    /// Says why, for a person.
    pub fn detail(mut self, text: String) -> Self {
        self.detail = Some(text);
        self
    }

    /// Names the breaker that refused.
    pub fn breaker(mut self, name: &str) -> Self {
        self.breaker = Some(name.to_owned());
        self
    }

    /// Sets the known wait.
    pub fn retry_after(mut self, wait: Option<Duration>) -> Self {
        self.retry_after = wait;
        self
    }

    /// The JSON body: `{"rejected":"circuit_open","flag":"CO",...}` for a
    /// refusal, `{"failed":"upstream_timeout","flag":"UT",...}` for an
    /// upstream's failure.
    pub fn json(&self) -> String {
        let key = if self.reason.is_refusal() {
            "rejected"
        } else {
            "failed"
        };
        let mut body = serde_json::json!({
            key: self.reason.as_str(),
            "flag": self.reason.flag(),
            "status": self.reason.status(),
        });
        if let Some(route) = &self.route {
            body["route"] = route.as_str().into();
        }
        if let Some(breaker) = &self.breaker {
            body["breaker"] = breaker.as_str().into();
        }
        if let Some(cluster) = &self.cluster {
            body["cluster"] = cluster.as_str().into();
        }
        if let Some(detail) = &self.detail {
            body["detail"] = detail.as_str().into();
        }
        if let Some(wait) = self.retry_after {
            body["retry_after_ms"] = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).into();
        }
        let mut text = body.to_string();
        text.push('\n');
        text
    }

    /// The whole response.
    pub fn response(&self) -> Response<ProxyBody> {
        let mut response = Response::new(full(Bytes::from(self.json())));
        *response.status_mut() =
            StatusCode::from_u16(self.reason.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let headers = response.headers_mut();
        if self.reason.is_refusal() {
            headers.insert(
                REJECTED_HEADER,
                HeaderValue::from_static(self.reason.as_str()),
            );
        }
        headers.insert(FLAG_HEADER, HeaderValue::from_static(self.reason.flag()));
        let named = [
            (ROUTE_HEADER, &self.route),
            (BREAKER_HEADER, &self.breaker),
            (CLUSTER_HEADER, &self.cluster),
        ];
        for (name, value) in named {
            if let Some(v) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, v);
            }
        }
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: a client that waits exactly this
            // long must not arrive before the breaker lets it through.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
