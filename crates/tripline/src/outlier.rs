//! Outlier detection: find the few sick endpoints of a dependency and
//! route around them, without ever routing around all of them.
//!
//! Instance-level protection means "call another one", not "stop calling":
//! one machine with a full disk, a GC storm or a bad host
//! should leave the pool for a while, while the dependency as a whole keeps
//! serving. This module is Envoy's outlier detection as a library, running
//! inside a [`Cluster`](crate::cluster::Cluster), on its injected clock.
//!
//! # Detectors
//!
//! Every call's [`EndpointOutcome`](crate::cluster::EndpointOutcome) is
//! recorded on its endpoint with a few relaxed atomic adds (no lock).
//!
//! * **Consecutive failures / gateway failures / local-origin failures**
//!   ([`OutlierConfig::consecutive_failures`] …): a streak counter per
//!   endpoint, reset by any success; reaching the threshold ejects at once,
//!   between analysis passes.
//! * **Success rate** ([`SuccessRateConfig`]): every `interval`, among the
//!   endpoints with at least `request_volume` requests in the interval — if
//!   there are at least `minimum_hosts` of them — compute the mean `μ` and
//!   the population standard deviation `σ` of their success rates; eject
//!   those below `μ − stdev_factor·σ`, worst first. Relative to the peers:
//!   a slump of the whole dependency ejects nobody (that is the breaker's
//!   job), one endpoint far below the others is an outlier.
//! * **Failure percentage** ([`FailurePercentageConfig`]): every
//!   `interval`, eject endpoints with enough volume whose failure
//!   percentage reaches `threshold_percent`, worst first. Absolute: works
//!   with few endpoints, where statistics mean little.
//!
//! With [`split_external_local_origin_errors`](OutlierConfig::split_external_local_origin_errors),
//! local-origin errors (connect refused, reset, local timeout) are counted
//! apart from the endpoint's own answers and have their own streak and
//! their own success-rate and failure-percentage runs: a network problem
//! and an application problem are told apart. Without it, a local-origin
//! error counts as a gateway failure, as Envoy maps it. A business error
//! ([`Ignored`](crate::cluster::EndpointOutcome::Ignored)) is a healthy answer here.
//!
//! # Ejection
//!
//! An ejection lasts `base_ejection_time × m`, `m` being the endpoint's
//! ejections in a row (it grows by one per ejection while that still
//! lengthens it, and shrinks by one at every analysis pass the endpoint
//! spends in the pool), capped at `max_ejection_time`, plus a seeded random
//! jitter of up to `max_ejection_time_jitter`. An ejected endpoint returns
//! at the first analysis pass after its time is up (so up to one
//! `interval` late, as in Envoy).
//!
//! Ejections are capped: at most `⌊n × max_ejection_percent / 100⌋` of the
//! `n` endpoints are ejected at once ([`ejection_cap`]), rounded *down* so
//! the percentage is never exceeded; `always_eject_one` allows one
//! ejection where that rounds to zero. A detection beyond the cap, or one
//! that loses its `enforcing_percent` roll (a detector rolled out in
//! detect-only mode), is reported as [`ClusterEventKind::Detected`] and
//! ejects nothing.
//!
//! # Panic mode
//!
//! Ejecting shifts the ejected endpoints' traffic onto the others, which
//! can topple them one after another. When the share of
//! routable endpoints (neither ejected nor marked unhealthy) falls below
//! the cluster's `panic_threshold_percent`, the cluster enters *panic
//! mode*: health is ignored and traffic spreads over every endpoint,
//! because telling healthy from unhealthy no longer helps. Each endpoint's
//! breaker still admits or rejects its own calls, so a dependency that is
//! down as a whole is still broken off. Panic mode is a state
//! ([`Cluster::is_panicking`](crate::cluster::Cluster::is_panicking)) and a
//! pair of events ([`ClusterEventKind::PanicEntered`], [`ClusterEventKind::PanicLeft`]).
//!
//! # When the analysis runs
//!
//! No thread or timer of its own: the first call after `interval` has
//! passed runs the pass (one CAS decides which), as the breaker's
//! transitions are lazy. A pass over 1 000 endpoints takes tens of
//! microseconds (`benches/README.md`). [`Cluster::analyze`](crate::cluster::Cluster::analyze)
//! runs one on demand (tests, or your own timer for idle clusters).

mod config;
mod event;
pub(crate) mod host;

use std::sync::atomic::{AtomicU64, Ordering};

pub use config::{
    ConsecutiveConfig, FailurePercentageConfig, OutlierConfig, SuccessRateConfig, ejection_cap,
};
pub use event::{
    ClusterEvent, ClusterEventKind, ClusterSubscription, Detector, DetectorStats, PanicStats,
    SkipReason,
};

pub(crate) use config::check_percent;
pub(crate) use event::{EventHub, HubOwner};
pub use host::OutlierCounts;
pub(crate) use host::{HostOutlier, Thresholds};

use crate::clock::{Timestamp, duration_to_nanos};

/// A cluster's outlier detector: its config, the streak thresholds the
/// call path reads, and when the next analysis pass is due.
pub(crate) struct OutlierDetector {
    pub(crate) config: OutlierConfig,
    pub(crate) thresholds: Thresholds,
    next_due: AtomicU64,
    interval: u64,
}

impl OutlierDetector {
    pub(crate) fn new(config: OutlierConfig, now: Timestamp) -> Self {
        let split = config.split_external_local_origin_errors;
        let t = |c: &Option<ConsecutiveConfig>| c.map_or(0, |c| c.threshold);
        let thresholds = Thresholds {
            streak: [
                t(&config.consecutive_failures),
                t(&config.consecutive_gateway_failures),
                if split {
                    t(&config.consecutive_local_origin_failures)
                } else {
                    0
                },
            ],
            split,
        };
        let interval = duration_to_nanos(config.interval).max(1);
        OutlierDetector {
            config,
            thresholds,
            next_due: AtomicU64::new(now.as_nanos().saturating_add(interval)),
            interval,
        }
    }

    /// Whether an analysis pass is due at `now` (one relaxed load).
    #[inline]
    pub(crate) fn due(&self, now: Timestamp) -> bool {
        now.as_nanos() >= self.next_due.load(Ordering::Relaxed)
    }

    /// Claims the due pass: exactly one caller gets `true` per interval.
    pub(crate) fn claim(&self, now: Timestamp) -> bool {
        let due = self.next_due.load(Ordering::Acquire);
        now.as_nanos() >= due
            && self
                .next_due
                .compare_exchange(
                    due,
                    now.as_nanos().saturating_add(self.interval),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Schedules the next pass one interval after `now` (a forced pass).
    pub(crate) fn reschedule(&self, now: Timestamp) {
        self.next_due.store(
            now.as_nanos().saturating_add(self.interval),
            Ordering::Release,
        );
    }

    /// The enforcing percentage of a streak detector.
    pub(crate) fn streak_enforcing(&self, d: Detector) -> (u32, u32) {
        let c = match d {
            Detector::ConsecutiveGatewayFailures => &self.config.consecutive_gateway_failures,
            Detector::ConsecutiveLocalOriginFailures => {
                &self.config.consecutive_local_origin_failures
            }
            _ => &self.config.consecutive_failures,
        };
        c.map_or((0, 0), |c| (c.threshold, c.enforcing_percent))
    }
}
