//! The proxy: routes, clusters and the upstream client, built once from a
//! config and shared by every connection.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::config::{ConfigError, ProxyConfig};
use crate::control::config_source::ConfigSource;
use crate::data::access_log::AccessLog;
use crate::table::fault::{Dice, Faults};
use crate::table::metrics::ProxyMetrics;
use crate::table::{Table, build_clusters, build_routes};

pub mod explain;
pub(crate) mod runtime;

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
    /// Routes, clusters and their clients, replaced whole by a reload.
    pub(crate) table: ArcSwap<Table>,
    /// The clock of every breaker, budget, outlier detector and fault TTL.
    pub(crate) clock: SharedClock,
    /// Reloads one at a time.
    pub(crate) reloading: Mutex<()>,
    /// Each listener's TLS acceptor, in listener order (`None`: cleartext);
    /// listeners are bound at start, so a reload does not change them.
    pub(crate) acceptors: Vec<Option<tokio_rustls::TlsAcceptor>>,
    /// Everything above, exported; and the proxy's own counters.
    pub(crate) metrics: ProxyMetrics,
    /// Faults injected for drills (configured, and switched on at run time).
    pub(crate) faults: Faults,
    /// One line per request, written off the request path.
    pub(crate) access_log: AccessLog,
    /// The admin API's token, event hub and audit log.
    pub(crate) admin: crate::control::admin::AdminState,
    /// The applier of pushed breaker parameters (`[config_source]`).
    pub(crate) config_source: Option<crate::control::config_source::ConfigSource>,
    /// What the DNS refreshers follow: reloads update it (their clusters
    /// may be added, rebuilt or removed), the refreshers' supervisor runs it.
    pub(crate) dns: crate::control::dns::Dns,
    /// Rate-limits the log lines of failed upstream connections.
    pub(crate) connect_log: crate::upstream::connect_log::ConnectFailureLog,
}

/// Builds a [`Proxy`], optionally on another clock.
pub struct ProxyBuilder {
    config: ProxyConfig,
    /// `None`: the production [`SharedClock::monotonic`], made only at
    /// `build`, so that choosing another clock never starts its ticker.
    clock: Option<SharedClock>,
    fault_seed: Option<u64>,
}

impl ProxyBuilder {
    /// The clock of every breaker, budget and outlier detector (a
    /// [`ManualClock`](tripline::ManualClock) in tests, so open durations
    /// and ejections pass without waiting), and of runtime faults' TTLs.
    /// Timeouts and deadlines always run on the runtime's time: they bound
    /// real I/O.
    ///
    /// `tripline proxy` serves on an
    /// [`EventLoopClock`](tripline::clock::EventLoopClock), which its
    /// runtimes refresh ([`run_until`](Proxy::run_until) installs the hooks):
    /// no ticker thread preempting the threads that serve.
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
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
        let clock = self.clock.unwrap_or_else(SharedClock::monotonic);
        let upstreams = crate::upstream::build(&config, |_| None, false)?;
        let acceptors = config
            .listeners
            .iter()
            .enumerate()
            .map(|(i, l)| match &l.tls {
                Some(tls) => {
                    crate::upstream::tls::acceptor(&format!("listeners[{i}]"), tls).map(Some)
                }
                None => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let clusters = build_clusters(&config, &clock, |_| None)?;
        let routes = build_routes(&config, &clusters, &upstreams, &clock)?;
        let dice = self.fault_seed.map_or_else(Dice::unseeded, Dice::seeded);
        let faults = Faults::new(&config, clock.clone(), dice);
        let access_log = AccessLog::new(&config.access_log);
        let admin = crate::control::admin::AdminState::build(&config)?;
        let config_source = ConfigSource::build(&config, &clock);
        let metrics = ProxyMetrics::build(&routes, &clusters, |registry, prefix| {
            faults.register(registry, prefix);
            access_log.register(registry, prefix);
            admin.register(registry, prefix);
            if let Some(source) = &config_source {
                source.register(registry);
            }
        })?;
        let counters = metrics.route_counters(&routes);
        let table = Table {
            config: Arc::new(config.clone()),
            routes,
            clusters,
            upstreams,
            counters,
        };
        let dns = crate::control::dns::Dns::new(&table);
        let proxy = Proxy {
            inner: Arc::new(Inner {
                config,
                table: ArcSwap::from_pointee(table),
                clock,
                reloading: Mutex::new(()),
                acceptors,
                metrics,
                faults,
                access_log,
                admin,
                config_source,
                dns,
                connect_log: Default::default(),
            }),
        };
        proxy.inner.admin.follow(&proxy.inner.table.load());
        if let Some(source) = &proxy.inner.config_source {
            source.adopt(&proxy.inner.table.load(), |_| true);
            crate::control::admin::follow_applier(&proxy.inner, source.applier());
        }
        Ok(proxy)
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
            clock: None,
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
    ) -> Option<tripline::registry::BreakerRegistry<crate::table::keyed_breaker::BreakerKey>> {
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
