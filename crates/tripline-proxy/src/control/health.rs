//! The health checkers' supervisor: one checker per cluster with
//! `health_check` in the table in force, following reloads.
//!
//! A reload wakes it once the new table is in force ([`Health::follow`]),
//! and it reconciles (an idle proxy's supervisor never wakes): a cluster
//! added gets a checker; one removed, or whose `health_check` was removed,
//! has its checker aborted and its endpoints unmarked; a cluster kept
//! with the same check keeps its checker; a cluster rebuilt or whose
//! check changed gets a new checker *with the same book*, so the
//! endpoints that stay keep their health (a rebuilt cluster's endpoints
//! are marked again from it — by the reload itself, before the new table
//! takes traffic, see [`Health::adopt`]). Endpoints that come and go with DNS or a
//! registry are the checker's own business: it follows the cluster's
//! membership.
//!
//! The books are also what `/api/outliers` and `/metrics` read, by
//! cluster name.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinSet};
use tripline::cluster::Cluster;

use crate::config::{CheckKind, ClusterSection, HealthCheckSection};
use crate::control::Control;
use crate::table::Table;
use crate::upstream::health::probe::Probe;
use crate::upstream::health::{Checker, HealthBook, HealthMetrics};

/// The health books of the clusters checked now, by cluster name.
#[derive(Default)]
pub(crate) struct Health {
    books: RwLock<BTreeMap<String, Arc<HealthBook>>>,
    metrics: HealthMetrics,
    /// A reload published a new table: the supervisor reconciles.
    reloaded: Notify,
}

impl Health {
    /// The book of `cluster`, when it is health-checked.
    pub(crate) fn book(&self, cluster: &str) -> Option<Arc<HealthBook>> {
        let books = self.books.read().unwrap_or_else(PoisonError::into_inner);
        books.get(cluster).cloned()
    }

    /// Marks the endpoints of `table`'s health-checked clusters that their
    /// books found unhealthy: a reload calls it before publishing, so a
    /// cluster it rebuilt does not route to them until its checker starts.
    pub(crate) fn adopt(&self, table: &Table) {
        for (name, cluster) in &table.clusters {
            let checked = table
                .config
                .clusters
                .get(name)
                .and_then(|s| s.health_check.as_ref());
            let (Some(_), Some(book)) = (checked, self.book(name)) else {
                continue;
            };
            for e in cluster.endpoints() {
                if book.is_unhealthy(e.id().as_str()) {
                    cluster.mark_unhealthy(e.id().as_str(), true);
                }
            }
        }
    }

    /// Wakes the supervisor to follow the table just published (a permit
    /// is kept if it is busy, so no reload is missed).
    pub(crate) fn follow(&self) {
        self.reloaded.notify_one();
    }

    /// Registers the checks' series (see the checker's metrics).
    pub(crate) fn register(
        &self,
        registry: &mut prometheus_client::registry::Registry,
        prefix: &str,
    ) {
        self.metrics.register(registry, prefix);
    }
}

/// Starts the supervisor on `tasks` (aborted when the proxy drains, which
/// drops every checker with it).
pub(crate) fn spawn_checkers(control: &Arc<Control>, tasks: &mut JoinSet<()>) {
    tasks.spawn(supervise(control.clone()));
}

/// A running checker and what it was started from.
struct Running {
    cluster: Cluster,
    section: HealthCheckSection,
    task: AbortHandle,
}

async fn supervise(control: Arc<Control>) {
    let mut checkers = JoinSet::new();
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let mut seen: Option<Arc<Table>> = None;
    loop {
        let table = control.table.load_full();
        if !seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, &table)) {
            reconcile(&control.health, &table, &mut running, &mut checkers);
            seen = Some(table);
        }
        tokio::select! {
            () = control.health.reloaded.notified() => {}
            Some(_) = checkers.join_next() => {}
        }
    }
}

/// Makes `running` the checkers `table` calls for (see the module docs).
fn reconcile(
    health: &Health,
    table: &Table,
    running: &mut BTreeMap<String, Running>,
    checkers: &mut JoinSet<()>,
) {
    let mut books = health.books.write().unwrap_or_else(PoisonError::into_inner);
    let wanted: BTreeMap<&String, (&ClusterSection, &HealthCheckSection, &Cluster)> = table
        .config
        .clusters
        .iter()
        .filter_map(|(name, section)| {
            let check = section.health_check.as_ref()?;
            Some((name, (section, check, table.clusters.get(name)?)))
        })
        .collect();
    running.retain(|name, r| {
        let stays = wanted.get(name).is_some_and(|(_, check, cluster)| {
            **check == r.section && same_cluster(cluster, &r.cluster)
        });
        if !stays {
            r.task.abort();
            if !wanted.contains_key(name) {
                // No longer checked: nothing keeps its endpoints out.
                for e in r.cluster.endpoints() {
                    r.cluster.mark_unhealthy(e.id().as_str(), false);
                    health.metrics.forget(name, e.id().as_str());
                }
                books.remove(name);
            }
        }
        stays
    });
    for (name, (section, check, cluster)) in wanted {
        if running.contains_key(name) {
            continue;
        }
        let book = books.entry(name.clone()).or_default().clone();
        let probe = Probe {
            kind: check.kind(),
            tls: tls_of(name, section, check),
            h2c: section.protocol == crate::config::UpstreamProtocol::H2c,
        };
        let checker = Arc::new(Checker {
            cluster: cluster.clone(),
            section: check.clone(),
            probe: Arc::new(probe),
            book,
            metrics: health.metrics.clone(),
        });
        let task = checkers.spawn(checker.run());
        running.insert(
            name.clone(),
            Running {
                cluster: cluster.clone(),
                section: check.clone(),
                task,
            },
        );
    }
}

/// The TLS client of an HTTP check of a TLS cluster: the cluster's own,
/// speaking HTTP/1.1 (the check writes HTTP/1.1 whatever ALPN offers).
fn tls_of(
    name: &str,
    section: &ClusterSection,
    check: &HealthCheckSection,
) -> Option<(Arc<rustls::ClientConfig>, Option<String>)> {
    let tls = section.tls.as_ref()?;
    if !matches!(check.kind(), CheckKind::Http(_)) {
        return None;
    }
    match crate::upstream::tls::client_config(&format!("clusters.{name}"), tls) {
        Ok(mut config) => {
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Some((Arc::new(config), tls.server_name.clone()))
        }
        Err(e) => {
            // The table was built with this config: it loads.
            tracing::warn!(target: "tripline_proxy::health", cluster = name, error = %e, "health check TLS");
            None
        }
    }
}

/// Whether `a` and `b` are one cluster (a reload kept it) rather than one
/// rebuilt under the same name: they share an endpoint. A kept cluster
/// taken for a rebuilt one only costs a restarted checker (the book
/// stays).
fn same_cluster(a: &Cluster, b: &Cluster) -> bool {
    let theirs = b.endpoints();
    a.endpoints()
        .iter()
        .any(|e| theirs.iter().any(|f| e.ptr_eq(f)))
}

impl Health {
    /// Adds to each endpoint of `GET /api/outliers` what its health checks
    /// found (`health_check`: `null` when its cluster has none), and to
    /// each the one story of why it is out (`out_because`: `health_check`,
    /// `outlier`, `breaker`; empty when routable).
    pub(crate) fn annotate(&self, value: &mut serde_json::Value) {
        let Some(clusters) = value.get_mut("clusters").and_then(|c| c.as_array_mut()) else {
            return;
        };
        for cluster in clusters {
            let name = cluster["cluster"].as_str().unwrap_or_default().to_owned();
            let book = self.book(&name);
            let Some(endpoints) = cluster.get_mut("endpoints").and_then(|e| e.as_array_mut())
            else {
                continue;
            };
            for e in endpoints {
                let id = e["endpoint"].as_str().unwrap_or_default().to_owned();
                let record = book.as_ref().map(|b| b.get(&id).unwrap_or_default());
                let mut why = Vec::new();
                if record.as_ref().is_some_and(|r| !r.healthy) {
                    why.push("health_check");
                }
                if e["ejected"].as_bool() == Some(true) {
                    why.push("outlier");
                }
                let breaker = e["breaker_state"].as_str().unwrap_or_default();
                if e["routable"].as_bool() == Some(false)
                    && matches!(breaker, "open" | "forced_open")
                {
                    why.push("breaker");
                }
                e["out_because"] = serde_json::json!(why);
                e["health_check"] = match record {
                    None => serde_json::Value::Null,
                    Some(r) => serde_json::json!({
                        "healthy": r.healthy,
                        "consecutive_failures": r.consecutive_failures,
                        "consecutive_passes": r.consecutive_passes,
                        "last_passed": r.last.as_ref().map(|l| l.0),
                        "last_result": r.last.as_ref().map(|l| l.1.clone()),
                        "last_checked": r.last.as_ref().map(|l| humantime::format_rfc3339_millis(l.2).to_string()),
                    }),
                };
            }
        }
    }
}
