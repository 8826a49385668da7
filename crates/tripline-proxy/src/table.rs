//! What a reload replaces as one: the config's routes and clusters, and
//! the counters of those routes. Requests load the table once and use that
//! one to the end, so a reload never shows a request half of each.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tripline::clock::SharedClock;
use tripline::cluster::Cluster;
use tripline_config::Applier;

use crate::config::{ConfigError, ProxyConfig};
use crate::table::fallback::{Kind, RouteFallback};
use crate::table::latency::LatencyFamilies;
use crate::table::metrics::RouteCounters;
use crate::table::overflow::Overflow;
use crate::table::route::Route;
use crate::upstream::ClusterUpstream;

pub mod fallback;
pub mod fault;
pub(crate) mod guard;
pub mod keyed_breaker;
pub(crate) mod latency;
pub mod metrics;
pub(crate) mod overflow;
pub(crate) mod ratelimit;
pub(crate) mod route;
pub(crate) mod shadow;

/// Routes and clusters of one config.
pub(crate) struct Table {
    pub(crate) config: Arc<ProxyConfig>,
    pub(crate) routes: Vec<Route>,
    pub(crate) clusters: BTreeMap<String, Cluster>,
    /// Each cluster's client (cleartext ones share theirs), by cluster name.
    pub(crate) upstreams: BTreeMap<String, ClusterUpstream>,
    /// One per route, in route order.
    pub(crate) counters: Vec<RouteCounters>,
}

impl Table {
    /// The route named `name`.
    pub(crate) fn route(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|r| &*r.name == name)
    }
}

/// Builds every cluster of `config` on `clock`, taking the one `keep`
/// gives for a name instead when it gives one (a reload keeps a cluster
/// whose section changed at most in its endpoints, with its endpoint
/// breakers and outlier state; the reload then hands it the new list).
pub(crate) fn build_clusters(
    config: &ProxyConfig,
    clock: &SharedClock,
    keep: impl Fn(&str) -> Option<Cluster>,
) -> Result<BTreeMap<String, Cluster>, ConfigError> {
    let mut clusters = BTreeMap::new();
    for (name, section) in &config.clusters {
        let cluster = match keep(name) {
            Some(kept) => kept,
            None => Cluster::builder()
                .config(section.to_library(name))
                .clock(clock.clone())
                .build()
                .map_err(|e| {
                    ConfigError::invalid(format!("clusters.{name}.{}", e.field), e.constraint)
                })?,
        };
        clusters.insert(name.clone(), cluster);
    }
    Ok(clusters)
}

/// What the routes of a table share beyond their clusters: each
/// cluster's overflow limits, and the proxy's latency histograms.
#[derive(Clone, Copy)]
pub(crate) struct RouteShared<'a> {
    pub(crate) overflows: &'a HashMap<String, Arc<Overflow>>,
    pub(crate) latency: &'a LatencyFamilies,
}

/// Builds every route of `config` over `clusters` and their clients, with
/// fresh policies; `shadow` is the config source's applier, the hook the
/// routes feed shadow twins through (`None` without a config source).
pub(crate) fn build_routes(
    config: &ProxyConfig,
    clusters: &BTreeMap<String, Cluster>,
    upstreams: &BTreeMap<String, ClusterUpstream>,
    clock: &SharedClock,
    shadow: Option<&Applier>,
    shared: RouteShared<'_>,
) -> Result<Vec<Route>, ConfigError> {
    let mut routes = Vec::with_capacity(config.routes.len());
    for (i, section) in config.routes.iter().enumerate() {
        let at = format!("routes[{i}]");
        let cluster = clusters
            .get(&section.cluster)
            .cloned()
            .ok_or_else(|| ConfigError::invalid(format!("{at}.cluster"), "names no cluster"))?;
        let upstream = upstreams
            .get(&section.cluster)
            .map(|u| u.upstream.clone())
            .ok_or_else(|| ConfigError::invalid(format!("{at}.cluster"), "names no cluster"))?;
        let mut route = Route::build(&at, section, cluster, upstream, clock)?;
        route.guard.fallback = RouteFallback::build(&at, section, clusters, upstreams, clock)?;
        route.shadow = shadow.cloned();
        route.overflow = shared.overflows.get(&section.cluster).cloned();
        route.latency = Some(shared.latency.for_route(
            &section.name,
            &section.cluster,
            config.proxy.metrics_detail,
        ));
        if let Some(fallback) = &mut route.guard.fallback
            && let Kind::Cluster(secondary) = &mut fallback.kind
        {
            secondary.shadow = shadow.cloned();
        }
        routes.push(route);
    }
    Ok(routes)
}
