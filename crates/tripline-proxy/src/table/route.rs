//! Routes at run time: matching a request, and the library's policies
//! that protect it.

use std::sync::Arc;

use http::request::Parts;
use http::{HeaderName, HeaderValue, Method};
use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::bulkhead::Bulkhead;
use tripline::clock::SharedClock;
use tripline::cluster::{Cluster, EndpointOutcome};

use crate::config::{ConfigError, RetrySection, RouteSection, TimeoutSection};
use crate::http::method::is_idempotent;
use crate::table::guard::Guard;
use crate::upstream::Upstream;

/// One route, built from its config section.
pub(crate) struct Route {
    pub(crate) name: Arc<str>,
    matcher: Matcher,
    pub(crate) cluster: Cluster,
    /// The client of the cluster's endpoints (its scheme, TLS and protocol).
    pub(crate) upstream: Upstream,
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) bulkhead: Option<Bulkhead>,
    pub(crate) budget: RetryBudget,
    pub(crate) retry: RetrySection,
    /// The parsed `retry.retry_on`; `None` retries the tries counted failed.
    pub(crate) retry_on: Option<crate::config::RetryOn>,
    pub(crate) timeout: TimeoutSection,
    /// Indexed by status code: whether it is a failure.
    failure: Box<[bool; 600]>,
    /// Rate limit, keyed breakers, hedging, fallback, gRPC classification.
    pub(crate) guard: Guard,
    /// The protocols clients may upgrade to, lower-cased.
    upgrades: Box<[String]>,
    /// The applier of pushed parameters, when the proxy has a config
    /// source: the hook its shadow twins are fed through (see
    /// [`shadow`](crate::table::shadow)). Set when the table is built.
    pub(crate) shadow: Option<tripline_config::Applier>,
    /// The cluster's overflow limits, shared by every route to it; `None`
    /// when it sets none (one branch on the request path). Set when the
    /// table is built.
    pub(crate) overflow: Option<Arc<crate::table::overflow::Overflow>>,
    /// The route's latency histograms (its requests, its cluster's tries);
    /// set when the table is built (`None` on a fallback's secondary).
    pub(crate) latency: Option<crate::table::latency::RouteLatency>,
}

/// A route's match, parsed once.
struct Matcher {
    host: Option<String>,
    path_prefix: Option<String>,
    method: Option<Method>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Route {
    /// Builds the route's policies on `clock`; `at` locates it in the file.
    pub(crate) fn build(
        at: &str,
        section: &RouteSection,
        cluster: Cluster,
        upstream: Upstream,
        clock: &SharedClock,
    ) -> Result<Route, ConfigError> {
        let invalid = |field: &str, e: &dyn std::fmt::Display| {
            ConfigError::invalid(format!("{at}.{field}"), e.to_string())
        };
        let breaker = match &section.breaker {
            // With `breaker_key` the breaker is the template of a keyed family.
            Some(config) if section.breaker_key.is_none() => {
                let mut config = config.clone();
                if let Some(name) = section.breaker_name() {
                    config.name = name.to_string();
                }
                let b = CircuitBreaker::builder()
                    .config(config)
                    .clock(clock.clone())
                    .build();
                Some(b.map_err(|e| invalid("breaker", &e))?)
            }
            _ => None,
        };
        let bulkhead = match &section.bulkhead {
            Some(c) => Some(Bulkhead::try_new(c.clone()).map_err(|e| invalid("bulkhead", &e))?),
            None => None,
        };
        let budget = RetryBudget::with_clock(section.retry.budget.clone(), clock.clone())
            .map_err(|e| invalid("retry.budget", &e))?;
        let m = &section.matches;
        let matcher = Matcher {
            host: m.host.as_ref().map(|h| h.to_ascii_lowercase()),
            path_prefix: m.path_prefix.clone(),
            method: match &m.method {
                Some(s) => Some(
                    Method::from_bytes(s.as_bytes()).map_err(|e| invalid("match.method", &e))?,
                ),
                None => None,
            },
            headers: m
                .headers
                .iter()
                .filter_map(|(k, v)| {
                    Some((
                        HeaderName::from_bytes(k.as_bytes()).ok()?,
                        HeaderValue::from_str(v).ok()?,
                    ))
                })
                .collect(),
        };
        let mut failure = Box::new([false; 600]);
        for s in &section.failure_statuses.0 {
            if let Some(slot) = failure.get_mut(usize::from(*s)) {
                *slot = true;
            }
        }
        Ok(Route {
            name: section.name.as_str().into(),
            matcher,
            cluster,
            upstream,
            breaker,
            bulkhead,
            budget,
            retry: section.retry.clone(),
            retry_on: match &section.retry.retry_on {
                Some(names) => Some(
                    crate::config::RetryOn::parse(names, &section.retry.retriable_status_codes)
                        .map_err(|e| invalid("retry.retry_on", &e))?,
                ),
                None => None,
            },
            timeout: section.timeout.clone(),
            failure,
            guard: Guard::build(at, section, clock)?,
            upgrades: section
                .upgrades
                .0
                .iter()
                .map(|p| p.to_ascii_lowercase())
                .collect(),
            shadow: None,
            overflow: None,
            latency: None,
        })
    }

    /// The `Upgrade` to pass on for `parts`, when the client asks to switch
    /// protocols (HTTP/1.1, `Connection: upgrade`) to protocols all of which
    /// the route allows; `None` for every other request, whose `Upgrade`
    /// goes with the other hop-by-hop headers. Every protocol listed must
    /// be allowed: the endpoint picks one, and a list with one allowed
    /// protocol must not let it pick `h2c`.
    pub(crate) fn upgrade_of(&self, parts: &Parts) -> Option<HeaderValue> {
        if parts.version != http::Version::HTTP_11 || self.upgrades.is_empty() {
            return None;
        }
        let upgrade = parts.headers.get(http::header::UPGRADE)?;
        let asked = parts
            .headers
            .get_all(http::header::CONNECTION)
            .iter()
            .flat_map(|v| v.as_bytes().split(|b| *b == b','))
            .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
        let mut protocols = upgrade.as_bytes().split(|b| *b == b',').map(|p| {
            let p = p.trim_ascii();
            p.split(|b| *b == b'/').next().unwrap_or(p)
        });
        let allowed = |p: &[u8]| {
            self.upgrades
                .iter()
                .any(|u| p.eq_ignore_ascii_case(u.as_bytes()))
        };
        (asked && protocols.all(allowed)).then(|| upgrade.clone())
    }

    /// Whether the route takes the request.
    pub(crate) fn matches(&self, parts: &Parts) -> bool {
        let m = &self.matcher;
        if let Some(method) = &m.method
            && parts.method != *method
        {
            return false;
        }
        if let Some(prefix) = &m.path_prefix
            && !parts.uri.path().starts_with(prefix.as_str())
        {
            return false;
        }
        if let Some(host) = &m.host {
            let given = parts
                .uri
                .host()
                .or_else(|| parts.headers.get(http::header::HOST)?.to_str().ok())
                .map(|h| {
                    h.rsplit_once(':').map_or(h, |(name, port)| {
                        if port.bytes().all(|b| b.is_ascii_digit()) {
                            name
                        } else {
                            h
                        }
                    })
                });
            if !given.is_some_and(|g| g.eq_ignore_ascii_case(host)) {
                return false;
            }
        }
        m.headers
            .iter()
            .all(|(name, value)| parts.headers.get(name) == Some(value))
    }

    /// How an upstream status counts: a configured failure status is a
    /// gateway failure (502–504) or an upstream failure; anything else —
    /// 4xx included — is a success: the endpoint answered.
    pub(crate) fn classify(&self, status: u16) -> EndpointOutcome {
        if !self
            .failure
            .get(usize::from(status))
            .copied()
            .unwrap_or(false)
        {
            return EndpointOutcome::Success;
        }
        match status {
            502..=504 => EndpointOutcome::GatewayFailure,
            _ => EndpointOutcome::UpstreamFailure,
        }
    }

    /// Whether a request with `method` may be sent more than once.
    pub(crate) fn may_retry(&self, method: &Method) -> bool {
        self.retry.attempts > 1 && (self.retry.retryable || is_idempotent(method))
    }

    /// Whether a request with `method` may be hedged (sent to a second
    /// endpoint while the first try is pending).
    pub(crate) fn may_hedge(&self, method: &Method) -> bool {
        self.guard.hedge.is_some() && (self.retry.retryable || is_idempotent(method))
    }
}
