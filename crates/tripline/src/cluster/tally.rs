//! Outlier decisions counted by detector, from a cluster's events.
//!
//! A cluster knows which endpoints are ejected now and how often each was
//! ejected, but not which detector ejected them, nor how often a detection
//! was skipped; its events say. An exporter (the Prometheus crate, the
//! Python package) subscribes an [`EjectionTally`] and reads it when
//! scraped. Like breaker transitions, these events are rare: counting them
//! costs the call path nothing.

use std::collections::HashMap;
use std::sync::Arc;

use super::Cluster;
use crate::outlier::{ClusterEvent, ClusterEventKind, Detector};
use crate::sync::{Mutex, lock};

/// The counts of one cluster's outlier events, fed by its subscription.
///
/// ```
/// use std::sync::Arc;
/// use tripline::cluster::{Cluster, EjectionTally, EndpointConfig, EndpointOutcome};
/// use tripline::outlier::{ConsecutiveConfig, Detector, OutlierConfig};
///
/// let cluster = Cluster::builder()
///     .endpoints(["a", "b"].map(|id| EndpointConfig::new(id, id)))
///     .outlier(OutlierConfig {
///         max_ejection_percent: 50,
///         consecutive_gateway_failures: Some(ConsecutiveConfig {
///             threshold: 1,
///             enforcing_percent: 100,
///         }),
///         ..Default::default()
///     })
///     .build()
///     .unwrap();
/// let tally = Arc::new(EjectionTally::default());
/// let _subscription = cluster.subscribe(tally.subscriber());
/// cluster.select().unwrap().record(EndpointOutcome::GatewayFailure);
/// let counts = tally.sample(&cluster);
/// let gateway = Detector::ConsecutiveGatewayFailures.index();
/// assert_eq!((counts.active[gateway], counts.ejections[gateway]), (1, 1));
/// ```
#[derive(Debug, Default)]
pub struct EjectionTally(Mutex<Book>);

/// What one cluster's events told so far.
#[derive(Debug, Default)]
struct Book {
    ejections: [u64; 8],
    skipped: [[u64; 2]; 8],
    panic_entered: u64,
    /// The detector of each endpoint ejected now (by endpoint id).
    ejected_by: HashMap<String, usize>,
}

/// A tally read against its cluster at one moment. Arrays are indexed by
/// [`Detector::index`], with a last slot ([`EjectionCounts::UNKNOWN`]) for
/// endpoints ejected before the tally subscribed, and skips by
/// [`SkipReason::index`](crate::outlier::SkipReason::index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EjectionCounts {
    /// Endpoints ejected now, by the detector that ejected them.
    pub active: [u64; 8],
    /// Ejections since the tally subscribed, by detector.
    pub ejections: [u64; 8],
    /// Detections that did not eject, by detector and reason.
    pub skipped: [[u64; 2]; 8],
    /// Times the cluster entered panic mode.
    pub panic_entered: u64,
}

impl EjectionCounts {
    /// The slot of endpoints whose ejecting detector is unknown.
    pub const UNKNOWN: usize = 7;

    /// The label of each slot: the detectors' names, then `unknown`.
    pub const DETECTOR_LABELS: [&'static str; 8] = [
        Detector::ALL[0].as_str(),
        Detector::ALL[1].as_str(),
        Detector::ALL[2].as_str(),
        Detector::ALL[3].as_str(),
        Detector::ALL[4].as_str(),
        Detector::ALL[5].as_str(),
        Detector::ALL[6].as_str(),
        "unknown",
    ];

    /// The label of each skip reason slot.
    pub const SKIP_REASON_LABELS: [&'static str; 2] = ["not_enforced", "max_ejection_percent"];
}

impl EjectionTally {
    /// Counts one event.
    pub fn record(&self, event: &ClusterEvent) {
        let mut b = lock(&self.0);
        match &event.kind {
            ClusterEventKind::Ejected {
                endpoint, detector, ..
            } => {
                b.ejections[detector.index()] += 1;
                b.ejected_by
                    .insert(endpoint.as_str().to_owned(), detector.index());
            }
            ClusterEventKind::Detected {
                detector, skipped, ..
            } => b.skipped[detector.index()][skipped.index()] += 1,
            ClusterEventKind::Returned { endpoint, .. } => {
                b.ejected_by.remove(endpoint.as_str());
            }
            ClusterEventKind::PanicEntered(_) => b.panic_entered += 1,
            ClusterEventKind::PanicLeft(_) => {}
        }
    }

    /// A callback for [`Cluster::subscribe`] that feeds this tally. It
    /// holds the tally weakly, so the tally may be dropped first.
    pub fn subscriber(self: &Arc<Self>) -> impl Fn(&ClusterEvent) + Send + Sync + 'static {
        let tally = Arc::downgrade(self);
        move |event| {
            if let Some(tally) = tally.upgrade() {
                tally.record(event);
            }
        }
    }

    /// The counts, with the endpoints of `cluster` ejected now by
    /// detector; forgets endpoints no longer ejected.
    pub fn sample(&self, cluster: &Cluster) -> EjectionCounts {
        let endpoints = cluster.endpoints();
        let mut b = lock(&self.0);
        let mut active = [0; 8];
        let mut still = HashMap::new();
        for e in endpoints.iter().filter(|e| e.is_ejected()) {
            let id = e.id().as_str();
            let d = b
                .ejected_by
                .get(id)
                .copied()
                .unwrap_or(EjectionCounts::UNKNOWN);
            active[d] += 1;
            still.insert(id.to_owned(), d);
        }
        b.ejected_by = still;
        EjectionCounts {
            active,
            ejections: b.ejections,
            skipped: b.skipped,
            panic_entered: b.panic_entered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::cluster::{EndpointConfig, EndpointOutcome};
    use crate::outlier::{ConsecutiveConfig, OutlierConfig};

    #[test]
    fn every_detector_has_its_own_slot_and_label() {
        for (i, d) in Detector::ALL.into_iter().enumerate() {
            assert_eq!(d.index(), i);
            assert_eq!(EjectionCounts::DETECTOR_LABELS[i], d.as_str());
        }
        assert_eq!(
            EjectionCounts::DETECTOR_LABELS[EjectionCounts::UNKNOWN],
            "unknown"
        );
    }

    #[test]
    fn an_endpoint_ejected_before_the_tally_subscribed_counts_as_unknown() {
        let streak = ConsecutiveConfig {
            threshold: 2,
            enforcing_percent: 100,
        };
        let outlier = OutlierConfig {
            max_ejection_percent: 100,
            consecutive_failures: Some(streak),
            ..Default::default()
        };
        let ids = ["x", "y", "z"];
        let cluster = Cluster::builder()
            .endpoints(ids.map(|id| EndpointConfig::new(id, id)))
            .outlier(outlier)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        // Two failures in a row on endpoint `id` eject it.
        let eject = |id: &str| {
            let mut failed = 0;
            for _ in 0..100 {
                let Ok(lease) = cluster.select() else { break };
                if lease.endpoint().id().as_str() != id {
                    lease.record(EndpointOutcome::Success);
                    continue;
                }
                lease.record(EndpointOutcome::UpstreamFailure);
                failed += 1;
                if failed == 2 {
                    return;
                }
            }
            panic!("{id} was not selected twice");
        };
        eject("x");
        let tally = Arc::new(EjectionTally::default());
        let _subscription = cluster.subscribe(tally.subscriber());
        eject("y");
        let counts = tally.sample(&cluster);
        let streaks = Detector::ConsecutiveFailures.index();
        assert_eq!(counts.active[streaks], 1);
        assert_eq!(counts.active[EjectionCounts::UNKNOWN], 1);
        assert_eq!(counts.ejections[streaks], 1);
    }
}
