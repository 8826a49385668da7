//! Prometheus metrics of config changes: how many documents each source
//! had applied and refused, and the version in force.
//!
//! Registered into a prometheus-client [`Registry`] — the same one the
//! tripline exporter serves — as `tripline_config_applied_total{source}`,
//! `tripline_config_rejected_total{source}` and `tripline_config_version`.
//! The `source` label takes the few fixed source names (`file`, `etcd`,
//! `api`, `rollback`), so its cardinality stays bounded.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type SourceLabels = Vec<(String, String)>;

/// The config metrics; cheap to clone (the values are shared).
///
/// ```
/// use prometheus_client::registry::Registry;
/// use tripline_config::{Applier, ConfigMetrics, Origin};
///
/// let metrics = ConfigMetrics::default();
/// let mut registry = Registry::default(); // the one the exporter is in
/// metrics.register(&mut registry);
/// let applier = Applier::builder().metrics(metrics.clone()).build();
/// let _ = applier.apply(b"[[breaker]]\nname = \"\"\n", Origin::new("api", None));
/// assert_eq!(metrics.rejected_count("api"), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ConfigMetrics {
    applied: Family<SourceLabels, Counter>,
    rejected: Family<SourceLabels, Counter>,
    version: Gauge,
}

impl ConfigMetrics {
    /// Registers the three metrics into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "tripline_config_applied",
            "Config documents applied, by source",
            self.applied.clone(),
        );
        registry.register(
            "tripline_config_rejected",
            "Config documents refused whole (invalid, oversize, not UTF-8), by source",
            self.rejected.clone(),
        );
        registry.register(
            "tripline_config_version",
            "The config version in force on this instance",
            self.version.clone(),
        );
    }

    pub(crate) fn applied(&self, source: &str, version: u64) {
        self.applied.get_or_create(&labels(source)).inc();
        self.set_version(version);
    }

    pub(crate) fn rejected(&self, source: &str) {
        self.rejected.get_or_create(&labels(source)).inc();
    }

    pub(crate) fn set_version(&self, version: u64) {
        self.version.set(i64::try_from(version).unwrap_or(i64::MAX));
    }

    /// Documents applied from `source` so far.
    pub fn applied_count(&self, source: &str) -> u64 {
        self.applied.get_or_create(&labels(source)).get()
    }

    /// Documents refused from `source` so far.
    pub fn rejected_count(&self, source: &str) -> u64 {
        self.rejected.get_or_create(&labels(source)).get()
    }
}

fn labels(source: &str) -> SourceLabels {
    vec![("source".to_owned(), source.to_owned())]
}
