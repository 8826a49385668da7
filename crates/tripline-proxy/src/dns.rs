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

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tripline::cluster::{Cluster, EndpointConfig};

use crate::proxy::Inner;
use crate::upstream::ResolvedNames;

/// How long one lookup may take before it counts as failed.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts a refresher for every cluster with `dns_refresh`, on `tasks`
/// (aborted when the proxy drains).
///
/// The refreshers follow the clusters of the table the proxy starts with;
/// a cluster a reload keeps (unchanged config) keeps its refresher, one a
/// reload builds anew resolves its names per connection until a restart.
pub(crate) fn spawn_refreshers(inner: &Arc<Inner>, tasks: &mut JoinSet<()>) {
    let table = inner.table.load_full();
    for (name, section) in &table.config.clusters {
        let (Some(every), Some(cluster), Some(upstream)) = (
            section.dns_refresh,
            table.clusters.get(name),
            table.upstreams.get(name),
        ) else {
            continue;
        };
        let refresher = Refresher {
            cluster: cluster.clone(),
            configured: section.endpoints.clone(),
            names: upstream.names.clone(),
            known: BTreeMap::new(),
        };
        tasks.spawn(refresher.run(every));
    }
}

/// One cluster's re-resolution.
struct Refresher {
    cluster: Cluster,
    /// The endpoints as written in the config.
    configured: Vec<String>,
    /// Where TLS looks up the name an address came from.
    names: ResolvedNames,
    /// The last good answer for each name entry (`host:port`).
    known: BTreeMap<String, Vec<SocketAddr>>,
}

impl Refresher {
    async fn run(mut self, every: Duration) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.refresh().await;
        }
    }

    /// Resolves every name entry once and applies the membership.
    async fn refresh(&mut self) {
        for entry in &self.configured {
            if entry.parse::<SocketAddr>().is_ok() {
                continue;
            }
            let looked_up = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host(entry));
            let answer = match looked_up.await {
                Ok(Ok(addrs)) => Ok(addrs.collect()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {LOOKUP_TIMEOUT:?}")),
            };
            if let Err(error) = remember(&mut self.known, entry, answer) {
                tracing::warn!(
                    cluster = self.cluster.name(),
                    endpoint = %entry,
                    %error,
                    "DNS re-resolution failed; keeping the last known addresses"
                );
            }
        }
        let (endpoints, names) = membership(&self.configured, &self.known);
        let current = self.cluster.endpoints();
        let same = current.len() == endpoints.len()
            && current
                .iter()
                .zip(&endpoints)
                .all(|(c, e)| c.id().as_str() == e.id && c.address() == e.address);
        // Names first: a connection to a new address must find its name.
        *self.names.write().unwrap_or_else(|e| e.into_inner()) = names;
        if same {
            return;
        }
        let ids: Vec<&str> = endpoints.iter().map(|e| e.id.as_str()).collect();
        match self.cluster.set_endpoints(endpoints.clone()) {
            Ok(()) => tracing::info!(
                cluster = self.cluster.name(),
                endpoints = ?ids,
                "endpoints follow DNS"
            ),
            Err(e) => tracing::warn!(
                cluster = self.cluster.name(),
                error = %e,
                "DNS answer refused by the cluster; endpoints unchanged"
            ),
        }
    }
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
