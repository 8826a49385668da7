//! DNS re-resolution: a cluster with `dns_refresh` resolves its endpoint
//! names on that interval, and its endpoints follow the answers.
//!
//! An endpoint written as a name becomes one endpoint per address it
//! resolves to, each named by its `ip:port` (so its breaker, outlier state
//! and metrics are the address's). The library's
//! [`Cluster::set_endpoints`] keeps the state of every endpoint whose id
//! and address stay, so an address that is still in the answer keeps its
//! open breaker or its ejection; a new address starts fresh; a vanished one
//! is dropped (calls in flight to it finish). A failed lookup keeps the
//! name's last known addresses, and is logged: a DNS outage must not empty
//! a cluster of endpoints that are still serving. Until a name's first
//! answer the name itself is the endpoint, resolved by each connection.
//!
//! The selection path is untouched: membership changes swap the cluster's
//! endpoint set, which calls read lock-free.
//!
//! # Reloads
//!
//! What each refresher follows — its cluster, the endpoints as written,
//! the interval, the last good answers — is a [`Follow`], one per cluster
//! with `dns_refresh`, held by [`Dns`] and replaced by reloads. One
//! supervisor task (started with the proxy, on the first runtime) runs a
//! refresher per follow and reconciles them on every reload: a follow a
//! reload dropped (its cluster removed or rebuilt, or its `dns_refresh`
//! removed) has its refresher aborted; a new one (a cluster added or
//! rebuilt with `dns_refresh`) gets one, which resolves at once. A cluster
//! a reload keeps keeps its follow: a changed endpoint list or interval is
//! applied to that follow in place, membership recomputed from its last
//! good answers (so resolved addresses that stay keep their state), and
//! its refresher woken to resolve any new name now.
//!
//! A dropped follow is also *retired* under its lock before the new table
//! is published, and a refresher applies nothing once its follow is
//! retired: between the reload and the supervisor's abort, a refresher
//! mid-lookup must not put back the endpoints of a config that is gone.
//! The supervisor's own task set dies with the proxy's (the drain aborts
//! it, which drops every refresher): no refresher outlives its proxy, nor
//! its cluster's place in the table.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tripline::PolicyConfigError;
use tripline::cluster::{Cluster, EndpointConfig};

use crate::config::{ConfigError, ProxyConfig};
use crate::control::Control;
use crate::control::supervise::supervise;
use crate::table::Table;
use crate::table::latency::LatencyFamilies;
use crate::upstream::{ClusterUpstream, ResolvedNames};

/// How long one lookup may take before it counts as failed.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The follows of the table in force, by cluster name.
type Follows = crate::control::supervise::Follows<Follow>;

/// What the DNS refreshers follow: one [`Follow`] per cluster with
/// `dns_refresh` in the table in force. Reloads replace the set (one
/// reload at a time: the proxy's reload lock orders them); the supervisor
/// watches it, so a reload need not be on a runtime to start or stop a
/// refresher, and a proxy that is not serving runs none.
pub(crate) struct Dns {
    follows: watch::Sender<Follows>,
    /// Where a departed endpoint's latency series are dropped.
    latency: LatencyFamilies,
}

impl Dns {
    /// A follow for every cluster of `table` with `dns_refresh`, nothing
    /// resolved yet (the refreshers resolve as they start).
    pub(crate) fn new(table: &Table, latency: &LatencyFamilies) -> Dns {
        let mut follows = BTreeMap::new();
        for (name, section) in &table.config.clusters {
            let (Some(every), Some(cluster), Some(upstream)) = (
                section.dns_refresh,
                table.clusters.get(name),
                table.upstreams.get(name),
            ) else {
                continue;
            };
            let follow = Follow::new(cluster, upstream, &section.endpoints, every, latency);
            follows.insert(name.clone(), follow);
        }
        Dns {
            follows: watch::Sender::new(Arc::new(follows)),
            latency: latency.clone(),
        }
    }

    /// Applies a reload from `before` to `after` (whose clusters and
    /// clients are `clusters` and `upstreams`) to the clusters' endpoints
    /// and refreshers. `kept` names the clusters that are the running ones
    /// (the same [`Cluster`], and the same resolved names): one whose
    /// endpoint list or `dns_refresh` changed gets its new membership here,
    /// in place, so the endpoints that stay keep their breakers and
    /// ejections. A cluster built anew gets a new follow; the follows of
    /// clusters removed or rebuilt are retired.
    ///
    /// Call it once nothing else can refuse the config, before the new
    /// table takes traffic. It refuses only what validation lets through
    /// and the cluster still refuses (which the endpoints of a valid
    /// config never are), naming the cluster's endpoints.
    pub(crate) fn reload(
        &self,
        before: &ProxyConfig,
        after: &ProxyConfig,
        clusters: &BTreeMap<String, Cluster>,
        upstreams: &BTreeMap<String, ClusterUpstream>,
        kept: impl Fn(&str) -> bool,
    ) -> Result<(), ConfigError> {
        let mut old = BTreeMap::clone(&self.follows.borrow());
        let mut next = BTreeMap::new();
        // Retired only once every endpoint list applied: a refusal leaves
        // the refreshers of the table still in force running.
        let mut retiring = Vec::new();
        for (name, section) in &after.clusters {
            let (Some(cluster), Some(upstream)) = (clusters.get(name), upstreams.get(name)) else {
                continue;
            };
            // A registry's cluster: its endpoints are the registry's, never
            // the file's (empty) list.
            if section.discovery.is_some() {
                continue;
            }
            let previous = old.remove(name);
            if !kept(name) {
                retiring.extend(previous);
                if let Some(every) = section.dns_refresh {
                    let follow =
                        Follow::new(cluster, upstream, &section.endpoints, every, &self.latency);
                    next.insert(name.clone(), follow);
                }
                continue;
            }
            let changed = before.clusters.get(name) != Some(section);
            let applied = match (previous, section.dns_refresh) {
                (Some(p), Some(every)) => {
                    let applied = changed.then(|| p.replan(&section.endpoints, every));
                    next.insert(name.clone(), p);
                    applied
                }
                (None, Some(every)) => {
                    let f =
                        Follow::new(cluster, upstream, &section.endpoints, every, &self.latency);
                    let applied = changed.then(|| f.replan(&section.endpoints, every));
                    next.insert(name.clone(), f);
                    applied
                }
                // `dns_refresh` removed: the names are endpoints again.
                (Some(p), None) => Some(p.hand_back(&section.endpoints)),
                (None, None) => changed.then(|| {
                    let none = BTreeMap::new();
                    let names = &upstream.names;
                    apply(cluster, names, &section.endpoints, &none, &self.latency)
                }),
            };
            let changed = applied.transpose().map_err(|e| {
                ConfigError::invalid(format!("clusters.{name}.endpoints"), e.constraint)
            })?;
            if changed == Some(true) {
                tracing::info!(
                    cluster = %name,
                    endpoints = ?ids(&cluster.endpoints()),
                    "reload: endpoints replaced in place (endpoints that stay keep their state)"
                );
            }
        }
        for gone in retiring.iter().chain(old.values()) {
            gone.retire();
        }
        self.follows.send_replace(Arc::new(next));
        Ok(())
    }
}

/// Starts the supervisor of the DNS refreshers on `tasks` (aborted when
/// the proxy drains, which drops every refresher with it).
///
/// It runs one refresher for each cluster with `dns_refresh` in the table
/// in force, and follows reloads: see the module docs.
pub(crate) fn spawn_refreshers(inner: &Arc<Control>, tasks: &mut JoinSet<()>) {
    tasks.spawn(supervise(inner.dns.follows.subscribe(), Follow::run));
}

/// One cluster's re-resolution: what its refresher follows.
struct Follow {
    cluster: Cluster,
    /// Where TLS looks up the name an address came from (the cluster's
    /// client's, which a reload that keeps the cluster keeps).
    names: ResolvedNames,
    /// Also orders membership changes: a refresh and a reload apply theirs
    /// under it, each from the plan as it is then.
    plan: Mutex<Plan>,
    /// A reload changed the plan: refresh now, not at the next tick.
    wake: Notify,
    /// Where a departed endpoint's latency series are dropped.
    latency: LatencyFamilies,
}

/// What a follow resolves, how often, and what it last learnt.
struct Plan {
    /// The endpoints as written in the config.
    configured: Vec<String>,
    every: Duration,
    /// The last good answer for each name entry (`host:port`).
    known: BTreeMap<String, Vec<SocketAddr>>,
    /// The table no longer has this follow: apply nothing more, end.
    retired: bool,
}

impl Follow {
    fn new(
        cluster: &Cluster,
        upstream: &ClusterUpstream,
        configured: &[String],
        every: Duration,
        latency: &LatencyFamilies,
    ) -> Arc<Follow> {
        Arc::new(Follow {
            cluster: cluster.clone(),
            names: upstream.names.clone(),
            plan: Mutex::new(Plan {
                configured: configured.to_vec(),
                every,
                known: BTreeMap::new(),
                retired: false,
            }),
            wake: Notify::new(),
            latency: latency.clone(),
        })
    }

    fn plan(&self) -> MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn retire(&self) {
        self.plan().retired = true;
    }

    /// Retires the follow of a kept cluster that no longer resolves names,
    /// giving it `configured` as its endpoints: under the plan's lock, so
    /// no refresh lands after it. Not retired if the cluster refuses them.
    fn hand_back(&self, configured: &[String]) -> Result<bool, PolicyConfigError> {
        let mut plan = self.plan();
        let applied = apply(
            &self.cluster,
            &self.names,
            configured,
            &BTreeMap::new(),
            &self.latency,
        )?;
        plan.retired = true;
        Ok(applied)
    }

    /// A reload's new endpoint list and interval: the membership they make
    /// with the answers known for the names that stay, applied now; the
    /// refresher is woken to resolve new names and take the new interval.
    /// Whether the endpoints changed.
    fn replan(&self, configured: &[String], every: Duration) -> Result<bool, PolicyConfigError> {
        let mut plan = self.plan();
        plan.configured = configured.to_vec();
        plan.every = every;
        plan.known.retain(|entry, _| configured.contains(entry));
        let applied = apply(
            &self.cluster,
            &self.names,
            &plan.configured,
            &plan.known,
            &self.latency,
        );
        drop(plan);
        self.wake.notify_one();
        applied
    }

    /// Refreshes at once, then every interval (or when a reload wakes it),
    /// until retired.
    async fn run(self: Arc<Self>) {
        while self.refresh().await {
            let every = self.plan().every;
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    /// Resolves every name entry once and applies the membership; `false`
    /// once the follow is retired.
    async fn refresh(&self) -> bool {
        let configured = {
            let plan = self.plan();
            if plan.retired {
                return false;
            }
            plan.configured.clone()
        };
        let mut answers = Vec::new();
        for entry in configured {
            if entry.parse::<SocketAddr>().is_ok() {
                continue;
            }
            let looked_up = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host(&entry));
            let answer = match looked_up.await {
                Ok(Ok(addrs)) => Ok(addrs.collect()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {LOOKUP_TIMEOUT:?}")),
            };
            answers.push((entry, answer));
        }
        let mut plan = self.plan();
        if plan.retired {
            return false;
        }
        for (entry, answer) in answers {
            // A name a reload removed during the lookups is not remembered.
            if !plan.configured.contains(&entry) {
                continue;
            }
            if let Err(error) = remember(&mut plan.known, &entry, answer) {
                tracing::warn!(
                    cluster = self.cluster.name(),
                    endpoint = %entry,
                    %error,
                    "DNS re-resolution failed; keeping the last known addresses"
                );
            }
        }
        match apply(
            &self.cluster,
            &self.names,
            &plan.configured,
            &plan.known,
            &self.latency,
        ) {
            Ok(false) => {}
            Ok(true) => tracing::info!(
                cluster = self.cluster.name(),
                endpoints = ?ids(&self.cluster.endpoints()),
                "endpoints follow DNS"
            ),
            Err(e) => tracing::warn!(
                cluster = self.cluster.name(),
                error = %e,
                "DNS answer refused by the cluster; endpoints unchanged"
            ),
        }
        true
    }
}

/// Gives `cluster` the endpoints `configured` makes with the answers in
/// `known` (see [`membership`]), and `names` the names they came from;
/// the latency series of endpoints that leave go with them.
/// Whether the endpoints changed: none when they are the endpoints
/// already, whatever their weights.
fn apply(
    cluster: &Cluster,
    names: &ResolvedNames,
    configured: &[String],
    known: &BTreeMap<String, Vec<SocketAddr>>,
    latency: &LatencyFamilies,
) -> Result<bool, PolicyConfigError> {
    let (endpoints, resolved) = membership(configured, known);
    let current = cluster.endpoints();
    let same = current.len() == endpoints.len()
        && current
            .iter()
            .zip(&endpoints)
            .all(|(c, e)| c.id().as_str() == e.id && c.address() == e.address);
    // Names first: a connection to a new address must find its name.
    *names.write().unwrap_or_else(PoisonError::into_inner) = resolved;
    if same {
        return Ok(false);
    }
    cluster.set_endpoints(endpoints)?;
    latency.forget_departed(cluster.name(), &current, &cluster.endpoints());
    Ok(true)
}

/// The ids of `endpoints`, to log.
fn ids(endpoints: &[tripline::cluster::Endpoint]) -> Vec<String> {
    endpoints
        .iter()
        .map(|e| e.id().as_str().to_owned())
        .collect()
}

/// Keeps a good answer for `entry` in `known`; a failed or empty one
/// leaves the last good answer in place, and is returned to be logged.
fn remember(
    known: &mut BTreeMap<String, Vec<SocketAddr>>,
    entry: &str,
    answer: Result<Vec<SocketAddr>, String>,
) -> Result<(), String> {
    let mut addrs = answer?;
    addrs.sort_unstable();
    addrs.dedup();
    if addrs.is_empty() {
        return Err("no addresses".to_owned());
    }
    known.insert(entry.to_owned(), addrs);
    Ok(())
}

/// The endpoints for `configured` given the last good answers in `known`:
/// an `ip:port` as is, a resolved name as its addresses, a name never
/// resolved as itself; each id once, in config order. Also the name each
/// resolved address came from.
pub(crate) fn membership(
    configured: &[String],
    known: &BTreeMap<String, Vec<SocketAddr>>,
) -> (Vec<EndpointConfig>, HashMap<String, String>) {
    let mut endpoints: Vec<EndpointConfig> = Vec::new();
    let mut names = HashMap::new();
    let mut push = |address: String| {
        if !endpoints.iter().any(|e| e.id == address) {
            endpoints.push(EndpointConfig::new(address.clone(), address));
        }
    };
    for entry in configured {
        match known.get(entry) {
            Some(addrs) => {
                let host = entry.rsplit_once(':').map_or(entry.as_str(), |(h, _)| h);
                let host = host
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .unwrap_or(host);
                for addr in addrs {
                    names.insert(addr.to_string(), host.to_owned());
                    push(addr.to_string());
                }
            }
            None => push(entry.clone()),
        }
    }
    (endpoints, names)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The ids of `endpoints`, to log.
    fn ids(endpoints: &[EndpointConfig]) -> Vec<&str> {
        endpoints.iter().map(|e| e.id.as_str()).collect()
    }

    #[test]
    fn names_become_their_addresses_and_unresolved_names_stay() {
        let configured = vec![
            "10.0.0.9:80".to_owned(),
            "api.internal:8080".to_owned(),
            "never.resolved:80".to_owned(),
        ];
        let mut known = BTreeMap::new();
        known.insert(
            "api.internal:8080".to_owned(),
            vec![
                "10.0.0.1:8080".parse().unwrap(),
                "[::1]:8080".parse().unwrap(),
            ],
        );
        let (endpoints, names) = membership(&configured, &known);
        assert_eq!(
            ids(&endpoints),
            [
                "10.0.0.9:80",
                "10.0.0.1:8080",
                "[::1]:8080",
                "never.resolved:80"
            ]
        );
        assert_eq!(names["[::1]:8080"], "api.internal");
        assert!(!names.contains_key("10.0.0.9:80"));
    }

    #[test]
    fn a_failed_or_empty_answer_keeps_the_last_good_one() {
        let mut known = BTreeMap::new();
        let first: Vec<SocketAddr> = vec![
            "10.0.0.2:80".parse().unwrap(),
            "10.0.0.1:80".parse().unwrap(),
        ];
        assert!(remember(&mut known, "a:80", Ok(first)).is_ok());
        assert!(remember(&mut known, "a:80", Err("timed out".to_owned())).is_err());
        assert!(remember(&mut known, "a:80", Ok(vec![])).is_err());
        let (endpoints, _) = membership(&["a:80".to_owned()], &known);
        assert_eq!(ids(&endpoints), ["10.0.0.1:80", "10.0.0.2:80"]);
        // A new answer replaces it: the vanished address goes, the new one comes.
        let next = vec![
            "10.0.0.2:80".parse().unwrap(),
            "10.0.0.3:80".parse().unwrap(),
        ];
        assert!(remember(&mut known, "a:80", Ok(next)).is_ok());
        let (endpoints, _) = membership(&["a:80".to_owned()], &known);
        assert_eq!(ids(&endpoints), ["10.0.0.2:80", "10.0.0.3:80"]);
    }

    #[test]
    fn an_address_listed_twice_is_one_endpoint() {
        let configured = vec!["a.internal:80".to_owned(), "10.0.0.1:80".to_owned()];
        let mut known = BTreeMap::new();
        known.insert(
            "a.internal:80".to_owned(),
            vec!["10.0.0.1:80".parse().unwrap()],
        );
        let (endpoints, _) = membership(&configured, &known);
        assert_eq!(ids(&endpoints), ["10.0.0.1:80"]);
    }
}
