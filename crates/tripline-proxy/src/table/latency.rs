//! Latency histograms: how long each route's requests and each cluster's
//! tries take, for p50/p99 per route in Grafana.
//!
//! | metric | labels | what is timed |
//! |---|---|---|
//! | `tripline_proxy_request_duration_seconds` | `route` | a forwarded request, from the start of its tries (after the rate limit and the bulkhead) to the end of its answer's body (Envoy's `downstream_rq_time`); refusals before any try are counted in `tripline_proxy_refusals_total` instead |
//! | `tripline_proxy_upstream_duration_seconds` | `cluster` | a try, from sending it to its answer's head |
//! | `tripline_proxy_upstream_endpoint_duration_seconds` | `cluster`, `endpoint` | the same per endpoint, with `[proxy] metrics_detail = "endpoint"` |
//!
//! Classic histograms with fixed buckets from 0.5 ms to 10 s, no
//! exemplars. Recording is two relaxed atomic adds on a histogram the
//! route holds (no label lookup, no lock, no allocation); a scrape sums
//! the buckets. Label values come from the config (routes, clusters) or
//! from the cluster's endpoints, so the series are bounded; a reload
//! keeps the series of the routes and clusters that stay, and drops the
//! endpoint series (the endpoints that stay come back on their next try);
//! an endpoint that DNS or a registry removes takes its series with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use tripline::cluster::Endpoint;

use crate::config::MetricsDetail;

type Labels = Vec<(&'static str, String)>;

/// Upper bounds of the buckets, in nanoseconds (and `+Inf` after them).
const BOUNDS_NANOS: [u64; 14] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One histogram: a count per bucket and the sum, lock-free.
#[derive(Debug, Default)]
struct Counts {
    buckets: [AtomicU64; BOUNDS_NANOS.len() + 1],
    sum_nanos: AtomicU64,
}

/// A latency histogram, shared by its family and the routes that record
/// into it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram(Arc<Counts>);

impl Histogram {
    /// Counts one duration.
    pub(crate) fn observe(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.0.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.0.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets = [(0.0, 0); BOUNDS_NANOS.len() + 1];
        for (i, slot) in buckets.iter_mut().enumerate() {
            let bound = BOUNDS_NANOS
                .get(i)
                .map_or(f64::INFINITY, |&n| n as f64 / 1e9);
            *slot = (bound, self.0.buckets[i].load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|b| b.1).sum();
        let sum = self.0.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The histogram families, one set per proxy (a reload takes its routes'
/// histograms from the same families, so kept series carry on).
#[derive(Clone, Default)]
pub(crate) struct LatencyFamilies {
    request: Family<Labels, Histogram>,
    upstream: Family<Labels, Histogram>,
    endpoint: Family<Labels, Histogram>,
}

/// What one route records into.
pub(crate) struct RouteLatency {
    /// The route's requests.
    pub(crate) request: Histogram,
    /// The route's cluster's tries.
    upstream: Histogram,
    /// Per endpoint, with `metrics_detail = "endpoint"`.
    endpoints: Option<(Family<Labels, Histogram>, String)>,
}

impl RouteLatency {
    /// Counts one try to `endpoint` that took `took` to its answer's head.
    pub(crate) fn observe_upstream(&self, endpoint: &str, took: Duration) {
        self.upstream.observe(took);
        if let Some((family, cluster)) = &self.endpoints {
            family
                .get_or_create(&vec![
                    ("cluster", cluster.clone()),
                    ("endpoint", endpoint.to_owned()),
                ])
                .observe(took);
        }
    }
}

impl LatencyFamilies {
    /// Registers the families under `prefix`.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.register(
            format!("{prefix}_proxy_request_duration_seconds"),
            "Forwarded requests by route, from the start of their tries to the end of the answer's body",
            self.request.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_upstream_duration_seconds"),
            "Tries by cluster, from sending to the answer's head",
            self.upstream.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_upstream_endpoint_duration_seconds"),
            "Tries by cluster and endpoint, from sending to the answer's head (metrics_detail = \"endpoint\")",
            self.endpoint.clone(),
        );
    }

    /// The histograms of `route` over `cluster`.
    pub(crate) fn for_route(
        &self,
        route: &str,
        cluster: &str,
        detail: MetricsDetail,
    ) -> RouteLatency {
        RouteLatency {
            request: self
                .request
                .get_or_create(&vec![("route", route.to_owned())])
                .clone(),
            upstream: self
                .upstream
                .get_or_create(&vec![("cluster", cluster.to_owned())])
                .clone(),
            endpoints: (detail == MetricsDetail::Endpoint)
                .then(|| (self.endpoint.clone(), cluster.to_owned())),
        }
    }

    /// Drops a removed route's series.
    pub(crate) fn forget_route(&self, route: &str) {
        self.request.remove(&vec![("route", route.to_owned())]);
    }

    /// Drops a removed cluster's series.
    pub(crate) fn forget_cluster(&self, cluster: &str) {
        self.upstream.remove(&vec![("cluster", cluster.to_owned())]);
    }

    /// Drops the series of the endpoints of `cluster` that were in
    /// `before` and are not in `after`: DNS and registries change a
    /// cluster's members at every deploy, and the scrape must not grow
    /// with every endpoint that ever served.
    pub(crate) fn forget_departed(&self, cluster: &str, before: &[Endpoint], after: &[Endpoint]) {
        for gone in before
            .iter()
            .filter(|b| !after.iter().any(|a| a.id() == b.id()))
        {
            self.endpoint.remove(&vec![
                ("cluster", cluster.to_owned()),
                ("endpoint", gone.id().as_str().to_owned()),
            ]);
        }
    }

    /// Drops every endpoint series (a reload: endpoints may have left).
    pub(crate) fn forget_endpoints(&self) {
        self.endpoint.clear();
    }
}
