//! The metric families the exporter writes: stable names, documented here.
//!
//! Names are `<prefix>_<family>` (prefix `tripline` unless the
//! [builder](crate::ExporterBuilder::prefix) says otherwise); counters end in
//! `_total` on the wire. Labels are bounded by construction: a breaker's,
//! registry's, policy's or cluster's *name* (chosen by the program, not by
//! its traffic), and closed sets of states, outcomes, reasons and
//! detectors. Per-breaker series come at the source's [`Detail`]:
//! `Essential` (E) or `Full` (F, everything).
//!
//! | family | type | labels | detail | what |
//! |---|---|---|---|---|
//! | `breaker_state` | gauge | name, state | F | 1 for the breaker's state, 0 for the five others |
//! | `breaker_state_code` | gauge | name | E | 0 closed, 1 open, 2 half_open, 3 forced_open, 4 disabled, 5 metrics_only |
//! | `breaker_calls_total` | counter | name, outcome | E: successful, failed, rejected; F: also slow, ignored, cancelled, late | calls since the breaker was made |
//! | `breaker_failure_rate` | gauge | name | E | failure rate (0–1) of the live window |
//! | `breaker_slow_call_rate` | gauge | name | E | slow-call rate (0–1) of the live window, for breakers that detect slow calls |
//! | `breaker_transitions_total` | counter | name, from, to, reason | E | transitions since registration |
//! | `breaker_failure_rate_threshold`, `breaker_slow_call_rate_threshold` | gauge | name | F | configured thresholds (the slow one for breakers that detect slow calls) |
//! | `breaker_window_calls`, `breaker_minimum_calls` | gauge | name | F | window fill against `minimum_calls` |
//! | `breaker_time_in_state_seconds` | gauge | name | F | time since the current state began (breaker clock) |
//! | `breaker_probes_in_flight` | gauge | name | F | half-open probes admitted, unfinished |
//! | `breaker_probes_total` | counter | name, result | F | probes succeeded / failed |
//! | `breaker_probe_due` | gauge | name | F | 1 when open and the open duration has passed: the next call probes |
//! | `breaker_open_until_timestamp_seconds` | gauge | name | F | Unix time the open state ends; 0 when not open |
//! | `breaker_backoff_round` | gauge | name | F | consecutive failed probe rounds (the backoff step) |
//! | `breaker_config_version` | gauge | name | F | 0 at creation, +1 per reconfiguration |
//! | `breaker_max_half_open_duration_seconds` | gauge | name | F | the half-open backstop, when configured |
//! | `breaker_call_duration_seconds` | histogram | name | — | calls made through a [`TimedBreaker`](crate::TimedBreaker) |
//! | `registry_breakers` | gauge | family, state | always | breakers by closed / open / half_open / operator |
//! | `registry_max_breakers` | gauge | family | always | the registry's bound |
//! | `registry_breakers_created_total` | counter | family | always | breakers made |
//! | `registry_breakers_dropped_total` | counter | family, reason | always | evicted / removed |
//! | `registry_overflow_total` | counter | family, outcome | always | new keys served by the overflow breaker (shared) or refused |
//! | `retry_attempts_total`, `retry_retries_total` | counter | name | — | attempts (first included), retries |
//! | `retry_refusals_total` | counter | name, reason | — | wanted retries not made, by reason |
//! | `retry_budget_available` | gauge | name | — | retries the budget would grant now (its level) |
//! | `retry_budget_requests_total`, `retry_budget_withdrawals_total`, `retry_budget_refusals_total` | counter | name | — | deposits, granted, refused |
//! | `bulkhead_in_use`, `bulkhead_queued`, `bulkhead_max_concurrent` | gauge | name | — | occupancy and bound |
//! | `bulkhead_admitted_total`, `bulkhead_rejected_total` | counter | name | — | slots granted, calls refused |
//! | `throttle_drop_probability` | gauge | name | — | probability the next request is shed |
//! | `throttle_active` | gauge | name | — | 1 when enough traffic for the throttle to act |
//! | `throttle_requests_total`, `throttle_accepts_total`, `throttle_throttled_total` | counter | name | — | requests, backend accepts, shed locally |
//! | `cluster_endpoints`, `cluster_routable_endpoints` | gauge | cluster | — | endpoints, and those neither ejected nor unhealthy |
//! | `outlier_ejections_active` | gauge | cluster, detector | — | endpoints ejected now, by detector (`unknown`: ejected before registration) |
//! | `outlier_ejections_total` | counter | cluster, detector | — | ejections since registration |
//! | `outlier_detections_skipped_total` | counter | cluster, detector, reason | — | detections that did not eject (not_enforced / max_ejection_percent) |
//! | `outlier_panic_mode` | gauge | cluster | — | 1 in panic mode |
//! | `outlier_panic_entered_total` | counter | cluster | — | entries into panic mode since registration |
//! | `failback_queue_depth` | gauge | name | — | entries pending |
//! | `failback_oldest_entry_age_seconds` | gauge | name | — | age of the oldest pending entry; 0 when empty |
//! | `failback_submissions_total` | counter | name, outcome | — | delivered / queued / refused |
//! | `failback_deliveries_total` | counter | name, outcome | — | background delivered / retry_failed / gave_up |
//! | `exporter_skipped_duplicates` | gauge | — | — | breakers left out of the last scrape: another source exported the name |
//!
//! With [`compat`](crate::ExporterBuilder::compat) on, every exported breaker
//! also appears under the names dashboards of other libraries query (no
//! prefix; see [`COMPAT`]): `circuit_breaker_state` (0 closed, 1 open or
//! forced open, 2 half-open; disabled and metrics-only read 0),
//! `circuit_breaker_requests_total{result=success|failure|short_circuited}`,
//! and Resilience4j's Micrometer names — `resilience4j_circuitbreaker_state`,
//! `_calls_seconds` (count by kind; the sum is real only for a
//! [`TimedBreaker`](crate::TimedBreaker), else 0), `_not_permitted_calls_total`,
//! `_failure_rate` and `_slow_call_rate` (percent, −1 below the minimum
//! number of calls, as Resilience4j reports), `_buffered_calls`.

use crate::source::Detail;

/// A Prometheus metric type.
///
/// ```
/// use tripline_prometheus::names::MetricKind;
/// assert_ne!(MetricKind::Counter, MetricKind::Gauge);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up (resets with the process); exposed with `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

/// One metric family: its name after the prefix, type, help and labels.
///
/// ```
/// use tripline_prometheus::names::{FAMILIES, MetricKind};
/// let calls = FAMILIES.iter().find(|f| f.name == "breaker_calls").unwrap();
/// assert_eq!(calls.kind, MetricKind::Counter);
/// assert_eq!(calls.exposed("tripline"), "tripline_breaker_calls_total");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricFamily {
    /// The name after `<prefix>_` (for [`COMPAT`], the whole name), without
    /// the `_total` a counter gets on the wire.
    pub name: &'static str,
    /// The type.
    pub kind: MetricKind,
    /// The help text.
    pub help: &'static str,
    /// The labels besides the exporter's constant labels.
    pub labels: &'static [&'static str],
    /// The least per-breaker detail that emits it (`None`: not per breaker).
    pub detail: Option<Detail>,
}

impl MetricFamily {
    const fn new(
        name: &'static str,
        kind: MetricKind,
        labels: &'static [&'static str],
        detail: Option<Detail>,
        help: &'static str,
    ) -> Self {
        MetricFamily {
            name,
            kind,
            help,
            labels,
            detail,
        }
    }

    /// The name as written on the wire (with `prefix`; a counter's `_total`).
    pub fn exposed(&self, prefix: &str) -> String {
        let total = if self.kind == MetricKind::Counter {
            "_total"
        } else {
            ""
        };
        if prefix.is_empty() {
            format!("{}{total}", self.name)
        } else {
            format!("{prefix}_{}{total}", self.name)
        }
    }
}

#[rustfmt::skip]
pub(crate) mod f {
    //! The families, one constant each, in the order they are written.
    use super::MetricFamily as M;
    use super::MetricKind::{Counter as C, Gauge as G, Histogram as H};
    use crate::source::Detail::{Essential as E, Full as F};

    const N: &[&str] = &["name"];
    pub const STATE: M = M::new("breaker_state", G, &["name", "state"], Some(F), "1 for the breaker's current state, 0 for the others");
    pub const STATE_CODE: M = M::new("breaker_state_code", G, N, Some(E), "Breaker state: 0 closed, 1 open, 2 half_open, 3 forced_open, 4 disabled, 5 metrics_only");
    pub const CALLS: M = M::new("breaker_calls", C, &["name", "outcome"], Some(E), "Calls by outcome; successful, failed, ignored, rejected and cancelled are disjoint, slow and late are part of successful plus failed");
    pub const FAILURE_RATE: M = M::new("breaker_failure_rate", G, N, Some(E), "Failure rate (0-1) of the live window");
    pub const SLOW_RATE: M = M::new("breaker_slow_call_rate", G, N, Some(E), "Slow-call rate (0-1) of the live window, for breakers that detect slow calls");
    pub const TRANSITIONS: M = M::new("breaker_transitions", C, &["name", "from", "to", "reason"], Some(E), "State transitions since the breaker was registered with the exporter");
    pub const FAILURE_THRESHOLD: M = M::new("breaker_failure_rate_threshold", G, N, Some(F), "Configured failure rate (0-1) that trips the breaker");
    pub const SLOW_THRESHOLD: M = M::new("breaker_slow_call_rate_threshold", G, N, Some(F), "Configured slow-call rate (0-1) that trips the breaker");
    pub const WINDOW_CALLS: M = M::new("breaker_window_calls", G, N, Some(F), "Calls in the live window; rates count from minimum_calls on");
    pub const MINIMUM_CALLS: M = M::new("breaker_minimum_calls", G, N, Some(F), "Calls the window needs before its rates can trip the breaker");
    pub const TIME_IN_STATE: M = M::new("breaker_time_in_state_seconds", G, N, Some(F), "Seconds since the breaker entered its current state, on the breaker's clock");
    pub const PROBES_IN_FLIGHT: M = M::new("breaker_probes_in_flight", G, N, Some(F), "Half-open probes admitted and not yet finished");
    pub const PROBES: M = M::new("breaker_probes", C, &["name", "result"], Some(F), "Half-open probes by result (succeeded, failed)");
    pub const PROBE_DUE: M = M::new("breaker_probe_due", G, N, Some(F), "1 when the breaker is open and its open duration has passed, so the next call probes");
    pub const OPEN_UNTIL: M = M::new("breaker_open_until_timestamp_seconds", G, N, Some(F), "Unix time at which the current open state ends; 0 when not open");
    pub const BACKOFF_ROUND: M = M::new("breaker_backoff_round", G, N, Some(F), "Consecutive failed probe rounds: the step of the open-duration backoff");
    pub const CONFIG_VERSION: M = M::new("breaker_config_version", G, N, Some(F), "Version of the breaker's config: 0 at creation, +1 per reconfiguration");
    pub const MAX_HALF_OPEN: M = M::new("breaker_max_half_open_duration_seconds", G, N, Some(F), "Longest the breaker may stay half-open, when configured");
    pub const CALL_DURATION: M = M::new("breaker_call_duration_seconds", H, N, None, "Duration of calls made through a TimedBreaker, on the breaker's clock");
    const FAM: &[&str] = &["family"];
    pub const REG_BREAKERS: M = M::new("registry_breakers", G, &["family", "state"], None, "Breakers of the registry by state (closed, open, half_open, operator)");
    pub const REG_MAX: M = M::new("registry_max_breakers", G, FAM, None, "Most breakers the registry holds");
    pub const REG_CREATED: M = M::new("registry_breakers_created", C, FAM, None, "Breakers the registry made");
    pub const REG_DROPPED: M = M::new("registry_breakers_dropped", C, &["family", "reason"], None, "Breakers the registry dropped, by reason (evicted, removed)");
    pub const REG_OVERFLOW: M = M::new("registry_overflow", C, &["family", "outcome"], None, "Lookups of new keys in a full registry (shared: given the overflow breaker; refused)");
    pub const RETRY_ATTEMPTS: M = M::new("retry_attempts", C, N, None, "Attempts made, first attempts included");
    pub const RETRY_RETRIES: M = M::new("retry_retries", C, N, None, "Retries made (attempts after the first)");
    pub const RETRY_REFUSALS: M = M::new("retry_refusals", C, &["name", "reason"], None, "Wanted retries not made, by reason");
    pub const BUDGET_AVAILABLE: M = M::new("retry_budget_available", G, N, None, "Retries the budget would grant now");
    pub const BUDGET_REQUESTS: M = M::new("retry_budget_requests", C, N, None, "Requests deposited into the budget");
    pub const BUDGET_WITHDRAWALS: M = M::new("retry_budget_withdrawals", C, N, None, "Retries (and hedges) the budget granted");
    pub const BUDGET_REFUSALS: M = M::new("retry_budget_refusals", C, N, None, "Retries (and hedges) refused because the budget was spent");
    pub const BULKHEAD_IN_USE: M = M::new("bulkhead_in_use", G, N, None, "Calls holding a bulkhead slot now");
    pub const BULKHEAD_QUEUED: M = M::new("bulkhead_queued", G, N, None, "Calls waiting for a bulkhead slot now");
    pub const BULKHEAD_MAX: M = M::new("bulkhead_max_concurrent", G, N, None, "Slots of the bulkhead");
    pub const BULKHEAD_ADMITTED: M = M::new("bulkhead_admitted", C, N, None, "Bulkhead slots granted");
    pub const BULKHEAD_REJECTED: M = M::new("bulkhead_rejected", C, N, None, "Calls the bulkhead rejected");
    pub const THROTTLE_DROP: M = M::new("throttle_drop_probability", G, N, None, "Probability (0-1) with which the throttle sheds the next request");
    pub const THROTTLE_ACTIVE: M = M::new("throttle_active", G, N, None, "1 when the request rate is high enough for the throttle to act");
    pub const THROTTLE_REQUESTS: M = M::new("throttle_requests", C, N, None, "Requests seen by the throttle");
    pub const THROTTLE_ACCEPTS: M = M::new("throttle_accepts", C, N, None, "Requests the backend accepted");
    pub const THROTTLE_THROTTLED: M = M::new("throttle_throttled", C, N, None, "Requests the throttle shed locally");
    const CL: &[&str] = &["cluster"];
    const CL_DET: &[&str] = &["cluster", "detector"];
    pub const CLUSTER_ENDPOINTS: M = M::new("cluster_endpoints", G, CL, None, "Endpoints in the cluster");
    pub const CLUSTER_ROUTABLE: M = M::new("cluster_routable_endpoints", G, CL, None, "Endpoints neither ejected nor marked unhealthy");
    pub const EJECTIONS_ACTIVE: M = M::new("outlier_ejections_active", G, CL_DET, None, "Endpoints ejected now, by the detector that ejected them (unknown: before registration)");
    pub const EJECTIONS: M = M::new("outlier_ejections", C, CL_DET, None, "Ejections since the cluster was registered, by detector");
    pub const SKIPPED: M = M::new("outlier_detections_skipped", C, &["cluster", "detector", "reason"], None, "Outlier detections that ejected nothing, by reason (not_enforced, max_ejection_percent)");
    pub const PANIC_MODE: M = M::new("outlier_panic_mode", G, CL, None, "1 while the cluster is in panic mode (too few healthy endpoints: health ignored)");
    pub const PANIC_ENTERED: M = M::new("outlier_panic_entered", C, CL, None, "Entries into panic mode since the cluster was registered");
    pub const FAILBACK_DEPTH: M = M::new("failback_queue_depth", G, N, None, "Failback entries pending delivery");
    pub const FAILBACK_AGE: M = M::new("failback_oldest_entry_age_seconds", G, N, None, "Age of the oldest pending failback entry; 0 when the queue is empty");
    pub const FAILBACK_SUBMISSIONS: M = M::new("failback_submissions", C, &["name", "outcome"], None, "Failback submissions by outcome (delivered at once, queued, refused)");
    pub const FAILBACK_DELIVERIES: M = M::new("failback_deliveries", C, &["name", "outcome"], None, "Background deliveries by outcome (delivered, retry_failed, gave_up)");
    pub const SKIPPED_DUPLICATES: M = M::new("exporter_skipped_duplicates", G, &[], None, "Breakers left out of the last scrape because another source exported the same name");

    pub const COMPAT_STATE: M = M::new("circuit_breaker_state", G, N, None, "Breaker state: 0 closed, 1 open, 2 half-open");
    pub const COMPAT_REQUESTS: M = M::new("circuit_breaker_requests", C, &["name", "result"], None, "Requests by result (success, failure, short_circuited)");
    pub const R4J_STATE: M = M::new("resilience4j_circuitbreaker_state", G, &["name", "state"], None, "The states of the circuit breaker");
    pub const R4J_CALLS: M = M::new("resilience4j_circuitbreaker_calls_seconds", H, &["name", "kind"], None, "Total number of calls which have been recorded, by kind");
    pub const R4J_NOT_PERMITTED: M = M::new("resilience4j_circuitbreaker_not_permitted_calls", C, &["name", "kind"], None, "Total number of not permitted calls");
    pub const R4J_FAILURE_RATE: M = M::new("resilience4j_circuitbreaker_failure_rate", G, N, None, "The failure rate of the circuit breaker (percent, -1 below the minimum number of calls)");
    pub const R4J_SLOW_RATE: M = M::new("resilience4j_circuitbreaker_slow_call_rate", G, N, None, "The slow call rate of the circuit breaker (percent, -1 below the minimum number of calls)");
    pub const R4J_BUFFERED: M = M::new("resilience4j_circuitbreaker_buffered_calls", G, &["name", "kind"], None, "The number of buffered calls stored in the ring buffer, by kind");
}

/// Every family the exporter writes under its prefix.
#[rustfmt::skip]
pub const FAMILIES: &[MetricFamily] = &[
    f::STATE, f::STATE_CODE, f::CALLS, f::FAILURE_RATE, f::SLOW_RATE, f::TRANSITIONS,
    f::FAILURE_THRESHOLD, f::SLOW_THRESHOLD, f::WINDOW_CALLS, f::MINIMUM_CALLS, f::TIME_IN_STATE,
    f::PROBES_IN_FLIGHT, f::PROBES, f::PROBE_DUE, f::OPEN_UNTIL, f::BACKOFF_ROUND,
    f::CONFIG_VERSION, f::MAX_HALF_OPEN, f::CALL_DURATION, f::REG_BREAKERS, f::REG_MAX,
    f::REG_CREATED, f::REG_DROPPED, f::REG_OVERFLOW, f::RETRY_ATTEMPTS, f::RETRY_RETRIES,
    f::RETRY_REFUSALS, f::BUDGET_AVAILABLE, f::BUDGET_REQUESTS, f::BUDGET_WITHDRAWALS,
    f::BUDGET_REFUSALS, f::BULKHEAD_IN_USE, f::BULKHEAD_QUEUED, f::BULKHEAD_MAX,
    f::BULKHEAD_ADMITTED, f::BULKHEAD_REJECTED, f::THROTTLE_DROP, f::THROTTLE_ACTIVE,
    f::THROTTLE_REQUESTS, f::THROTTLE_ACCEPTS, f::THROTTLE_THROTTLED, f::CLUSTER_ENDPOINTS,
    f::CLUSTER_ROUTABLE, f::EJECTIONS_ACTIVE, f::EJECTIONS, f::SKIPPED, f::PANIC_MODE,
    f::PANIC_ENTERED, f::FAILBACK_DEPTH, f::FAILBACK_AGE, f::FAILBACK_SUBMISSIONS,
    f::FAILBACK_DELIVERIES, f::SKIPPED_DUPLICATES,
];

/// The compatibility families (whole names, no prefix), written when
/// [`compat`](crate::ExporterBuilder::compat) is on.
#[rustfmt::skip]
pub const COMPAT: &[MetricFamily] = &[
    f::COMPAT_STATE, f::COMPAT_REQUESTS, f::R4J_STATE, f::R4J_CALLS, f::R4J_NOT_PERMITTED,
    f::R4J_FAILURE_RATE, f::R4J_SLOW_RATE, f::R4J_BUFFERED,
];
