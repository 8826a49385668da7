//! A route: which requests it takes, which cluster serves them, and the
//! protection around them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tripline::CircuitBreakerConfig;
use tripline::budget::RetryBudgetConfig;
use tripline::bulkhead::BulkheadConfig;

use super::protect::{
    BreakerKeySection, FallbackSection, GrpcFailureCodes, HedgeSection, RateLimitSection,
};

/// One route.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouteSection {
    /// Names the route in rejections (`x-tripline-route`), logs and its breaker.
    pub name: String,
    /// The cluster (a key of `[clusters]`) that serves the route.
    pub cluster: String,
    /// Which requests the route takes; empty matches everything.
    #[serde(rename = "match")]
    pub matches: RouteMatch,
    /// The route's own breaker, guarding the whole cluster as this route
    /// uses it (the library's breaker config; its name defaults to the
    /// route's). `None`: only the endpoints' breakers protect.
    pub breaker: Option<CircuitBreakerConfig>,
    /// Bounds concurrent requests on the route (`max_concurrent`). A
    /// request over the bound is refused (`bulkhead_full`) at once, or,
    /// with `max_queue` > 0, waits in a FIFO queue of that many places for
    /// a slot, at most `max_wait` and never past its deadline, and is
    /// refused the same way if none comes (or the queue is full). `None`:
    /// no bound.
    pub bulkhead: Option<BulkheadConfig>,
    /// Retries.
    pub retry: RetrySection,
    /// Per-try timeout and overall deadline.
    pub timeout: TimeoutSection,
    /// Upstream statuses that count as failures (for breakers, outlier
    /// detection and retries); every other status is a success.
    pub failure_statuses: FailureStatuses,
    /// A rate limit in front of everything else; `None`: unlimited.
    pub rate_limit: Option<RateLimitSection>,
    /// One route breaker per value of a header (the route's `breaker` is
    /// the template); `None`: one breaker for the route.
    pub breaker_key: Option<BreakerKeySection>,
    /// Hedged tries; only where retries would be allowed.
    pub hedge: Option<HedgeSection>,
    /// A fixed answer or a secondary cluster instead of a refusal or failure.
    pub fallback: Option<FallbackSection>,
    /// gRPC statuses (`grpc-status`) that count as failures.
    pub grpc_failure_codes: GrpcFailureCodes,
    /// Faults injected into the route's tries, for drills; absent: none.
    pub fault: Option<super::FaultSection>,
    /// The protocols an HTTP/1.1 client may switch its connection to
    /// (`Upgrade`, answered `101` by the endpoint), after which the proxy
    /// relays bytes both ways until either side closes. Any other `Upgrade`
    /// is removed as a hop-by-hop header and the request served as usual.
    pub upgrades: Upgrades,
}

/// The protocols a route lets its clients upgrade to, compared
/// case-insensitively with the protocol name in `Upgrade` (its version,
/// after `/`, is not compared).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Upgrades(pub Vec<String>);

impl Default for Upgrades {
    /// WebSocket only. Not `h2c`: an HTTP/2 connection opened through the
    /// proxy would carry requests the proxy never routes or sees (h2c
    /// smuggling), so it is refused in the config as well.
    fn default() -> Self {
        Upgrades(vec!["websocket".to_owned()])
    }
}

/// What a request must carry for a route to take it. Every field given
/// must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouteMatch {
    /// The `Host` (or HTTP/2 authority), without port, compared
    /// case-insensitively.
    pub host: Option<String>,
    /// A prefix of the path (`/api` takes `/api` and `/api/users`).
    pub path_prefix: Option<String>,
    /// The method (`GET`).
    pub method: Option<String>,
    /// Headers that must be present with exactly these values.
    pub headers: BTreeMap<String, String>,
}

/// When and how a failed request is tried again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySection {
    /// Tries in all, the first included: 1 never retries.
    pub attempts: u32,
    /// Also retry non-idempotent methods (POST, PATCH). Only for routes
    /// whose upstream deduplicates; otherwise only GET, HEAD, OPTIONS,
    /// TRACE, PUT and DELETE are retried, and a non-idempotent request
    /// only when its connection failed before it was sent and its body
    /// was kept anyway (the route hedges it or has a fallback cluster).
    pub retryable: bool,
    /// Request bodies up to this many bytes are kept to be replayed on a
    /// retry; a larger body is streamed once and never retried.
    pub max_buffered_body: usize,
    /// The retry budget shared by every request of the route: retries stay
    /// below this share of requests however the upstream fails.
    pub budget: RetryBudgetConfig,
    /// The back-off before the first retry is uniform in [0, `base`]; its
    /// cap doubles per retry up to `max` (Envoy's 25 ms and 250 ms). A
    /// `Retry-After` (in seconds) on the failed answer wins; the deadline
    /// bounds either wait.
    #[serde(with = "tripline::clock::duration_serde")]
    pub base: Duration,
    /// The cap of the back-off's doubling, at least `base`.
    #[serde(with = "tripline::clock::duration_serde")]
    pub max: Duration,
    /// The failed tries to retry, by Envoy's condition names (`5xx`,
    /// `gateway-error`, `connect-failure`, `reset`, `refused-stream`,
    /// `retriable-4xx`, `retriable-status-codes`, `grpc:unavailable`, …).
    /// Unset, a route retries every try its endpoint counts as failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<Vec<String>>,
    /// The statuses `retriable-status-codes` retries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retriable_status_codes: Vec<u16>,
}

impl Default for RetrySection {
    /// No retries; 64 KiB replay buffer; the library's default budget
    /// (20 % of requests plus 10 a second); Envoy's back-off.
    fn default() -> Self {
        RetrySection {
            attempts: 1,
            retryable: false,
            max_buffered_body: 64 * 1024,
            budget: RetryBudgetConfig::default(),
            base: Duration::from_millis(25),
            max: Duration::from_millis(250),
            retry_on: None,
            retriable_status_codes: Vec::new(),
        }
    }
}

/// Time limits of a request.
///
/// A route that sets no overall limit still has one: [`DEFAULT_OVERALL`]
/// (15 s, Envoy's route timeout), so a hung endpoint cannot hold a route's
/// requests — and its clients' connections — for ever. That default only
/// guards: unlike a limit the route sets, it is not forwarded upstream in
/// `tripline-timeout-ms`, so upstreams see what they saw before.
/// `timeout = "none"` (or `overall = "none"`) turns the limit off on
/// purpose; `tripline check` warns about such a route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "TimeoutTable")]
pub struct TimeoutSection {
    /// The limit of one try, until the upstream's response headers.
    pub per_try: Option<Duration>,
    /// The limit of the whole request, retries included, as the route
    /// sets it; `None`: not set (the default guards, see
    /// [`overall_in_force`](Self::overall_in_force)) or `"none"`.
    pub overall: Option<Duration>,
    /// `overall = "none"` (or `timeout = "none"`): no overall limit, not
    /// even the default.
    pub unlimited: bool,
    /// Honour an incoming `tripline-timeout-ms` (or `grpc-timeout`)
    /// header: the request's deadline is the earlier of it and `overall`,
    /// and the remaining budget — cut to the try's `per_try`, when that is
    /// shorter — is forwarded upstream in `tripline-timeout-ms`, and in
    /// `grpc-timeout` too for a gRPC request (one that came with
    /// `grpc-timeout`, or whose `content-type` is `application/grpc*`).
    /// A try cut short by the client's deadline is charged like any
    /// timeout — in a gRPC mesh nearly every client sends a deadline, and
    /// a hung endpoint must still trip its breaker — so a route facing
    /// clients it does not trust turns this off: a client asking for
    /// answers in a millisecond could otherwise trip it.
    pub honour_incoming: bool,
}

/// A route's overall limit when its config sets none.
pub const DEFAULT_OVERALL: Duration = Duration::from_secs(15);

impl Default for TimeoutSection {
    /// No limit set (the default overall guards), incoming deadlines
    /// honoured.
    fn default() -> Self {
        TimeoutSection::from(TimeoutTable::default())
    }
}

impl TimeoutSection {
    /// The overall limit that applies: the route's, else the default,
    /// else (`"none"`) nothing.
    pub fn overall_in_force(&self) -> Option<Duration> {
        match (self.overall, self.unlimited) {
            (Some(set), _) => Some(set),
            (None, false) => Some(DEFAULT_OVERALL),
            (None, true) => None,
        }
    }
}

/// The section as written: a table, or `"none"`.
#[derive(Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TimeoutTable {
    #[serde(with = "tripline::clock::duration_serde::option")]
    per_try: Option<Duration>,
    #[serde(with = "limit_or_none", skip_serializing_if = "Limit::is_unset")]
    overall: Limit,
    honour_incoming: bool,
}

impl Default for TimeoutTable {
    fn default() -> Self {
        TimeoutTable {
            per_try: None,
            overall: Limit::Unset,
            honour_incoming: true,
        }
    }
}

/// An overall limit as written: absent, a duration, or `"none"`.
#[derive(Clone, Copy, Default, PartialEq)]
enum Limit {
    #[default]
    Unset,
    Set(Duration),
    Unlimited,
}

impl Limit {
    fn is_unset(&self) -> bool {
        *self == Limit::Unset
    }
}

impl From<TimeoutTable> for TimeoutSection {
    fn from(t: TimeoutTable) -> Self {
        TimeoutSection {
            per_try: t.per_try,
            overall: match t.overall {
                Limit::Set(d) => Some(d),
                Limit::Unset | Limit::Unlimited => None,
            },
            unlimited: t.overall == Limit::Unlimited,
            honour_incoming: t.honour_incoming,
        }
    }
}

impl From<TimeoutSection> for TimeoutTable {
    fn from(t: TimeoutSection) -> Self {
        TimeoutTable {
            per_try: t.per_try,
            overall: match (t.overall, t.unlimited) {
                (Some(d), _) => Limit::Set(d),
                (None, true) => Limit::Unlimited,
                (None, false) => Limit::Unset,
            },
            honour_incoming: t.honour_incoming,
        }
    }
}

impl<'de> Deserialize<'de> for TimeoutSection {
    /// A table, or the word `"none"`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = TimeoutSection;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a table ({ per_try = "1s", overall = "5s" }) or "none""#)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TimeoutSection, E> {
                match v {
                    "none" => Ok(TimeoutSection {
                        unlimited: true,
                        ..TimeoutSection::default()
                    }),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<TimeoutSection, A::Error> {
                let table =
                    TimeoutTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(table.into())
            }
        }
        d.deserialize_any(Either)
    }
}

/// An overall limit: a duration, or `"none"` for no limit at all.
mod limit_or_none {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Limit;

    pub(super) fn serialize<S: Serializer>(limit: &Limit, s: S) -> Result<S::Ok, S::Error> {
        match limit {
            Limit::Set(d) => tripline::clock::duration_serde::serialize(d, s),
            Limit::Unlimited => s.serialize_str("none"),
            Limit::Unset => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Limit, D::Error> {
        match Option::<String>::deserialize(d)?.as_deref() {
            None => Ok(Limit::Unset),
            Some("none") => Ok(Limit::Unlimited),
            Some(text) => tripline::clock::duration_serde::parse(text)
                .map(Limit::Set)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Upstream statuses that are failures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FailureStatuses(pub Vec<u16>);

impl Default for FailureStatuses {
    /// Every 5xx except 501 (Not Implemented is an answer, not a fault).
    fn default() -> Self {
        FailureStatuses((500..600).filter(|s| *s != 501).collect())
    }
}

impl FailureStatuses {
    /// Whether `status` is a failure.
    pub fn contains(&self, status: u16) -> bool {
        self.0.contains(&status)
    }
}
