//! A cluster's outlier figures at a scrape: its health, and the ejections
//! by detector and panic-mode entries that its
//! [`EjectionTally`](tripline::cluster::EjectionTally) counted from its
//! events. An endpoint ejected before the cluster was registered has no
//! known detector and is reported as `unknown`.

use tripline::cluster::Cluster;
use tripline::cluster::{EjectionCounts, EjectionTally};

/// Detector label values, in slot order; the last is `unknown`.
pub(crate) const DETECTORS: [&str; 8] = EjectionCounts::DETECTOR_LABELS;

/// Skip reason label values, in slot order.
pub(crate) const SKIP_REASONS: [&str; 2] = EjectionCounts::SKIP_REASON_LABELS;

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

/// Reads `cluster`'s health and what `tally` counted of it.
pub(crate) fn sample(tally: &EjectionTally, cluster: &Cluster) -> OutlierSample {
    let health = cluster.health();
    let counts = tally.sample(cluster);
    OutlierSample {
        cluster: cluster.name().to_string(),
        endpoints: health.endpoints,
        routable: health.routable,
        panic: health.panic,
        active: counts.active,
        ejections: counts.ejections,
        skipped: counts.skipped,
        panic_entered: counts.panic_entered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tripline::cluster::EndpointConfig;

    #[test]
    fn a_sample_carries_the_clusters_health_beside_the_tallys_counts() {
        let cluster = Cluster::builder()
            .name("geo")
            .endpoints(["a", "b"].map(|id| EndpointConfig::new(id, id)))
            .build()
            .unwrap();
        let s = sample(&EjectionTally::default(), &cluster);
        assert_eq!(s.cluster, "geo");
        assert_eq!((s.endpoints, s.routable, s.panic), (2, 2, false));
        assert_eq!((s.active, s.panic_entered), ([0; 8], 0));
        assert_eq!(DETECTORS[3], "success_rate");
    }
}
