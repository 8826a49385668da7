//! Outlier ejections by detector, and panic-mode entries, from cluster
//! events.
//!
//! A cluster knows which endpoints are ejected now and how often each was
//! ejected, but not which detector did it; its events say. Like breaker
//! transitions, ejections are rare and counted here from the events, off
//! the call path. An endpoint ejected before the cluster was registered
//! has no known detector and is reported as `unknown`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tripline::cluster::Cluster;
use tripline::outlier::{ClusterEvent, ClusterEventKind, Detector, SkipReason};

/// Detector label values, in index order; the last is `unknown`.
pub(crate) const DETECTORS: [&str; 8] = [
    "consecutive_failures",
    "consecutive_gateway_failures",
    "consecutive_local_origin_failures",
    "success_rate",
    "local_origin_success_rate",
    "failure_percentage",
    "local_origin_failure_percentage",
    "unknown",
];
const UNKNOWN: usize = 7;

/// Skip reason label values, in index order.
pub(crate) const SKIP_REASONS: [&str; 2] = ["not_enforced", "max_ejection_percent"];

fn index(d: Detector) -> usize {
    match d {
        Detector::ConsecutiveFailures => 0,
        Detector::ConsecutiveGatewayFailures => 1,
        Detector::ConsecutiveLocalOriginFailures => 2,
        Detector::SuccessRate => 3,
        Detector::LocalOriginSuccessRate => 4,
        Detector::FailurePercentage => 5,
        Detector::LocalOriginFailurePercentage => 6,
    }
}

/// What one cluster's events told so far.
#[derive(Debug, Default)]
struct Book {
    ejections: [u64; 8],
    skipped: [[u64; 2]; 8],
    panic_entered: u64,
    /// The detector of each endpoint ejected now (by endpoint id).
    ejected_by: HashMap<String, usize>,
}

/// The outlier events of one cluster.
#[derive(Debug, Default)]
pub(crate) struct OutlierBook(Mutex<Book>);

/// One cluster's outlier figures at a scrape.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutlierSample {
    pub(crate) cluster: String,
    pub(crate) endpoints: usize,
    pub(crate) routable: usize,
    pub(crate) panic: bool,
    pub(crate) active: [u64; 8],
    pub(crate) ejections: [u64; 8],
    pub(crate) skipped: [[u64; 2]; 8],
    pub(crate) panic_entered: u64,
}

impl OutlierBook {
    fn record(&self, event: &ClusterEvent) {
        let mut b = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &event.kind {
            ClusterEventKind::Ejected {
                endpoint, detector, ..
            } => {
                b.ejections[index(*detector)] += 1;
                b.ejected_by
                    .insert(endpoint.as_str().to_string(), index(*detector));
            }
            ClusterEventKind::Detected {
                detector, skipped, ..
            } => {
                let r = match skipped {
                    SkipReason::NotEnforced => 0,
                    SkipReason::MaxEjectionPercent { .. } => 1,
                };
                b.skipped[index(*detector)][r] += 1;
            }
            ClusterEventKind::Returned { endpoint, .. } => {
                b.ejected_by.remove(endpoint.as_str());
            }
            ClusterEventKind::PanicEntered(_) => b.panic_entered += 1,
            ClusterEventKind::PanicLeft(_) => {}
        }
    }

    /// A cluster subscriber callback that feeds this book.
    pub(crate) fn callback(self: &Arc<Self>) -> impl Fn(&ClusterEvent) + Send + Sync + 'static {
        let book = Arc::downgrade(self);
        move |event| {
            if let Some(book) = book.upgrade() {
                book.record(event);
            }
        }
    }

    /// Reads `cluster` and the counts, pruning endpoints no longer ejected.
    pub(crate) fn sample(&self, cluster: &Cluster) -> OutlierSample {
        let health = cluster.health();
        let endpoints = cluster.endpoints();
        let mut b = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut active = [0; 8];
        let mut still = HashMap::new();
        for e in endpoints.iter().filter(|e| e.is_ejected()) {
            let id = e.id().as_str();
            let d = b.ejected_by.get(id).copied().unwrap_or(UNKNOWN);
            active[d] += 1;
            still.insert(id.to_string(), d);
        }
        b.ejected_by = still;
        OutlierSample {
            cluster: cluster.name().to_string(),
            endpoints: health.endpoints,
            routable: health.routable,
            panic: health.panic,
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
    use tripline::clock::ManualClock;
    use tripline::cluster::{EndpointConfig, EndpointOutcome};
    use tripline::outlier::{ConsecutiveConfig, OutlierConfig};

    #[test]
    fn ejections_by_detector_and_unknown_before_registration() {
        let cluster = Cluster::builder()
            .name("geo")
            .endpoints(["a", "b", "c", "d"].map(|id| EndpointConfig::new(id, id)))
            .outlier(OutlierConfig {
                max_ejection_percent: 50,
                consecutive_gateway_failures: Some(ConsecutiveConfig {
                    threshold: 1,
                    enforcing_percent: 100,
                }),
                ..Default::default()
            })
            .clock(ManualClock::new())
            .build()
            .unwrap();
        // Ejected before anyone listened.
        cluster
            .select()
            .unwrap()
            .record(EndpointOutcome::GatewayFailure);
        let book = Arc::new(OutlierBook::default());
        let _sub = cluster.subscribe(book.callback());
        cluster
            .select()
            .unwrap()
            .record(EndpointOutcome::GatewayFailure);
        let s = book.sample(&cluster);
        assert_eq!(s.active[1], 1, "consecutive_gateway_failures");
        assert_eq!(s.active[UNKNOWN], 1);
        assert_eq!(s.ejections[1], 1);
        assert_eq!((s.endpoints, s.routable), (4, 2));
        assert_eq!(DETECTORS[index(Detector::SuccessRate)], "success_rate");
    }
}
