//! The health checks' series on `/metrics`:
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `tripline_proxy_endpoint_healthy` | `cluster`, `endpoint` | 1 while the endpoint passes its health checks (by the thresholds), 0 while it is out for them |
//! | `tripline_proxy_health_checks_total` | `cluster`, `result` (`pass`, `fail`) | health checks run |
//!
//! Endpoints are the config's or the ones DNS or a registry gave the
//! cluster: an endpoint that leaves takes its series with it, so the
//! series stay bounded by the clusters' membership.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The families, shared by every checker of one proxy.
#[derive(Clone, Default)]
pub(crate) struct HealthMetrics {
    healthy: Family<Labels, Gauge>,
    checks: Family<Labels, Counter>,
}

impl HealthMetrics {
    /// Registers the families under `prefix` (`tripline`).
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.register(
            format!("{prefix}_proxy_endpoint_healthy"),
            "Whether the endpoint passes its active health checks (0: out for them)",
            self.healthy.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_health_checks"),
            "Active health checks run, by cluster and result",
            self.checks.clone(),
        );
    }

    /// Counts one check of `cluster`'s endpoint `endpoint` and sets its
    /// health.
    pub(crate) fn checked(&self, cluster: &str, endpoint: &str, passed: bool, healthy: bool) {
        let result = if passed { "pass" } else { "fail" };
        self.checks
            .get_or_create(&vec![
                ("cluster", cluster.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
        self.healthy
            .get_or_create(&endpoint_labels(cluster, endpoint))
            .set(i64::from(healthy));
    }

    /// Drops the series of an endpoint that left (or is no longer checked).
    pub(crate) fn forget(&self, cluster: &str, endpoint: &str) {
        self.healthy.remove(&endpoint_labels(cluster, endpoint));
    }
}

fn endpoint_labels(cluster: &str, endpoint: &str) -> Labels {
    vec![
        ("cluster", cluster.to_owned()),
        ("endpoint", endpoint.to_owned()),
    ]
}
