//! The proxy: routes, clusters and the upstream client, built once from a
//! config and shared by every connection.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use tripline::CircuitBreaker;
use tripline::budget::RetryBudget;
use tripline::clock::SharedClock;
use tripline::cluster::Cluster;

use crate::config::{ConfigError, ProxyConfig};
use crate::control::Control;
use crate::control::admin::{AdminState, follow_applier};
use crate::control::config_source::ConfigSource;
use crate::control::discovery::Discoveries;
use crate::control::dns::Dns;
use crate::control::reload::ReloadReport;
use crate::data::Ctx;
use crate::data::access_log::AccessLog;
use crate::http::drain::DrainSwitch;
use crate::table::fault::{Dice, Faults};
use crate::table::latency::LatencyFamilies;
use crate::table::metrics::ProxyMetrics;
use crate::table::overflow::{Overflow, OverflowMetrics};
use crate::table::{RouteShared, Table, build_clusters, build_routes};

pub mod explain;
pub(crate) mod runtime;
pub(crate) mod start;

/// A proxy built from a [`ProxyConfig`]: cheap to clone, clones share
/// every breaker, budget and pooled connection.
#[derive(Clone)]
pub struct Proxy {
    pub(crate) inner: Arc<Inner>,
}

/// The two sides, and what only starting the listeners needs.
pub(crate) struct Inner {
    /// The config the proxy started with: its listeners, admin listener,
    /// process-wide settings and access log (a reload does not rebind).
    pub(crate) config: ProxyConfig,
    /// Each listener's TLS acceptor, in listener order (`None`: cleartext);
    /// listeners are bound at start, so a reload does not change them.
    pub(crate) acceptors: Vec<Option<tokio_rustls::TlsAcceptor>>,
    /// The request path's context.
    pub(crate) data: Arc<Ctx>,
    /// Admin, reloads, pushed parameters, DNS: they publish new tables.
    pub(crate) control: Arc<Control>,
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
        let config_source = ConfigSource::build(&config, &clock);
        let applier = config_source.as_ref().map(|s| s.applier());
        let clusters = build_clusters(&config, &clock, |_| None)?;
        let overflow_metrics = OverflowMetrics::default();
        let overflows = Overflow::for_clusters(&config, &overflow_metrics, |_| None);
        let latency = LatencyFamilies::default();
        let shared = RouteShared {
            overflows: &overflows,
            latency: &latency,
        };
        let routes = build_routes(&config, &clusters, &upstreams, &clock, applier, shared)?;
        let dice = self.fault_seed.map_or_else(Dice::unseeded, Dice::seeded);
        let faults = Arc::new(Faults::new(&config, clock.clone(), dice));
        let access_log = AccessLog::new(&config.access_log);
        let admin = AdminState::build(&config)?;
        let discovery = Discoveries::new(&latency);
        let health = crate::control::health::Health::default();
        let metrics = ProxyMetrics::build(
            &routes,
            &clusters,
            overflow_metrics,
            latency,
            |registry, prefix| {
                faults.register(registry, prefix);
                discovery.register(registry, prefix);
                health.register(registry, prefix);
                access_log.register(registry, prefix);
                admin.register(registry, prefix);
                if let Some(source) = &config_source {
                    source.register(registry);
                }
            },
        )?;
        let metrics = Arc::new(metrics);
        let counters = metrics.route_counters(&routes);
        let table = Table {
            config: Arc::new(config.clone()),
            routes,
            clusters,
            upstreams,
            counters,
        };
        let dns = Dns::new(&table, &metrics.latency);
        discovery.follow(&table);
        let table = Arc::new(ArcSwap::from_pointee(table));
        let drain = DrainSwitch::default();
        let data = Arc::new(Ctx {
            table: table.clone(),
            settings: config.proxy.clone(),
            metrics: metrics.clone(),
            faults: faults.clone(),
            access_log,
            connect_log: Default::default(),
            drain: drain.clone(),
            coarse: Default::default(),
        });
        let control = Arc::new(Control {
            config: config.clone(),
            table,
            clock,
            reloading: Mutex::new(()),
            metrics,
            faults,
            admin,
            config_source,
            dns,
            discovery,
            health,
            drain,
        });
        control.admin.follow(&control.table.load());
        if let Some(source) = &control.config_source {
            source.adopt(&control.table.load(), |_| true);
            follow_applier(&control, source.applier());
        }
        Ok(Proxy {
            inner: Arc::new(Inner {
                config,
                acceptors,
                data,
                control,
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
            clock: None,
            fault_seed: None,
        }
    }

    /// The config the proxy runs (the last one loaded: reloads replace it).
    pub fn config(&self) -> Arc<ProxyConfig> {
        self.inner.control.config_in_force()
    }

    /// Replaces the routes and clusters with those of `config`, keeping
    /// breaker state where identity did not change (see the reload
    /// module's docs for what is kept). An invalid config changes nothing
    /// and is returned as the error, naming the field.
    pub fn reload(&self, config: ProxyConfig) -> Result<ReloadReport, ConfigError> {
        self.inner.control.reload(config)
    }

    /// The cluster named `name`: its endpoints, their breakers and
    /// outlier state (for an admin view, and for tests).
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.inner.control.table.load().clusters.get(name).cloned()
    }

    /// The breaker of the route named `name`, if it has one.
    pub fn route_breaker(&self, name: &str) -> Option<CircuitBreaker> {
        self.inner.control.table.load().route(name)?.breaker.clone()
    }

    /// The keyed breakers of the route named `name`, if it has a
    /// `breaker_key`: one breaker per header value (`None`: requests
    /// without the header).
    pub fn route_breakers(
        &self,
        name: &str,
    ) -> Option<tripline::registry::BreakerRegistry<crate::table::keyed_breaker::BreakerKey>> {
        let table = self.inner.control.table.load();
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
        Some(self.inner.control.table.load().route(name)?.budget.clone())
    }

    /// The exporter holding every route breaker, cluster and retry budget
    /// of this proxy (what the admin listener serves): to render or push
    /// the metrics without the admin listener, or to register more into.
    pub fn exporter(&self) -> &tripline_prometheus::Exporter {
        self.inner.control.metrics.exporter()
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.inner.control.table.load();
        f.debug_struct("Proxy")
            .field(
                "routes",
                &table.routes.iter().map(|r| &*r.name).collect::<Vec<_>>(),
            )
            .field("clusters", &table.clusters.keys().collect::<Vec<_>>())
            .finish()
    }
}
