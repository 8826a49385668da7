//! Clusters whose endpoints come from a registry: Dubbo providers in
//! ZooKeeper (the `tripline-discovery` crate follows them; this module
//! applies what it publishes to the cluster, and says how it goes).
//!
//! Each set of providers replaces the cluster's endpoints through
//! [`Cluster::set_endpoints`], which keeps the state of every endpoint
//! whose id and address stay: a provider that stays keeps its breaker,
//! outlier and health state, a new one starts fresh, a vanished one
//! leaves (after the section's `grace`). Weights are the providers' own
//! (Dubbo's `weight`), for the `weighted_random` balancer.
//!
//! A lost or expired ZooKeeper session keeps the last providers while
//! the watcher reconnects with back-off, and is visible: one line on
//! stderr when it is lost and when it is back, the gauge
//! `tripline_proxy_discovery_connected{cluster}`, and the cluster's
//! `discovery` object in `/api/outliers` (which the dashboard flags). A
//! folder that lists only providers the proxy cannot call (`dubbo://`,
//! binary Hessian) is said once, naming the protocols found.
//!
//! # Reloads
//!
//! As the DNS refreshers do: a cluster a reload keeps with the same
//! `discovery` keeps its follow and watch; a cluster added or rebuilt gets
//! a new follow; the follows of removed or rebuilt clusters are retired
//! (they apply nothing more) and their watches stop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tripline::cluster::Cluster;
use tripline_discovery::{ProviderSet, Session, Status, ZooKeeperDiscovery};

use crate::config::ProxyConfig;
use crate::control::Control;
use crate::control::supervise::{Follows, supervise};
use crate::table::Table;
use crate::table::latency::LatencyFamilies;

type Labels = Vec<(&'static str, String)>;

/// The follows of the table in force, and what they report.
pub(crate) struct Discoveries {
    follows: watch::Sender<Follows<Follow>>,
    metrics: DiscoveryMetrics,
}

/// One cluster's registry: what its task follows and last heard.
struct Follow {
    name: String,
    cluster: Cluster,
    config: ZooKeeperDiscovery,
    /// The table no longer has this follow: apply nothing more.
    retired: AtomicBool,
    /// The watcher's last status (`None` before it reports).
    status: Mutex<Option<Status>>,
    metrics: DiscoveryMetrics,
}

#[derive(Clone, Default)]
struct DiscoveryMetrics {
    connected: Family<Labels, Gauge>,
    providers: Family<Labels, Gauge>,
    skipped: Family<Labels, Gauge>,
    /// Where a departed provider's latency series are dropped.
    latency: LatencyFamilies,
}

impl Discoveries {
    /// Following nothing yet (see [`follow`](Self::follow)); the latency
    /// series of providers that leave are dropped from `latency`.
    pub(crate) fn new(latency: &LatencyFamilies) -> Self {
        Discoveries {
            follows: watch::Sender::new(Arc::new(BTreeMap::new())),
            metrics: DiscoveryMetrics {
                latency: latency.clone(),
                ..DiscoveryMetrics::default()
            },
        }
    }

    /// A follow for every cluster of `table` with `discovery` (the table
    /// the proxy starts with).
    pub(crate) fn follow(&self, table: &Table) {
        let mut follows = BTreeMap::new();
        for (name, section) in &table.config.clusters {
            if let (Some(config), Some(cluster)) = (&section.discovery, table.clusters.get(name)) {
                let follow = Follow::new(name, cluster, config, &self.metrics);
                follows.insert(name.clone(), follow);
            }
        }
        self.follows.send_replace(Arc::new(follows));
    }

    /// Registers the discovery gauges beside the proxy's metrics.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        let m = &self.metrics;
        registry.register(
            format!("{prefix}_proxy_discovery_connected"),
            "Whether the cluster's registry session is connected (0: lost or expired; the last providers are kept)",
            m.connected.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_discovery_providers"),
            "Providers the cluster's registry lists that the proxy calls",
            m.providers.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_discovery_skipped"),
            "Registry entries skipped because they were not provider URLs, over all reads",
            m.skipped.clone(),
        );
    }

    /// Follows the clusters of `after` (`clusters`): `kept` names the
    /// clusters that are the running ones. Call it before the new table
    /// takes traffic.
    pub(crate) fn reload(
        &self,
        after: &ProxyConfig,
        clusters: &BTreeMap<String, Cluster>,
        kept: impl Fn(&str) -> bool,
    ) {
        let mut old = BTreeMap::clone(&self.follows.borrow());
        let mut next = BTreeMap::new();
        for (name, section) in &after.clusters {
            let (Some(config), Some(cluster)) = (&section.discovery, clusters.get(name)) else {
                continue;
            };
            match old.remove(name) {
                Some(f) if kept(name) && f.config == *config => {
                    next.insert(name.clone(), f);
                }
                previous => {
                    if let Some(p) = previous {
                        p.retire();
                    }
                    next.insert(
                        name.clone(),
                        Follow::new(name, cluster, config, &self.metrics),
                    );
                }
            }
        }
        for gone in old.values() {
            gone.retire();
        }
        self.follows.send_replace(Arc::new(next));
    }

    /// Adds each followed cluster's registry status to the body of
    /// `/api/outliers` (`{"clusters": [{"cluster": name, …}]}`), as its
    /// `discovery` object.
    pub(crate) fn annotate(&self, outliers: &mut serde_json::Value) {
        let follows = self.follows.borrow();
        let Some(clusters) = outliers["clusters"].as_array_mut() else {
            return;
        };
        for cluster in clusters {
            let name = cluster["cluster"].as_str().unwrap_or_default();
            if let Some(follow) = follows.get(name) {
                cluster["discovery"] = follow.to_json();
            }
        }
    }
}

/// Starts the supervisor of the registry watches on `tasks` (aborted
/// when the proxy drains, which stops every watch with it).
pub(crate) fn spawn_watches(inner: &Arc<Control>, tasks: &mut JoinSet<()>) {
    tasks.spawn(supervise(inner.discovery.follows.subscribe(), Follow::run));
}

impl Follow {
    fn new(
        name: &str,
        cluster: &Cluster,
        config: &ZooKeeperDiscovery,
        metrics: &DiscoveryMetrics,
    ) -> Arc<Follow> {
        Arc::new(Follow {
            name: name.to_owned(),
            cluster: cluster.clone(),
            config: config.clone(),
            retired: AtomicBool::new(false),
            status: Mutex::new(None),
            metrics: metrics.clone(),
        })
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    fn labels(&self) -> Labels {
        vec![("cluster", self.name.clone())]
    }

    /// Watches the registry and applies what it publishes, until retired
    /// (or aborted by the supervisor).
    async fn run(self: Arc<Self>) {
        let (discovery, watcher) = match tripline_discovery::watcher(&self.config) {
            Ok(started) => started,
            Err(e) => {
                // Validated at load: only a section that changed meaning.
                tracing::error!(target: "tripline_proxy::discovery", cluster = %self.name, error = %e, "discovery not started");
                return;
            }
        };
        let mut providers = discovery.providers();
        let mut status = discovery.status();
        tokio::pin!(watcher);
        loop {
            tokio::select! {
                () = &mut watcher => return,
                changed = status.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now = status.borrow_and_update().clone();
                    self.heard(now);
                }
                changed = providers.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let set = providers.borrow_and_update().clone();
                    self.apply(&set);
                }
            }
            if self.retired.load(Ordering::Acquire) {
                return;
            }
        }
    }

    /// Applies a set of providers (an empty one only before the first
    /// usable read: the watcher never publishes an empty set after one).
    fn apply(&self, set: &ProviderSet) {
        if self.retired.load(Ordering::Acquire) || set.is_empty() {
            return;
        }
        let endpoints = set.endpoint_configs();
        let count = endpoints.len();
        let before = self.cluster.endpoints();
        match self.cluster.set_endpoints(endpoints) {
            Ok(_) => {
                let after = self.cluster.endpoints();
                self.metrics
                    .latency
                    .forget_departed(&self.name, &before, &after);
                self.metrics
                    .providers
                    .get_or_create(&self.labels())
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
                let addresses: Vec<&str> =
                    set.providers().iter().map(|p| p.address.as_str()).collect();
                tracing::info!(target: "tripline_proxy::discovery", cluster = %self.name, providers = ?addresses,
                    "discovery: cluster {} now has {count} provider(s)", self.name);
            }
            Err(e) => {
                tracing::warn!(target: "tripline_proxy::discovery", cluster = %self.name, error = %e,
                    "discovery: providers refused by the cluster; the last ones stay");
            }
        }
    }

    /// Records a status, saying on stderr what changed for an operator.
    fn heard(&self, now: Status) {
        let before = {
            let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
            status.replace(now.clone())
        };
        let labels = self.labels();
        self.metrics
            .connected
            .get_or_create(&labels)
            .set(i64::from(now.session.is_connected()));
        self.metrics
            .skipped
            .get_or_create(&labels)
            .set(i64::try_from(now.skipped_total).unwrap_or(i64::MAX));
        let was = before.as_ref().map(|s| s.session);
        let kept = self.cluster.endpoints().len();
        match (was, now.session) {
            (Some(Session::Connected), Session::Lost { .. }) => {
                tracing::warn!(target: "tripline_proxy::discovery", cluster = %self.name, zookeeper = %self.config.zookeeper,
                    "discovery: ZooKeeper connection lost for cluster {}; keeping its {kept} provider(s) while reconnecting", self.name);
            }
            (Some(s), Session::Expired { .. }) if !matches!(s, Session::Expired { .. }) => {
                tracing::warn!(target: "tripline_proxy::discovery", cluster = %self.name, zookeeper = %self.config.zookeeper,
                    "discovery: ZooKeeper session expired for cluster {}; keeping its {kept} provider(s) while a new session is made", self.name);
            }
            (Some(s), Session::Connected) if !s.is_connected() && s != Session::Connecting => {
                tracing::info!(target: "tripline_proxy::discovery", cluster = %self.name,
                    "discovery: ZooKeeper connection back for cluster {}", self.name);
            }
            _ => {}
        }
        let newly_unusable = now.usable == 0
            && !now.other_protocols.is_empty()
            && before
                .as_ref()
                .is_none_or(|b| b.other_protocols != now.other_protocols);
        if newly_unusable {
            let found: Vec<String> = now
                .other_protocols
                .iter()
                .map(|(scheme, n)| format!("{n} {scheme}://"))
                .collect();
            tracing::error!(target: "tripline_proxy::discovery", cluster = %self.name, path = %self.config.path,
                "discovery: cluster {} wants {}:// providers, but {} lists only {}: none can be called through the proxy",
                self.name, self.config.protocol, self.config.path, found.join(", "));
        }
    }

    /// The cluster's `discovery` object in `/api/outliers`.
    fn to_json(&self) -> serde_json::Value {
        let status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        let (session, lost_for_ms) = match status.as_ref().map(|s| s.session) {
            None | Some(Session::Connecting) => ("connecting", None),
            Some(Session::Connected) => ("connected", None),
            Some(Session::Lost { since }) => ("lost", Some(since.elapsed().as_millis())),
            Some(Session::Expired { since }) => ("expired", Some(since.elapsed().as_millis())),
        };
        serde_json::json!({
            "source": "zookeeper",
            "zookeeper": self.config.zookeeper,
            "path": self.config.path,
            "protocol": self.config.protocol.scheme(),
            "session": session,
            "connected": session == "connected",
            "lost_for_ms": lost_for_ms,
            "skipped_total": status.as_ref().map_or(0, |s| s.skipped_total),
            "kept_last_set": status.as_ref().is_some_and(|s| s.kept_last_set),
            "last_error": status.as_ref().and_then(|s| s.last_error.clone()),
            // Providers registered under another protocol, by scheme: a
            // path that lists only `dubbo://` shows why the cluster is empty.
            "other_protocols": status.as_ref().map(|s| {
                s.other_protocols
                    .iter()
                    .map(|(scheme, n)| (scheme.clone(), serde_json::json!(n)))
                    .collect::<serde_json::Map<_, _>>()
            }),
        })
    }
}
