//! A route's request-path protections beyond breakers and retries: rate
//! limits, per-key breakers, hedging, fallback answers and gRPC status
//! classification.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tripline::registry::OverflowPolicy;

/// A token-bucket rate limit on a route (GCRA, by the `governor` crate).
///
/// ```toml
/// rate_limit = { per_second = 100, burst = 20, key = "header:x-tenant" }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    /// Sustained requests a second per bucket, ≥ 1.
    pub per_second: u32,
    /// Requests a bucket lets through at once after being idle, ≥ 1; also
    /// how many the first second may take.
    pub burst: u32,
    /// What a bucket is per: the whole route, each client address, or each
    /// value of a request header.
    #[serde(default)]
    pub key: RateLimitKey,
    /// Most keys tracked at once (keyed limits only), ≥ 1: bounds the
    /// limiter's memory whatever the key's cardinality. Keys whose bucket
    /// has refilled are dropped once per refill period; while the table
    /// is still full, every keyed request is counted against one shared
    /// overflow bucket (coarser, never unlimited).
    #[serde(default = "default_max_keys")]
    pub max_keys: usize,
}

fn default_max_keys() -> usize {
    10_000
}

/// What a rate limit's buckets are per: written `"route"`, `"client_ip"`
/// or `"header:<name>"`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RateLimitKey {
    /// One bucket for the whole route.
    #[default]
    Route,
    /// One bucket per client IP address (the TCP peer).
    ClientIp,
    /// One bucket per value of this request header (lowercase); requests
    /// without it share one bucket.
    Header(String),
}

impl TryFrom<String> for RateLimitKey {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        match s.as_str() {
            "route" => Ok(RateLimitKey::Route),
            "client_ip" => Ok(RateLimitKey::ClientIp),
            _ => match s.strip_prefix("header:") {
                Some(name) if http::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                    Ok(RateLimitKey::Header(name.to_ascii_lowercase()))
                }
                _ => Err(format!(
                    "rate_limit.key must be \"route\", \"client_ip\" or \"header:<name>\", got {s:?}"
                )),
            },
        }
    }
}

impl From<RateLimitKey> for String {
    fn from(k: RateLimitKey) -> String {
        k.to_string()
    }
}

impl fmt::Display for RateLimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimitKey::Route => f.write_str("route"),
            RateLimitKey::ClientIp => f.write_str("client_ip"),
            RateLimitKey::Header(h) => write!(f, "header:{h}"),
        }
    }
}

/// One route breaker per value of a request header, from a bounded
/// breaker family; the route's `breaker` is the family's template.
///
/// ```toml
/// breaker_key = { header = "x-tenant", max_breakers = 1000 }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerKeySection {
    /// The header whose value picks the breaker; requests without it
    /// share one breaker, named `<breaker>:(none)`.
    pub header: String,
    /// Most breakers at once, ≥ 1 (the library's `max_breakers`).
    #[serde(default = "default_max_keys")]
    pub max_breakers: usize,
    /// What a new key gets once `max_breakers` exist: a shared overflow
    /// breaker (default) or a refusal (`"reject"`, answered
    /// `circuit_open` naming `<breaker>:overflow`).
    #[serde(default)]
    pub overflow: OverflowPolicy,
    /// A closed breaker idle this long is dropped (≥ 1 s); absent: 10 min.
    #[serde(default, with = "tripline::clock::duration_serde::option")]
    pub idle_ttl: Option<Duration>,
}

/// Hedging: when the first try has no response headers after `delay`,
/// the same request goes to another endpoint and the first good answer
/// wins.
///
/// ```toml
/// hedge = { delay = "50ms", max_extra = 1 }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeSection {
    /// How long the first try may go without response headers before a
    /// hedge is sent, > 0.
    #[serde(with = "tripline::clock::duration_serde")]
    pub delay: Duration,
    /// Hedges at most per request, 1..=10 (each paid from the retry budget).
    #[serde(default = "one")]
    pub max_extra: u32,
}

fn one() -> u32 {
    1
}

/// What the proxy answers instead of a refusal or a failed upstream: a
/// fixed answer, or the same request to a secondary cluster. Every
/// fallback answer carries `x-tripline-degraded: <cause replaced>`.
///
/// ```toml
/// fallback = { status = 200, body = "[]", content_type = "application/json" }
/// fallback = { cluster = "secondary", on = ["circuit_open", "upstream_failure"] }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackSection {
    /// The fixed answer's status (100..=599); exactly one of `status` and
    /// `cluster` is given.
    #[serde(default)]
    pub status: Option<u16>,
    /// The fixed answer's body.
    #[serde(default)]
    pub body: String,
    /// The fixed answer's `content-type`; absent: none sent.
    #[serde(default)]
    pub content_type: Option<String>,
    /// A secondary cluster (a key of `[clusters]`) that gets the request
    /// instead.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The causes a fallback replaces: refusal names (`circuit_open`,
    /// `no_healthy_endpoint`, …), upstream failure names
    /// (`upstream_timeout`, …) and `upstream_failure` (an upstream answer
    /// with a failure status).
    #[serde(default = "default_fallback_causes")]
    pub on: Vec<String>,
}

/// The cause name for an upstream answer whose status is a failure.
pub const UPSTREAM_FAILURE: &str = "upstream_failure";

/// Every cause a fallback may replace.
pub(crate) const FALLBACK_CAUSES: [&str; 11] = [
    "circuit_open",
    "half_open_full",
    "bulkhead_full",
    "upstream_overflow",
    "rate_limited",
    "deadline_exceeded",
    "no_healthy_endpoint",
    "upstream_connect_failure",
    "upstream_timeout",
    "upstream_reset",
    UPSTREAM_FAILURE,
];

/// Overload refusals and upstream failures; not `rate_limited` nor
/// `deadline_exceeded`: answering those with content would defeat them.
fn default_fallback_causes() -> Vec<String> {
    FALLBACK_CAUSES
        .iter()
        .filter(|c| !matches!(**c, "rate_limited" | "deadline_exceeded"))
        .map(|c| (*c).to_string())
        .collect()
}

/// gRPC statuses counted as failures: DEADLINE_EXCEEDED (4),
/// RESOURCE_EXHAUSTED (8), UNAVAILABLE (14).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GrpcFailureCodes(pub Vec<u32>);

impl Default for GrpcFailureCodes {
    fn default() -> Self {
        GrpcFailureCodes(vec![4, 8, 14])
    }
}
