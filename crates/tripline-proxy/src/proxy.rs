//! The proxy: routes, clusters and the upstream client, built once from a
//! config and shared by every connection.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::access_log::AccessLog;
use crate::body::ProxyBody;
use crate::config::{ConfigError, ProxyConfig};
use crate::fault::{Dice, Faults};
use crate::metrics::ProxyMetrics;
use crate::table::{Table, build_clusters, build_routes};

/// A proxy built from a [`ProxyConfig`]: cheap to clone, clones share
/// every breaker, budget and pooled connection.
#[derive(Clone)]
pub struct Proxy {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The config the proxy started with: its listeners, admin listener,
    /// process-wide settings and access log (a reload does not rebind).
    pub(crate) config: ProxyConfig,
    /// Routes and clusters, replaced whole by a reload.
    pub(crate) table: ArcSwap<Table>,
    /// The clock of every breaker, budget, outlier detector and fault TTL.
    pub(crate) clock: SharedClock,
    /// Reloads one at a time.
    pub(crate) reloading: Mutex<()>,
    /// HTTP/1.1 upstreams.
    pub(crate) client: Client<HttpConnector, ProxyBody>,
    /// h2c upstreams (HTTP/2 with prior knowledge).
    pub(crate) h2c: Client<HttpConnector, ProxyBody>,
    /// Everything above, exported; and the proxy's own counters.
    pub(crate) metrics: ProxyMetrics,
    /// Faults injected for drills (configured, and switched on at run time).
    pub(crate) faults: Faults,
    /// One line per request, written off the request path.
    pub(crate) access_log: AccessLog,
}

/// Builds a [`Proxy`], optionally on another clock.
pub struct ProxyBuilder {
    config: ProxyConfig,
    clock: SharedClock,
    fault_seed: Option<u64>,
}

impl ProxyBuilder {
    /// The clock of every breaker, budget and outlier detector (a
    /// [`ManualClock`](tripline::ManualClock) in tests, so open durations
    /// and ejections pass without waiting), and of runtime faults' TTLs.
    /// Timeouts and deadlines always run on the runtime's time: they bound
    /// real I/O.
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// Seeds the rolls of faults injected at a percent below 100, so a
    /// drill (or a test) replays the same decisions; unseeded by default.
    pub fn fault_seed(mut self, seed: u64) -> Self {
        self.fault_seed = Some(seed);
        self
    }

    /// Validates the config and builds every route and cluster.
    pub fn build(self) -> Result<Proxy, ConfigError> {
        let config = self.config;
        config.validate()?;
        let clusters = build_clusters(&config, &self.clock, |_| None)?;
        let routes = build_routes(&config, &clusters, &self.clock)?;
        let dice = self.fault_seed.map_or_else(Dice::unseeded, Dice::seeded);
        let faults = Faults::new(&config, self.clock.clone(), dice);
        let access_log = AccessLog::new(&config.access_log);
        let metrics = ProxyMetrics::build(&routes, &clusters, |registry, prefix| {
            faults.register(registry, prefix);
            access_log.register(registry, prefix);
        })?;
        let counters = metrics.route_counters(&routes);
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
        let table = Table {
            config: Arc::new(config.clone()),
            routes,
            clusters,
            counters,
        };
        Ok(Proxy {
            inner: Arc::new(Inner {
                config,
                table: ArcSwap::from_pointee(table),
                clock: self.clock,
                reloading: Mutex::new(()),
                client,
                h2c,
                metrics,
                faults,
                access_log,
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
            fault_seed: None,
        }
    }

    /// The config the proxy runs (the last one loaded: reloads replace it).
    pub fn config(&self) -> Arc<ProxyConfig> {
        self.inner.table.load().config.clone()
    }

    /// The cluster named `name`: its endpoints, their breakers and
    /// outlier state (for an admin view, and for tests).
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.inner.table.load().clusters.get(name).cloned()
    }

    /// The breaker of the route named `name`, if it has one.
    pub fn route_breaker(&self, name: &str) -> Option<CircuitBreaker> {
        self.inner.table.load().route(name)?.breaker.clone()
    }

    /// The keyed breakers of the route named `name`, if it has a
    /// `breaker_key`: one breaker per header value (`None`: requests
    /// without the header).
    pub fn route_breakers(
        &self,
        name: &str,
    ) -> Option<tripline::registry::BreakerRegistry<crate::keyed_breaker::BreakerKey>> {
        let table = self.inner.table.load();
        Some(
            table
                .route(name)?
                .guard
                .keyed_breaker
                .as_ref()?
                .registry
                .clone(),
        )
    }

    /// The retry budget of the route named `name`.
    pub fn route_budget(&self, name: &str) -> Option<RetryBudget> {
        Some(self.inner.table.load().route(name)?.budget.clone())
    }

    /// The exporter holding every route breaker, cluster and retry budget
    /// of this proxy (what the admin listener serves): to render or push
    /// the metrics without the admin listener, or to register more into.
    pub fn exporter(&self) -> &tripline_prometheus::Exporter {
        self.inner.metrics.exporter()
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.inner.table.load();
        f.debug_struct("Proxy")
            .field(
                "routes",
                &table.routes.iter().map(|r| &*r.name).collect::<Vec<_>>(),
            )
            .field("clusters", &table.clusters.keys().collect::<Vec<_>>())
            .finish()
    }
}
