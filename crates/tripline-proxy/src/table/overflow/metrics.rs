//! The overflow limits on `/metrics`: refusals counted as they happen, and
//! what each cluster's limits hold, read when Prometheus scrapes.
//!
//! The gauges cost the request path nothing: they are read from the same
//! atomics and semaphores admission uses. The collector keeps a weak
//! reference to every [`Overflow`] built, so a cluster that a reload
//! removed (or a table a failed reload threw away) drops out by itself.
//! A reload that changes a cluster's limits builds a new `Overflow` while
//! requests still hold the old one; the newest is the cluster's series,
//! since it is the one new requests are admitted by.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{Labels, Overflow};

/// The overflow limits' metrics, shared by every table the proxy builds.
#[derive(Clone, Default)]
pub(crate) struct OverflowMetrics {
    /// Requests, retries and tries refused, by cluster and limit.
    pub(super) refused: Family<Labels, Counter>,
    /// Every `Overflow` built, oldest first.
    built: Arc<Mutex<Vec<Weak<Overflow>>>>,
}

/// The collector of the in-use and limit gauges, under the exporter's prefix.
#[derive(Debug)]
struct Gauges {
    in_use: String,
    limit: String,
    built: Arc<Mutex<Vec<Weak<Overflow>>>>,
}

impl fmt::Debug for OverflowMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverflowMetrics").finish_non_exhaustive()
    }
}

impl OverflowMetrics {
    /// Registers the refusal counter and the gauges under `prefix`.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.register(
            format!("{prefix}_proxy_upstream_overflow"),
            "Requests, retries and tries refused by a cluster's overflow limits (UO), by cluster and limit",
            self.refused.clone(),
        );
        registry.register_collector(Box::new(Gauges {
            in_use: format!("{prefix}_proxy_upstream_in_use"),
            limit: format!("{prefix}_proxy_upstream_limit"),
            built: self.built.clone(),
        }));
    }

    /// Notes a new `Overflow`, forgetting those no table holds any more.
    pub(super) fn track(&self, overflow: &Arc<Overflow>) {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built.retain(|w| w.strong_count() > 0);
        built.push(Arc::downgrade(overflow));
    }
}

impl Gauges {
    /// The live `Overflow`s, the newest of each cluster only.
    fn current(&self) -> Vec<Arc<Overflow>> {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = HashSet::new();
        let mut out: Vec<Arc<Overflow>> = built
            .iter()
            .rev()
            .filter_map(Weak::upgrade)
            .filter(|o| seen.insert(o.cluster.clone()))
            .collect();
        out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        out
    }
}

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        // One row per cluster and limit: (cluster, limit, in use, max).
        let current = self.current();
        let rows: Vec<_> = current
            .iter()
            .flat_map(|o| {
                let held = o.held().into_iter();
                held.map(|(limit, in_use, max)| (o.cluster.as_str(), limit, in_use, max))
            })
            .collect();
        gauge_family(
            &mut encoder,
            &self.in_use,
            "What a cluster's overflow limits hold now (requests, connections, pending requests and retries in flight), by cluster and limit",
            rows.iter().map(|(c, l, in_use, _)| (*c, *l, Some(*in_use))),
        )?;
        gauge_family(
            &mut encoder,
            &self.limit,
            "A cluster's overflow limits as configured, by cluster and limit",
            rows.iter().map(|(c, l, _, max)| (*c, *l, *max)),
        )
    }
}

/// One gauge family: a series per `(cluster, limit)` row with a value.
fn gauge_family<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (&'a str, &'static str, Option<i64>)>,
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (cluster, limit, value) in rows {
        if let Some(value) = value {
            let labels = labels(cluster, limit);
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

fn labels(cluster: &str, limit: &str) -> Labels {
    vec![("cluster", cluster.to_owned()), ("limit", limit.to_owned())]
}
