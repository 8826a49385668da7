//! Outlier ejections counted by detector, from a cluster's events — the
//! Rust exporter's book, for `tripline_outlier_*` families: the cluster
//! only says who is ejected now, not which detector ejected them or how
//! often detections were skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tripline::cluster::Cluster;
use tripline::outlier::{ClusterEvent, ClusterEventKind, Detector, SkipReason};

/// The detectors, in the exporter's order; the last for endpoints ejected
/// before the book subscribed (never, here: it subscribes at creation).
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

#[derive(Default)]
struct Book {
    ejections: [u64; 8],
    skipped: [[u64; 2]; 8],
    panic_entered: u64,
    ejected_by: HashMap<String, usize>,
}

/// The counts, fed by the cluster's events.
#[derive(Default)]
pub(crate) struct OutlierBook(Mutex<Book>);

/// One cluster's outlier counts at a scrape.
pub(crate) struct OutlierSample {
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
                    .insert(endpoint.as_str().to_owned(), index(*detector));
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

    /// A subscriber feeding this book (weakly: the book may go first).
    pub(crate) fn callback(self: &Arc<Self>) -> impl Fn(&ClusterEvent) + Send + Sync + 'static {
        let book = Arc::downgrade(self);
        move |event| {
            if let Some(book) = book.upgrade() {
                book.record(event);
            }
        }
    }

    /// The counts, and the endpoints of `cluster` ejected now by detector.
    pub(crate) fn sample(&self, cluster: &Cluster) -> OutlierSample {
        let endpoints = cluster.endpoints();
        let b = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut active = [0; 8];
        for e in endpoints.iter().filter(|e| e.is_ejected()) {
            let d = b
                .ejected_by
                .get(e.id().as_str())
                .copied()
                .unwrap_or(UNKNOWN);
            active[d] += 1;
        }
        OutlierSample {
            active,
            ejections: b.ejections,
            skipped: b.skipped,
            panic_entered: b.panic_entered,
        }
    }
}
