//! The proxy: routes, clusters and the upstream client, built once from a
//! config and shared by every connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::config::{ConfigError, ProxyConfig};
use crate::metrics::ProxyMetrics;
use crate::route::Route;
use crate::upstream::ClusterUpstream;

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
    /// Each cluster's client (cleartext ones share theirs), by cluster name.
    pub(crate) upstreams: BTreeMap<String, ClusterUpstream>,
    /// Each listener's TLS acceptor, in listener order (`None`: cleartext).
    pub(crate) acceptors: Vec<Option<tokio_rustls::TlsAcceptor>>,
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
        let upstreams = crate::upstream::build(&config)?;
        let acceptors = config
            .listeners
            .iter()
            .enumerate()
            .map(|(i, l)| match &l.tls {
                Some(tls) => crate::tls::acceptor(&format!("listeners[{i}]"), tls).map(Some),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
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
            routes.push(Route::build(&at, section, cluster, upstream, &self.clock)?);
        }
        let metrics = ProxyMetrics::build(&routes, &clusters)?;
        Ok(Proxy {
            inner: Arc::new(Inner {
                config,
                routes,
                clusters,
                upstreams,
                acceptors,
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
