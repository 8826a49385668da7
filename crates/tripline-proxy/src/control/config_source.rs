//! Breaker parameters pushed at run time: the proxy's breakers managed by
//! a `tripline-config` [`Applier`], fed by the `[config_source]` (a
//! watched file or an etcd key).
//!
//! # What is managed, under which name
//!
//! | breaker | managed as | a `[[breaker]]` table named |
//! |---|---|---|
//! | a route's breaker | one breaker | its name (the route's `breaker.name`, else the route's name) |
//! | a route's keyed breakers (`breaker_key`) | a registry family | the family, i.e. the route's breaker name: every key's breaker follows |
//! | a cluster's endpoint breakers | a registry family | the cluster's `breaker.name`, else the cluster's name: every endpoint's breaker follows |
//!
//! A pushed table patches: it changes the fields it names and leaves every
//! other field as the proxy file sets it (see
//! [`BreakerTable`](tripline_config::BreakerTable)). A table naming no breaker of the proxy makes a breaker of the applier's
//! own that no request uses (a route added later under that name gets its
//! config). A document is accepted or refused whole; a refused one changes
//! nothing and is counted in `tripline_config_rejected_total`.
//!
//! # The proxy file and pushed documents
//!
//! Pushed parameters win over the file's for the fields a document
//! named, and survive reloads: a reload (SIGHUP, `PUT /api/config`)
//! reconfigures a kept breaker to its new file config with the last pushed
//! table for its name laid on it, and a breaker the reload builds anew (a new
//! keyed family, a rebuilt cluster) is given that config before it takes
//! traffic, then re-registered with the applier. Breakers no document
//! named follow the file, as without a source. Routes and clusters a
//! reload removes stop being managed.
//!
//! # Operator overrides
//!
//! `POST /api/breakers/{name}/force-open` (`disable`, `metrics-only`) on a
//! managed route breaker goes through [`Applier::hold_locally`], `reset`
//! through [`Applier::clear_override`]: pushes keep changing its
//! thresholds, never its state, so the override wins until reset. A
//! document's `[[override]]` (a fleet override) holds the breaker the same
//! way until its `until` (the applier's timer ends it on time); a local
//! override holds over it, and `reset` hands the breaker back to it.
//! `GET /api/breakers` says which holds (`override_by`). Endpoint and keyed
//! breakers (members of a family) are overridden on the breaker itself,
//! which pushes do not touch either.
//!
//! # Shadow rollouts
//!
//! During a rollout's shadow period the applier runs a metrics-only twin
//! of each changed route breaker, and for a changed family (keyed route
//! breakers, a cluster's endpoint breakers) a twin per member key seen —
//! the request's key, the endpoint — so each member is judged on its own
//! traffic as the live one is. The proxy hands every outcome its breakers
//! record to the matching twin as well. Outside a shadow period that
//! costs one relaxed atomic load per request ([`Applier::is_shadowing`]):
//! no lock, no clone, no allocation. The shadow report says per family
//! how many keys would have tripped and which most, and names the changed
//! families no outcome reached (`not_judged`), so an operator never reads
//! silence about them as "no would-be trips".

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tripline::CircuitBreakerConfig;
use tripline::clock::SharedClock;
use tripline_config::etcd::{EtcdError, Gateway, fleet_status};
use tripline_config::{
    Applier, ConfigMetrics, EtcdOptions, EtcdSource, FileSource, InstanceStatus,
};

/// How long reading the fleet's status keys may take (for the dashboard).
const FLEET_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

use crate::config::{ConfigSourceKind, ConfigSourceSection, ProxyConfig};
use crate::control::Control;
use crate::table::Table;

/// The applier of a proxy with a `[config_source]`, and what it manages.
pub(crate) struct ConfigSource {
    applier: Applier,
    metrics: ConfigMetrics,
    section: ConfigSourceSection,
    /// The names adopted from the table in force, to release those a
    /// reload drops.
    adopted: Mutex<BTreeSet<String>>,
    /// Where the fleet's status keys are read, with an etcd source.
    fleet: Option<(Gateway, String)>,
}

impl ConfigSource {
    /// The applier for `config`'s `[config_source]`, on the proxy's clock;
    /// `None` without one.
    pub(crate) fn build(config: &ProxyConfig, clock: &SharedClock) -> Option<ConfigSource> {
        let section = config.config_source.clone()?;
        let instance = section
            .instance_id
            .clone()
            .unwrap_or_else(|| default_instance_id(config));
        let metrics = ConfigMetrics::default();
        let applier = Applier::builder()
            .instance_id(instance)
            .clock(clock.clone())
            .metrics(metrics.clone())
            .build();
        let fleet = match section.kind {
            ConfigSourceKind::Etcd => Some((
                Gateway::new(
                    section.endpoint.clone().unwrap_or_default(),
                    FLEET_READ_TIMEOUT,
                ),
                section.prefix.clone().unwrap_or_default(),
            )),
            ConfigSourceKind::File => None,
        };
        Some(ConfigSource {
            applier,
            metrics,
            section,
            adopted: Mutex::new(BTreeSet::new()),
            fleet,
        })
    }

    /// Every live instance's status under the etcd prefix (this one's
    /// included); `None` without an etcd source.
    pub(crate) async fn fleet(&self) -> Option<Result<Vec<InstanceStatus>, EtcdError>> {
        let (gateway, prefix) = self.fleet.as_ref()?;
        Some(fleet_status(gateway, prefix).await)
    }

    /// The applier (for the admin API's overrides and audit).
    pub(crate) fn applier(&self) -> &Applier {
        &self.applier
    }

    /// Registers `tripline_config_*` beside the proxy's metrics.
    pub(crate) fn register(&self, registry: &mut Registry) {
        self.metrics.register(registry);
    }

    /// The config a kept breaker named `file.name` should run after a
    /// reload: the file's, with the last pushed table for that name laid on
    /// it. Records `file` as what later pushes patch.
    pub(crate) fn effective(&self, file: CircuitBreakerConfig) -> CircuitBreakerConfig {
        self.applier.rebase(file)
    }

    /// Hands every breaker of `table` to the applier — pushed configs
    /// applied first — and releases the names the previous table had and
    /// this one lacks. `fresh_cluster` says whether a cluster was built
    /// for this table (a kept one is managed already). Call it before the
    /// table takes traffic.
    pub(crate) fn adopt(&self, table: &Table, fresh_cluster: impl Fn(&str) -> bool) {
        let mut names = BTreeSet::new();
        let mut refused = Vec::new();
        for route in &table.routes {
            if let Some(b) = &route.breaker {
                names.insert(b.name().to_owned());
                refused.extend(self.applier.adopt_breaker(b.clone()).err());
            }
            if let Some(keyed) = &route.guard.keyed_breaker {
                names.insert(keyed.registry.family().to_owned());
                refused.extend(self.applier.adopt_family(keyed.registry.clone()).err());
            }
        }
        for (name, cluster) in &table.clusters {
            names.insert(cluster.breakers().family().to_owned());
            if fresh_cluster(name) {
                refused.extend(self.applier.adopt_family(cluster.breakers().clone()).err());
            }
        }
        for e in refused {
            // Pushed configs were validated when pushed: this is a breaker
            // that cannot take one (its file config pins something else).
            tracing::warn!(error = %e, "config source: a breaker kept its file config");
        }
        let mut adopted = self.adopted.lock().unwrap_or_else(PoisonError::into_inner);
        for gone in adopted.difference(&names) {
            self.applier.release(gone);
        }
        *adopted = names;
    }
}

/// Starts the source (file watch or etcd watch and status reports) and
/// the rollout ticks, as tasks of `tasks`: they stop when the proxy
/// drains. A file whose directory cannot be watched fails the start.
pub(crate) fn spawn(inner: &Arc<Control>, tasks: &mut JoinSet<()>) -> std::io::Result<()> {
    let Some(source) = &inner.config_source else {
        return Ok(());
    };
    let applier = source.applier.clone();
    let section = &source.section;
    match section.kind {
        ConfigSourceKind::File => {
            let path = section.path.clone().unwrap_or_default();
            let watch =
                FileSource::watch(&path, applier.clone(), section.debounce).map_err(|e| {
                    std::io::Error::other(format!(
                        "config_source.path: cannot watch {}: {e}",
                        path.display()
                    ))
                })?;
            let every = section.status_interval;
            tasks.spawn(applier.clone().run_override_timer());
            tasks.spawn(async move {
                let _watch = watch;
                let mut ticks = tokio::time::interval(every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    applier.tick();
                }
            });
        }
        ConfigSourceKind::Etcd => {
            let mut options = EtcdOptions::new(
                section.endpoint.clone().unwrap_or_default(),
                section.prefix.clone().unwrap_or_default(),
            );
            options.lease_ttl = section.lease_ttl;
            options.status_interval = section.status_interval;
            // The etcd source's status loop also advances rollout steps.
            let etcd = EtcdSource::spawn(applier, options);
            tasks.spawn(async move {
                let _etcd = etcd;
                std::future::pending::<()>().await;
            });
        }
    }
    Ok(())
}

/// `<hostname>:<port of the first listener>`: stable across restarts of
/// one deployment, distinct between proxies on one host.
fn default_instance_id(config: &ProxyConfig) -> String {
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            let name = std::fs::read_to_string(p).ok()?;
            let name = name.trim();
            (!name.is_empty()).then(|| name.to_owned())
        })
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned());
    let port = config
        .listeners
        .first()
        .and_then(|l| l.address.rsplit_once(':'))
        .map_or("0", |(_, port)| port);
    format!("{host}:{port}")
}
