//! Reloading the config while serving (SIGHUP in `tripline proxy`).
//!
//! A new config is validated and built in full before anything changes:
//! an invalid one changes nothing and the last good config keeps serving.
//! A valid one replaces routes and clusters as one table, atomically for
//! new requests (requests in flight finish on the table they started
//! with). What a breaker has learnt is kept wherever its identity did not
//! change:
//!
//! - a route's breaker, for a route of the same name whose breaker has the
//!   same name: the same [`CircuitBreaker`](tripline::CircuitBreaker), its
//!   changed config applied by live reconfiguration (an open breaker stays
//!   open);
//! - a cluster of the same name whose config changed at most in its
//!   `endpoints` and `dns_refresh`: the same
//!   [`Cluster`](tripline::cluster::Cluster), with its endpoint breakers and
//!   outlier state. A new endpoint list is applied in place by
//!   [`Cluster::set_endpoints`](tripline::cluster::Cluster::set_endpoints)
//!   (as DNS re-resolution does): an endpoint that stays keeps its open
//!   breaker or its ejection, an added one starts fresh, a removed one is
//!   dropped (calls in flight to it finish). Any other change (balancer,
//!   panic threshold, endpoint breaker template, outlier detection, TLS,
//!   protocol) rebuilds the cluster: those are fixed when a cluster is
//!   built;
//! - a route's keyed breakers (`breaker_key`: one per tenant, say), for a
//!   route of the same name whose breaker template, family name and
//!   `breaker_key` section are unchanged: the same registry, every key's
//!   breaker with its state (see [`keyed_breaker`](crate::table::keyed_breaker);
//!   a change to those gives a fresh family, every key closed);
//! - a route's retry budget, for a route of the same name and unchanged
//!   budget config.
//!
//! A route's rate-limit buckets start afresh: they are rebuilt with the
//! route.
//!
//! DNS refreshers follow the new table (see [`dns`](crate::control::dns)): a
//! cluster added or rebuilt with `dns_refresh` gets one, the refresher of
//! a cluster removed or rebuilt stops, and a kept cluster's refresher
//! takes its new endpoint list and interval.
//!
//! The exporter follows: sources that went away or were replaced are
//! unregistered before their successors are registered, so no series is
//! exported twice and removed routes disappear from the next scrape.
//! Listeners, the admin listener, `[proxy]`, `[access_log]` and
//! `[config_source]` are bound or built at start: a change to them is
//! reported as needing a restart.
//!
//! With a `[config_source]`, the fields pushed for a breaker win over the
//! file's: a kept breaker is reconfigured to the reloaded file's config
//! with the last pushed table for its name laid on it, and what the reload
//! built anew is given the same and handed to the applier before the new
//! table takes traffic.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError};

use tripline_prometheus::{Detail, SourceKind};

use crate::config::{ClusterSection, ConfigError, ProxyConfig};
use crate::control::Control;
use crate::table::keyed_breaker::KeyedBreaker;
use crate::table::overflow::Overflow;
use crate::table::{RouteShared, Table, build_clusters, build_routes};

/// What a reload changed, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Routes the new config added.
    pub routes_added: Vec<String>,
    /// Routes the new config no longer has.
    pub routes_removed: Vec<String>,
    /// Route breakers whose state carried over (by breaker name).
    pub breakers_kept: Vec<String>,
    /// Routes whose keyed breakers (`breaker_key`) carried over, by family
    /// name: every key's breaker with its state.
    pub keyed_breakers_kept: Vec<String>,
    /// Routes whose retry budget carried over.
    pub budgets_kept: Vec<String>,
    /// Clusters kept, endpoint breakers and ejections included (those in
    /// [`clusters_endpoints_changed`](Self::clusters_endpoints_changed)
    /// too).
    pub clusters_kept: Vec<String>,
    /// Kept clusters whose endpoint list (or `dns_refresh`) changed: the
    /// new list was applied in place, endpoints that stay keeping their
    /// state.
    pub clusters_endpoints_changed: Vec<String>,
    /// Clusters built anew (new, or their config changed beyond their
    /// endpoints).
    pub clusters_built: Vec<String>,
    /// Sections that changed but take effect only on restart
    /// (`listeners`, `admin`, `proxy`, `access_log`, `config_source`).
    pub restart_required: Vec<String>,
}

impl Control {
    /// Replaces the routes and clusters with those of `config` (see the
    /// module docs for what is kept), and publishes the new table. An
    /// invalid config changes nothing and is returned as the error,
    /// naming the field.
    pub(crate) fn reload(&self, config: ProxyConfig) -> Result<ReloadReport, ConfigError> {
        self.reload_by(config, "reload", "local")
    }

    /// [`reload`](Self::reload), audited as coming from `source` (and `who`).
    pub(crate) fn reload_by(
        &self,
        config: ProxyConfig,
        source: &str,
        who: &str,
    ) -> Result<ReloadReport, ConfigError> {
        let old = self.config_in_force();
        let new = config.clone();
        let result = self.swap(config);
        // Audits the attempt and logs it: one line, saying what changed.
        crate::control::admin::after_reload(self, &old, &new, source, who, &result);
        result
    }

    fn swap(&self, config: ProxyConfig) -> Result<ReloadReport, ConfigError> {
        config.validate()?;
        let inner = self;
        let _one_at_a_time = inner
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = inner.table.load_full();
        let mut report = ReloadReport::default();

        // A cluster and its client are kept together: the client's
        // resolved names are what the cluster's DNS refresher writes.
        let keeps = &|name: &str| match (old.config.clusters.get(name), config.clusters.get(name)) {
            (Some(before), Some(after)) => same_but_endpoints(before, after),
            _ => false,
        };
        let kept_cluster = &|name: &str| {
            keeps(name)
                .then(|| old.clusters.get(name).cloned())
                .flatten()
        };
        let clusters = build_clusters(&config, &inner.clock, kept_cluster)?;
        let clients_changed = !crate::upstream::same_clients(&old.config.proxy, &config.proxy);
        let upstreams = crate::upstream::build(
            &config,
            |name| {
                keeps(name)
                    .then(|| old.upstreams.get(name).cloned())
                    .flatten()
            },
            clients_changed,
        )?;
        for name in config.clusters.keys() {
            match kept_cluster(name) {
                Some(_) => report.clusters_kept.push(name.clone()),
                None => report.clusters_built.push(name.clone()),
            }
        }
        let applier = inner.config_source.as_ref().map(|s| s.applier());
        // A cluster whose limits stay keeps their counts of what is in flight.
        let overflows = Overflow::for_clusters(&config, &inner.metrics.overflow, |name| {
            let route = old.routes.iter().find(|r| r.cluster.name() == name)?;
            route.overflow.clone()
        });
        let shared = RouteShared {
            overflows: &overflows,
            latency: &inner.metrics.latency,
        };
        let mut routes = build_routes(
            &config,
            &clusters,
            &upstreams,
            &inner.clock,
            applier,
            shared,
        )?;
        let mut reconfigure = Vec::new();
        for (route, section) in routes.iter_mut().zip(&config.routes) {
            let before = old.routes.iter().zip(&old.config.routes);
            let Some((was, was_section)) = before.clone().find(|(r, _)| r.name == route.name)
            else {
                report.routes_added.push(section.name.clone());
                continue;
            };
            if let (Some(fresh), Some(kept)) = (&route.breaker, &was.breaker)
                && fresh.name() == kept.name()
            {
                // Parameters pushed through `[config_source]` win over the
                // file's for the breakers a document named.
                let wanted = match &inner.config_source {
                    Some(source) => source.effective(fresh.config()),
                    None => fresh.config(),
                };
                if wanted != kept.config() {
                    reconfigure.push((kept.clone(), wanted));
                }
                report.breakers_kept.push(kept.name().to_owned());
                route.breaker = Some(kept.clone());
            }
            if let (Some(_), Some(kept)) = (&route.guard.keyed_breaker, &was.guard.keyed_breaker)
                && KeyedBreaker::same_family(was_section, section)
            {
                report
                    .keyed_breakers_kept
                    .push(kept.registry.family().to_owned());
                route.guard.keyed_breaker = Some(kept.carried_over());
            }
            if section.retry.budget == was_section.retry.budget {
                route.budget = was.budget.clone();
                report.budgets_kept.push(section.name.clone());
            }
        }
        // Everything is built; from here on the reload applies. A config
        // that passed validation is one the breakers accept.
        for (breaker, new_config) in reconfigure {
            breaker.reconfigure(new_config).map_err(|e| {
                ConfigError::invalid(
                    format!("breaker {}.{}", breaker.name(), e.field),
                    e.constraint,
                )
            })?;
        }
        // Kept clusters take their new endpoint lists; DNS refreshers
        // follow the new clusters.
        let kept = |name: &str| report.clusters_kept.iter().any(|k| k == name);
        inner
            .dns
            .reload(&old.config, &config, &clusters, &upstreams, kept)?;
        inner.discovery.reload(&config, &clusters, kept);
        for name in &report.clusters_kept {
            if old.config.clusters.get(name) != config.clusters.get(name) {
                report.clusters_endpoints_changed.push(name.clone());
            }
        }
        let names: BTreeSet<&str> = routes.iter().map(|r| &*r.name).collect();
        for r in &old.routes {
            if !names.contains(&*r.name) {
                report.routes_removed.push(r.name.to_string());
                inner.metrics.forget_route(&r.name);
            }
        }
        for name in old.clusters.keys() {
            if !clusters.contains_key(name) {
                inner.metrics.latency.forget_cluster(name);
            }
        }
        // Endpoints may have left: their series come back on their next try.
        inner.metrics.latency.forget_endpoints();
        self.follow_in_exporter(&old, &routes, &clusters, &report);
        let counters = inner.metrics.route_counters(&routes);
        report.restart_required = restart_required(&inner.config, &config);
        inner.faults.configure(&config);
        let table = Arc::new(Table {
            config: Arc::new(config),
            routes,
            clusters,
            upstreams,
            counters,
        });
        if let Some(source) = &inner.config_source {
            // Before the table takes traffic: what it built anew starts
            // on the pushed parameters.
            source.adopt(&table, |name| {
                !report.clusters_kept.iter().any(|k| k == name)
            });
        }
        // Before the table takes traffic: a rebuilt cluster's endpoints
        // that failed their health checks start out.
        inner.health.adopt(&table);
        inner.table.store(table);
        inner.health.follow();
        Ok(report)
    }

    /// Unregisters what the reload dropped or replaced, then registers
    /// what it built anew. A refusal (a name another source holds) is
    /// logged: the proxy serves the new config regardless.
    fn follow_in_exporter(
        &self,
        old: &Table,
        routes: &[crate::table::route::Route],
        clusters: &std::collections::BTreeMap<String, tripline::cluster::Cluster>,
        report: &ReloadReport,
    ) {
        let exporter = self.metrics.exporter();
        let kept_breaker = |name: &str| report.breakers_kept.iter().any(|k| k == name);
        let kept_budget = |route: &str| report.budgets_kept.iter().any(|k| k == route);
        let kept_cluster = |name: &str| report.clusters_kept.iter().any(|k| k == name);
        let kept_family = |name: &str| report.keyed_breakers_kept.iter().any(|k| k == name);
        for r in &old.routes {
            if let Some(b) = &r.breaker
                && !kept_breaker(b.name())
            {
                exporter.unregister(SourceKind::Breaker, b.name());
            }
            if !kept_budget(&r.name) {
                exporter.unregister(SourceKind::Budget, &r.name);
            }
            // A route's bulkhead is built anew with the route: its slots
            // are the new table's (the old one's drain with its requests).
            if r.bulkhead.is_some() {
                exporter.unregister(SourceKind::Bulkhead, &r.name);
            }
            // A kept family stays registered: the same registry, its
            // counts going on.
            if let Some(keyed) = &r.guard.keyed_breaker
                && !kept_family(keyed.registry.family())
            {
                exporter.unregister(SourceKind::Registry, keyed.registry.family());
            }
        }
        for name in old.clusters.keys() {
            if !kept_cluster(name) {
                exporter.unregister(SourceKind::Cluster, name);
            }
        }
        let mut refused = Vec::new();
        for (name, cluster) in clusters {
            if !kept_cluster(name) {
                refused.extend(exporter.register_cluster(cluster, Detail::Full).err());
            }
        }
        for r in routes {
            if let Some(b) = &r.breaker
                && !kept_breaker(b.name())
            {
                refused.extend(exporter.register_breaker(b, Detail::Full).err());
            }
            if !kept_budget(&r.name) {
                refused.extend(exporter.register_budget(&r.name, &r.budget).err());
            }
            if let Some(b) = &r.bulkhead {
                refused.extend(exporter.register_bulkhead(&r.name, b).err());
            }
            if let Some(keyed) = &r.guard.keyed_breaker
                && !kept_family(keyed.registry.family())
            {
                refused.extend(
                    exporter
                        .register_registry(&keyed.registry, Detail::Aggregate)
                        .err(),
                );
            }
        }
        for e in refused {
            tracing::warn!(error = %e, "reload: a source could not be exported");
        }
    }
}

/// Whether a cluster reloaded from `before` to `after` may stay the
/// running one: its config differs at most in its endpoint list and
/// `dns_refresh`, which [`crate::control::dns::Dns::reload`] applies in place,
/// its `health_check`, which the health checkers' supervisor applies to
/// the running cluster, and its `limits` and `endpoint_limits`, which the
/// new table's routes carry. Everything else is fixed when a cluster (or
/// its client) is built.
fn same_but_endpoints(before: &ClusterSection, after: &ClusterSection) -> bool {
    let rest = |s: &ClusterSection| ClusterSection {
        endpoints: Vec::new(),
        dns_refresh: None,
        health_check: None,
        limits: None,
        endpoint_limits: None,
        ..s.clone()
    };
    rest(before) == rest(after)
}

/// The sections that differ from the running ones but are only read at start.
fn restart_required(running: &ProxyConfig, new: &ProxyConfig) -> Vec<String> {
    let mut changed = Vec::new();
    if running.listeners != new.listeners {
        changed.push("listeners".to_owned());
    }
    if running.admin != new.admin {
        changed.push("admin".to_owned());
    }
    if running.proxy != new.proxy {
        changed.push("proxy".to_owned());
    }
    if running.access_log != new.access_log {
        changed.push("access_log".to_owned());
    }
    if running.config_source != new.config_source {
        changed.push("config_source".to_owned());
    }
    changed
}
