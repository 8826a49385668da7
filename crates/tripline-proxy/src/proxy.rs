//! The proxy: routes, clusters and the upstream client, built once from a
//! config and shared by every connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::body::ProxyBody;
use crate::config::{ConfigError, ProxyConfig};
use crate::fallback::RouteFallback;
use crate::metrics::ProxyMetrics;
use crate::route::Route;

/// A proxy built from a [`ProxyConfig`]: cheap to clone, clones share
/// every breaker, budget and pooled connection.
#[derive(Clone)]
pub struct Proxy {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ProxyConfig,
    pub(crate) routes: Vec<Route>,
    pub(crate) clusters: BTreeMap<String, Cluster>,
    /// HTTP/1.1 upstreams.
    pub(crate) client: Client<HttpConnector, ProxyBody>,
    /// h2c upstreams (HTTP/2 with prior knowledge).
    pub(crate) h2c: Client<HttpConnector, ProxyBody>,
    /// Everything above, exported; and the proxy's own counters.
    pub(crate) metrics: ProxyMetrics,
}

/// Builds a [`Proxy`], optionally on another clock.
pub struct ProxyBuilder {
    config: ProxyConfig,
    clock: SharedClock,
}

impl ProxyBuilder {
    /// The clock of every breaker, budget and outlier detector (a
    /// [`ManualClock`](tripline::ManualClock) in tests, so open durations
    /// and ejections pass without waiting). Timeouts and deadlines always
    /// run on the runtime's time: they bound real I/O.
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// Validates the config and builds every route and cluster.
    pub fn build(self) -> Result<Proxy, ConfigError> {
        let config = self.config;
        config.validate()?;
        let mut clusters = BTreeMap::new();
        for (name, section) in &config.clusters {
            let cluster = Cluster::builder()
                .config(section.to_library(name))
                .clock(self.clock.clone())
                .build()
                .map_err(|e| {
                    ConfigError::invalid(format!("clusters.{name}.{}", e.field), e.constraint)
                })?;
            clusters.insert(name.clone(), cluster);
        }
        let mut routes = Vec::with_capacity(config.routes.len());
        for (i, section) in config.routes.iter().enumerate() {
            let at = format!("routes[{i}]");
            let cluster = clusters
                .get(&section.cluster)
                .cloned()
                .ok_or_else(|| ConfigError::invalid(format!("{at}.cluster"), "names no cluster"))?;
            let protocol = config
                .clusters
                .get(&section.cluster)
                .map(|c| c.protocol)
                .unwrap_or_default();
            let mut route = Route::build(&at, section, cluster, protocol, &self.clock)?;
            route.guard.fallback =
                RouteFallback::build(&at, section, &config, &clusters, &self.clock)?;
            routes.push(route);
        }
        let metrics = ProxyMetrics::build(&routes, &clusters)?;
        let p = &config.proxy;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(p.connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(p.pool_idle_timeout)
            .pool_max_idle_per_host(p.pool_max_idle_per_endpoint)
            .build(connector.clone());
        let h2c = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(p.pool_idle_timeout)
            .http2_only(true)
            .build(connector);
        Ok(Proxy {
            inner: Arc::new(Inner {
                config,
                routes,
                clusters,
                client,
                h2c,
                metrics,
            }),
        })
    }
}

impl Proxy {
    /// A proxy from `config`, on the production clock.
    pub fn try_new(config: ProxyConfig) -> Result<Proxy, ConfigError> {
        Self::builder(config).build()
    }

    /// A builder, to choose the clock.
    pub fn builder(config: ProxyConfig) -> ProxyBuilder {
        ProxyBuilder {
            config,
            clock: SharedClock::monotonic(),
        }
    }

    /// The config the proxy runs.
    pub fn config(&self) -> &ProxyConfig {
        &self.inner.config
    }

    /// The cluster named `name`: its endpoints, their breakers and
    /// outlier state (for an admin view, and for tests).
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.inner.clusters.get(name)
    }

    /// The breaker of the route named `name`, if it has one.
    pub fn route_breaker(&self, name: &str) -> Option<&CircuitBreaker> {
        self.route(name)?.breaker.as_ref()
    }

    /// The keyed breakers of the route named `name`, if it has a
    /// `breaker_key`: one breaker per header value (`None`: requests
    /// without the header).
    pub fn route_breakers(
        &self,
        name: &str,
    ) -> Option<&tripline::registry::BreakerRegistry<crate::keyed_breaker::BreakerKey>> {
        Some(&self.route(name)?.guard.keyed_breaker.as_ref()?.registry)
    }

    /// The retry budget of the route named `name`.
    pub fn route_budget(&self, name: &str) -> Option<&RetryBudget> {
        Some(&self.route(name)?.budget)
    }

    /// The exporter holding every route breaker, cluster and retry budget
    /// of this proxy (what the admin listener serves): to render or push
    /// the metrics without the admin listener, or to register more into.
    pub fn exporter(&self) -> &tripline_prometheus::Exporter {
        self.inner.metrics.exporter()
    }

    fn route(&self, name: &str) -> Option<&Route> {
        self.inner.routes.iter().find(|r| &*r.name == name)
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field(
                "routes",
                &self
                    .inner
                    .routes
                    .iter()
                    .map(|r| &*r.name)
                    .collect::<Vec<_>>(),
            )
            .field("clusters", &self.inner.clusters.keys().collect::<Vec<_>>())
            .finish()
    }
}
