//! Explainable refusals: every request the proxy answers itself says why.
//!
//! A refused request gets `503 Service Unavailable` (`429` for rate
//! limits) with
//!
//! - `x-tripline-rejected`: the cause, one of the [`Reason`] names;
//! - `x-tripline-flag`: the cause's short flag, the same one metrics and
//!   logs use;
//! - `x-tripline-route` and, when a breaker refused, `x-tripline-breaker`;
//! - for `no_healthy_endpoint`, `x-tripline-cluster`, and in the body a
//!   `detail` saying what keeps each endpoint out ("cluster orders: 2
//!   endpoints, 2 with breaker open");
//! - `retry-after` (whole seconds, rounded up) when the wait is known;
//! - `cache-control: no-store`, so no cache serves the refusal later;
//! - a small JSON body saying the same for humans and scripts.
//!
//! Answers the proxy makes for a failed upstream (it could not connect,
//! the connection broke, a try timed out) are not refusals: they carry the
//! flag but no `x-tripline-rejected`, with the status a client expects from
//! a gateway (502, 503 or 504) and a JSON body `{"failed": ...}`.
//!
//! | flag | meaning | status | Envoy analogue | `x-envoy-overloaded` |
//! |---|---|---|---|---|
//! | CO | route, keyed route or endpoint breaker open | 503 | `UO` (upstream overflow, circuit breaking) | yes |
//! | HF | breaker half-open, probe slots taken | 503 | `UO` | yes |
//! | NH | no endpoint routable (all ejected or open) | 503 | `UH` (no healthy upstream) | yes |
//! | BF | bulkhead full | 503 | `UO` (max requests) | yes |
//! | BE | a retry was refused by the retry budget | last answer | `upstream_rq_retry_overflow` counter | yes |
//! | RL | rate limited (`rate_limit`) | 429 | `RL` (rate limited, local or global) | yes |
//! | DX | deadline already spent, or spent waiting for the client's body (charged to neither endpoint nor route) | 503 | `DT` (downstream duration timeout) | no |
//! | UF | upstream connect failure | 503 | `UF` | no |
//! | UT | upstream per-try timeout | 504 | `UT` | no |
//! | UC | upstream connection closed or reset mid-request | 502 | `UC` / `UR` | no |
//! | NR | no route matched | 404 | `NR` | no |
//! | DPE | malformed request: smuggling framing (`Content-Length` with `Transfer-Encoding`, two `Content-Length`s that differ, one that is not a number, a `Transfer-Encoding` other than `chunked`), a control character or a malformed line in the head, two `Host` lines or an HTTP/1.1 request without one, a body that broke while sent (charged to neither endpoint nor route); a request line longer than `[proxy] max_header_bytes` is answered `414`, a longer head `431`, with the same label | 400 | `DPE` (downstream protocol error) | no |
//! | CT | the client's body sent nothing for `[proxy] client_body_timeout` (charged to neither endpoint nor route) | 408 | `DT` (downstream timeout) | no |
//! | UO | a cluster's `limits` (requests, connections with their pending queue, retries) or an endpoint's `endpoint_limits` reached (charged to neither endpoint nor route) | 503 | `UO` (upstream overflow) | yes |
//! | DC | (access log only) the request was dropped before its answer: the client reset its HTTP/2 stream, or the drain's cut came | none (status 0 in the log) | `DC` (downstream connection termination) | no |
//!
//! The last column: with `[proxy] envoy_compat = true`, answers for these
//! causes also carry `x-envoy-overloaded: true`, as Envoy's own overload
//! answers do (see [`ENVOY_OVERLOADED_HEADER`]).
//!
//! A route with a `fallback` answers some of these causes with a degraded
//! answer instead, carrying `x-tripline-degraded: <cause>` (see
//! [`DEGRADED_HEADER`]).

mod envoy;
pub(crate) mod log;
mod response;

use std::fmt;

use http::HeaderName;

pub use envoy::ENVOY_OVERLOADED_HEADER;
pub(crate) use envoy::mark_overloaded;
pub use response::{
    BREAKER_HEADER, CLUSTER_HEADER, FLAG_HEADER, REJECTED_HEADER, RETRY_REFUSED_HEADER,
    ROUTE_HEADER, Rejection,
};

/// Names the cause a fallback answer replaces: a degraded answer, told
/// apart from a real one by clients and dashboards.
pub const DEGRADED_HEADER: HeaderName = HeaderName::from_static("x-tripline-degraded");

/// Why the proxy answered a request itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The route's or the chosen endpoint's breaker is open.
    CircuitOpen,
    /// The breaker is half-open and its probe slots are taken.
    HalfOpenFull,
    /// The route's bulkhead is full.
    BulkheadFull,
    /// A retry was due but the retry budget refused it.
    BudgetExhausted,
    /// The request exceeded the route's rate limit (answered 429 with the
    /// wait until a token is free in `Retry-After`).
    RateLimited,
    /// The request's deadline was spent before it could be sent.
    DeadlineExceeded,
    /// No endpoint of the cluster can take the request.
    NoHealthyEndpoint,
    /// The endpoint could not be connected to.
    UpstreamConnectFailure,
    /// The endpoint did not answer within the per-try timeout.
    UpstreamTimeout,
    /// The connection to the endpoint broke before a whole answer arrived.
    UpstreamReset,
    /// No route takes the request.
    NoRoute,
    /// The request is malformed: framing that can smuggle a second request
    /// (both `Content-Length` and `Transfer-Encoding`), a `Host` that is
    /// missing from an HTTP/1.1 request or given twice, or a body that
    /// broke while it was being sent (malformed chunks, the client gone).
    ProtocolError,
    /// The client's request body sent nothing for `[proxy]
    /// client_body_timeout`: the upload was given up (answered `408`).
    ClientTimeout,
    /// A cluster's overflow limit (`limits`: requests, connections and
    /// pending requests, retries) or an endpoint's (`endpoint_limits`)
    /// was reached: the proxy's own refusal, never an endpoint's failure.
    UpstreamOverflow,
}

impl Reason {
    /// Every reason, so metrics can create a series per flag up front.
    pub const ALL: [Reason; 14] = [
        Reason::CircuitOpen,
        Reason::HalfOpenFull,
        Reason::BulkheadFull,
        Reason::BudgetExhausted,
        Reason::RateLimited,
        Reason::DeadlineExceeded,
        Reason::NoHealthyEndpoint,
        Reason::UpstreamConnectFailure,
        Reason::UpstreamTimeout,
        Reason::UpstreamReset,
        Reason::NoRoute,
        Reason::ProtocolError,
        Reason::ClientTimeout,
        Reason::UpstreamOverflow,
    ];

    /// The snake_case name sent in `x-tripline-rejected`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::CircuitOpen => "circuit_open",
            Reason::HalfOpenFull => "half_open_full",
            Reason::BulkheadFull => "bulkhead_full",
            Reason::BudgetExhausted => "budget_exhausted",
            Reason::RateLimited => "rate_limited",
            Reason::DeadlineExceeded => "deadline_exceeded",
            Reason::NoHealthyEndpoint => "no_healthy_endpoint",
            Reason::UpstreamConnectFailure => "upstream_connect_failure",
            Reason::UpstreamTimeout => "upstream_timeout",
            Reason::UpstreamReset => "upstream_reset",
            Reason::NoRoute => "no_route",
            Reason::ProtocolError => "protocol_error",
            Reason::ClientTimeout => "client_timeout",
            Reason::UpstreamOverflow => "upstream_overflow",
        }
    }

    /// The short flag for metrics labels and logs (see the module table).
    pub const fn flag(self) -> &'static str {
        match self {
            Reason::CircuitOpen => "CO",
            Reason::HalfOpenFull => "HF",
            Reason::BulkheadFull => "BF",
            Reason::BudgetExhausted => "BE",
            Reason::RateLimited => "RL",
            Reason::DeadlineExceeded => "DX",
            Reason::NoHealthyEndpoint => "NH",
            Reason::UpstreamConnectFailure => "UF",
            Reason::UpstreamTimeout => "UT",
            Reason::UpstreamReset => "UC",
            Reason::NoRoute => "NR",
            Reason::ProtocolError => "DPE",
            Reason::ClientTimeout => "CT",
            Reason::UpstreamOverflow => "UO",
        }
    }

    /// The status the proxy answers with.
    pub const fn status(self) -> u16 {
        match self {
            Reason::RateLimited => 429,
            Reason::UpstreamTimeout => 504,
            Reason::UpstreamReset => 502,
            Reason::NoRoute => 404,
            Reason::ProtocolError => 400,
            Reason::ClientTimeout => 408,
            _ => 503,
        }
    }

    /// Whether the proxy refused without sending the request anywhere (as
    /// opposed to reporting an upstream's failure).
    pub const fn is_refusal(self) -> bool {
        !matches!(
            self,
            Reason::UpstreamConnectFailure | Reason::UpstreamTimeout | Reason::UpstreamReset
        )
    }

    /// Who refused a retry, from its `x-tripline-retry-refused` value:
    /// the cluster's `max_retries`, else the retry budget.
    pub fn of_retry_refused(value: &[u8]) -> Reason {
        if value == Reason::UpstreamOverflow.as_str().as_bytes() {
            Reason::UpstreamOverflow
        } else {
            Reason::BudgetExhausted
        }
    }

    /// A breaker refusal's reason from the breaker's state.
    pub fn from_rejected(rejected: &tripline::Rejected) -> Reason {
        if rejected.state() == tripline::State::HalfOpen {
            Reason::HalfOpenFull
        } else {
            Reason::CircuitOpen
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
