//! Events: ejections, returns and panic mode, with the statistics that
//! caused them, so an operator can tell *why* an endpoint left the pool.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::endpoint::EndpointId;
use crate::sync::{Mutex, lock};

/// The detector behind an ejection.
///
/// ```
/// use tripline::outlier::Detector;
/// assert_eq!(Detector::SuccessRate.to_string(), "success_rate");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Detector {
    /// Consecutive failures (5xx, and unsplit local-origin errors).
    ConsecutiveFailures,
    /// Consecutive gateway failures (502, 503, 504).
    ConsecutiveGatewayFailures,
    /// Consecutive local-origin errors (split mode).
    ConsecutiveLocalOriginFailures,
    /// Success rate below the peers' mean − k·σ.
    SuccessRate,
    /// Local-origin success rate below the peers' mean − k·σ (split mode).
    LocalOriginSuccessRate,
    /// Failure percentage at or above the threshold.
    FailurePercentage,
    /// Local-origin failure percentage at or above the threshold (split mode).
    LocalOriginFailurePercentage,
}

impl Detector {
    /// Every detector, in [`index`](Self::index) order.
    pub const ALL: [Detector; 7] = [
        Detector::ConsecutiveFailures,
        Detector::ConsecutiveGatewayFailures,
        Detector::ConsecutiveLocalOriginFailures,
        Detector::SuccessRate,
        Detector::LocalOriginSuccessRate,
        Detector::FailurePercentage,
        Detector::LocalOriginFailurePercentage,
    ];

    /// The detector's position in [`ALL`](Self::ALL): the slot exporters
    /// count it in (see [`EjectionCounts`](crate::cluster::EjectionCounts)).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The snake_case name used in events and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Detector::ConsecutiveFailures => "consecutive_failures",
            Detector::ConsecutiveGatewayFailures => "consecutive_gateway_failures",
            Detector::ConsecutiveLocalOriginFailures => "consecutive_local_origin_failures",
            Detector::SuccessRate => "success_rate",
            Detector::LocalOriginSuccessRate => "local_origin_success_rate",
            Detector::FailurePercentage => "failure_percentage",
            Detector::LocalOriginFailurePercentage => "local_origin_failure_percentage",
        }
    }
}

impl fmt::Display for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The numbers a detector decided on.
///
/// ```
/// use tripline::outlier::DetectorStats;
/// let s = DetectorStats::Consecutive { count: 5, threshold: 5 };
/// assert!(matches!(s, DetectorStats::Consecutive { count: 5, .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DetectorStats {
    /// A streak of errors.
    Consecutive {
        /// Errors in a row.
        count: u32,
        /// The configured threshold.
        threshold: u32,
    },
    /// The endpoint's success rate against its peers, in percent.
    SuccessRate {
        /// The endpoint's success rate in the interval.
        success_rate: f64,
        /// Mean over the endpoints with enough volume.
        mean: f64,
        /// Population standard deviation over them.
        stdev: f64,
        /// `mean − stdev_factor × stdev`: below it is an outlier.
        threshold: f64,
        /// The endpoint's requests in the interval.
        requests: u64,
        /// Endpoints with enough volume that formed the statistics.
        hosts: usize,
    },
    /// The endpoint's failure percentage against a fixed threshold.
    FailurePercentage {
        /// The endpoint's failures / requests in the interval, in percent.
        failure_percent: f64,
        /// The configured threshold, in percent.
        threshold: u32,
        /// The endpoint's requests in the interval.
        requests: u64,
    },
}

/// Why a detection did not eject.
///
/// ```
/// use tripline::outlier::SkipReason;
/// assert_ne!(SkipReason::NotEnforced, SkipReason::MaxEjectionPercent { cap: 1 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The detector's `enforcing_percent` roll said no (detect-only rollout).
    NotEnforced,
    /// `max_ejection_percent` is reached: `cap` endpoints are ejected.
    MaxEjectionPercent {
        /// Most endpoints that may be ejected at once now.
        cap: usize,
    },
}

impl SkipReason {
    /// The reason's slot in [`EjectionCounts::skipped`](crate::cluster::EjectionCounts::skipped).
    pub const fn index(self) -> usize {
        match self {
            SkipReason::NotEnforced => 0,
            SkipReason::MaxEjectionPercent { .. } => 1,
        }
    }
}

/// The share of routable endpoints when panic mode changed.
///
/// ```
/// use tripline::outlier::PanicStats;
/// let s = PanicStats { healthy: 1, total: 4, threshold_percent: 50 };
/// assert!(s.healthy * 100 < s.threshold_percent as usize * s.total); // panicking
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicStats {
    /// Endpoints neither ejected nor marked unhealthy.
    pub healthy: usize,
    /// Endpoints in the cluster.
    pub total: usize,
    /// The configured panic threshold, in percent.
    pub threshold_percent: u32,
}

/// What happened.
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::cluster::{Cluster, EndpointConfig, EndpointOutcome};
/// use tripline::outlier::{ClusterEventKind, ConsecutiveConfig, OutlierConfig};
/// use std::sync::{Arc, Mutex};
///
/// let cluster = Cluster::builder()
///     .endpoints([EndpointConfig::new("a", "a:80"), EndpointConfig::new("b", "b:80")])
///     .outlier(OutlierConfig {
///         max_ejection_percent: 50,
///         consecutive_failures: Some(ConsecutiveConfig { threshold: 1, enforcing_percent: 100 }),
///         ..Default::default()
///     })
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = seen.clone();
/// let _sub = cluster.subscribe(move |e| sink.lock().unwrap().push(e.kind.clone()));
/// cluster.select().unwrap().record(EndpointOutcome::GatewayFailure);
/// assert!(matches!(seen.lock().unwrap()[0], ClusterEventKind::Ejected { ejected: 1, total: 2, .. }));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterEventKind {
    /// An endpoint was ejected from load balancing.
    Ejected {
        /// The endpoint.
        endpoint: EndpointId,
        /// Which detector.
        detector: Detector,
        /// What it saw.
        stats: DetectorStats,
        /// How long the ejection lasts (jitter included).
        duration: Duration,
        /// Ejections in a row, this one included (the time multiplier).
        multiplier: u32,
        /// Endpoints ejected now, this one included.
        ejected: usize,
        /// Endpoints in the cluster.
        total: usize,
    },
    /// A detector flagged an endpoint that was not ejected.
    Detected {
        /// The endpoint.
        endpoint: EndpointId,
        /// Which detector.
        detector: Detector,
        /// What it saw.
        stats: DetectorStats,
        /// Why it stays.
        skipped: SkipReason,
    },
    /// An ejected endpoint's time is up: it is back in the pool.
    Returned {
        /// The endpoint.
        endpoint: EndpointId,
        /// How long it was out.
        ejected_for: Duration,
    },
    /// Too few healthy endpoints: health is ignored, traffic spreads over all.
    PanicEntered(PanicStats),
    /// Enough healthy endpoints again: health is obeyed.
    PanicLeft(PanicStats),
}

/// An event of a cluster, with its name and time.
///
/// ```
/// use std::sync::Arc;
/// use tripline::clock::Timestamp;
/// use tripline::outlier::{ClusterEvent, ClusterEventKind, PanicStats};
/// let e = ClusterEvent {
///     cluster: Arc::from("geo"),
///     at: Timestamp::ZERO,
///     wall: std::time::SystemTime::UNIX_EPOCH,
///     kind: ClusterEventKind::PanicLeft(PanicStats { healthy: 3, total: 4, threshold_percent: 50 }),
/// };
/// assert_eq!(&*e.cluster, "geo");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterEvent {
    /// The cluster's name.
    pub cluster: Arc<str>,
    /// When, on the cluster's clock: what durations between events are
    /// measured on (monotonic; virtual time under a `ManualClock`).
    pub at: Timestamp,
    /// When, on the wall clock: what a person correlates with logs and
    /// dashboards (an ejection's time on an admin page), read when the
    /// event is built, as breaker events do.
    pub wall: std::time::SystemTime,
    /// What.
    pub kind: ClusterEventKind,
}

type Listener = Arc<dyn Fn(&ClusterEvent) + Send + Sync>;

/// The listeners of one cluster.
#[derive(Default)]
pub(crate) struct EventHub {
    listeners: Mutex<Vec<(u64, Listener)>>,
    next: AtomicU64,
}

impl EventHub {
    pub(crate) fn subscribe(&self, f: Listener) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.listeners).push((id, f));
        id
    }

    pub(crate) fn unsubscribe(&self, id: u64) {
        lock(&self.listeners).retain(|(i, _)| *i != id);
    }

    /// Delivers `events` (collected under the health lock, emitted after it
    /// is released: listeners never run under a tripline lock).
    pub(crate) fn emit(&self, events: &[ClusterEvent]) {
        if events.is_empty() {
            return;
        }
        for e in events {
            trace(e);
        }
        let listeners: Vec<Listener> = lock(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for e in events {
            for l in &listeners {
                l(e);
            }
        }
    }
}

fn trace(e: &ClusterEvent) {
    let cluster = &*e.cluster;
    match &e.kind {
        ClusterEventKind::Ejected {
            endpoint,
            detector,
            stats,
            duration,
            ..
        } => tracing::warn!(target: "tripline::outlier", cluster, %endpoint, %detector,
            ?stats, ejection = ?duration, "endpoint ejected"),
        ClusterEventKind::Detected {
            endpoint,
            detector,
            skipped,
            ..
        } => tracing::info!(target: "tripline::outlier", cluster, %endpoint, %detector,
            ?skipped, "outlier detected, not ejected"),
        ClusterEventKind::Returned {
            endpoint,
            ejected_for,
        } => tracing::info!(target: "tripline::outlier", cluster, %endpoint,
            ?ejected_for, "endpoint returned"),
        ClusterEventKind::PanicEntered(s) => tracing::warn!(target: "tripline::outlier", cluster,
            healthy = s.healthy, total = s.total, "panic mode entered"),
        ClusterEventKind::PanicLeft(s) => tracing::info!(target: "tripline::outlier", cluster,
            healthy = s.healthy, total = s.total, "panic mode left"),
    }
}

/// Keeps a listener registered; dropping it unsubscribes.
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig};
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "10.0.0.1:80")).build().unwrap();
/// let sub = cluster.subscribe(|e| println!("{e:?}"));
/// drop(sub); // no more events
/// ```
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct ClusterSubscription {
    pub(crate) hub: std::sync::Weak<dyn HubOwner>,
    pub(crate) id: u64,
}

/// Whatever owns an [`EventHub`] (the cluster's shared state).
pub(crate) trait HubOwner: Send + Sync {
    fn hub(&self) -> &EventHub;
}

impl Drop for ClusterSubscription {
    fn drop(&mut self) {
        if let Some(owner) = self.hub.upgrade() {
            owner.hub().unsubscribe(self.id);
        }
    }
}

impl fmt::Debug for ClusterSubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterSubscription")
            .field("id", &self.id)
            .finish()
    }
}
