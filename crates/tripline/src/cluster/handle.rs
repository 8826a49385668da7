//! The public handle of a cluster, and the lease of one endpoint.

use std::fmt;
use std::sync::atomic::Ordering;

use super::balance::NONE_TRIED;
use super::config::{ClusterBuilder, ClusterConfig};
use super::endpoint::{Endpoint, EndpointConfig};
use super::shared::Shared;
use super::{Balancer, EndpointId, Lease, Unavailable};
use crate::clock::SharedClock;
use crate::error::PolicyConfigError;
use crate::outlier::{ClusterEvent, ClusterSubscription, HubOwner, OutlierConfig};
use crate::registry::BreakerRegistry;
use crate::sync::{Arc, lock};

/// A dependency's endpoints with their balancer, breakers and outlier
/// detection: a cheap handle, clones share one cluster. The strategies
/// ([`Failover`](super::Failover) and the others) each hold one.
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::cluster::{Cluster, EndpointConfig, EndpointOutcome};
///
/// let cluster = Cluster::builder()
///     .endpoint(EndpointConfig::new("a", "10.0.0.1:80"))
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let lease = cluster.select().unwrap();
/// assert_eq!(lease.endpoint().id().as_str(), "a");
/// lease.record(EndpointOutcome::Success);
///
/// cluster.add_endpoint(EndpointConfig::new("b", "10.0.0.2:80")).unwrap();
/// assert_eq!(cluster.len(), 2);
/// ```
#[derive(Clone)]
pub struct Cluster {
    pub(crate) shared: Arc<Shared>,
}

/// The cluster's health at a glance.
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig};
///
/// let cluster = Cluster::builder()
///     .endpoints([EndpointConfig::new("a", "a:80"), EndpointConfig::new("b", "b:80")])
///     .build()
///     .unwrap();
/// cluster.mark_unhealthy("b", true);
/// let h = cluster.health();
/// assert_eq!((h.endpoints, h.routable, h.ejected, h.panic), (2, 1, 0, false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterHealth {
    /// Endpoints in the cluster.
    pub endpoints: usize,
    /// Endpoints ejected by outlier detection.
    pub ejected: usize,
    /// Endpoints neither ejected nor marked unhealthy.
    pub routable: usize,
    /// Whether the cluster is in panic mode.
    pub panic: bool,
}

/// The six strategies by name, for configuration and labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ClusterStrategy {
    /// [`Failover`](super::Failover): another endpoint on failure.
    Failover,
    /// [`Failfast`](super::Failfast): one attempt, the error as is.
    Failfast,
    /// [`Failsafe`](super::Failsafe): a default marked degraded on failure.
    Failsafe,
    /// [`Failback`](super::Failback): queued durably, retried in the background.
    Failback,
    /// [`Forking`](super::Forking): parallel calls, first success wins.
    Forking,
    /// [`Broadcast`](super::Broadcast): every endpoint.
    Broadcast,
}

impl ClusterStrategy {
    /// The snake_case name.
    ///
    /// ```
    /// use tripline::cluster::ClusterStrategy;
    /// assert_eq!(ClusterStrategy::Failback.as_str(), "failback");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ClusterStrategy::Failover => "failover",
            ClusterStrategy::Failfast => "failfast",
            ClusterStrategy::Failsafe => "failsafe",
            ClusterStrategy::Failback => "failback",
            ClusterStrategy::Forking => "forking",
            ClusterStrategy::Broadcast => "broadcast",
        }
    }
}

impl Cluster {
    /// A cluster from `config`, on the production clock.
    pub fn try_new(config: ClusterConfig) -> Result<Self, PolicyConfigError> {
        Self::builder().config(config).build()
    }

    /// A builder.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The balancer.
    pub fn balancer(&self) -> Balancer {
        self.shared.balancer
    }

    /// The clock.
    pub fn clock(&self) -> &SharedClock {
        &self.shared.clock
    }

    /// The template of the endpoints' breakers.
    pub fn breaker_config(&self) -> crate::breaker::CircuitBreakerConfig {
        self.shared.family.registry().family_config()
    }

    /// The endpoints' breakers, keyed by endpoint id: for registry-wide
    /// stats, events of every endpoint breaker, snapshots.
    pub fn breakers(&self) -> &BreakerRegistry<EndpointId> {
        self.shared.family.registry()
    }

    /// The outlier detection config, if it is on.
    pub fn outlier_config(&self) -> Option<&OutlierConfig> {
        self.shared.outlier.as_ref().map(|o| &o.config)
    }

    /// Endpoints now.
    pub fn len(&self) -> usize {
        self.shared.set.load().len()
    }

    /// Whether the cluster has no endpoints.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The endpoints now, in order.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.shared.set.load().endpoints.to_vec()
    }

    /// The endpoint named `id`.
    pub fn endpoint(&self, id: &str) -> Option<Endpoint> {
        let set = self.shared.set.load();
        set.position(id).map(|i| set.endpoints[i].clone())
    }

    /// Replaces the endpoints (service discovery's answer): endpoints whose
    /// id and address stay keep their breaker and outlier state; an invalid
    /// list (empty id, weight out of range, duplicate id) changes nothing.
    pub fn set_endpoints(&self, endpoints: Vec<EndpointConfig>) -> Result<(), PolicyConfigError> {
        self.shared.update(|_| Ok(endpoints))
    }

    /// Adds an endpoint (an error if its id is taken).
    pub fn add_endpoint(&self, endpoint: EndpointConfig) -> Result<(), PolicyConfigError> {
        self.shared.update(|mut all| {
            all.push(endpoint);
            Ok(all)
        })
    }

    /// Removes the endpoint named `id`; `false` if there is none. Calls in
    /// flight to it finish normally.
    pub fn remove_endpoint(&self, id: &str) -> bool {
        let mut found = false;
        let _ = self.shared.update(|mut all| {
            let before = all.len();
            all.retain(|e| e.id != id);
            found = all.len() != before;
            Ok(all)
        });
        found
    }

    /// Changes an endpoint's weight; an error if out of range or unknown.
    pub fn set_weight(&self, id: &str, weight: u32) -> Result<(), PolicyConfigError> {
        self.shared.update(|mut all| {
            let e = all.iter_mut().find(|e| e.id == id).ok_or_else(|| {
                PolicyConfigError::new(
                    "cluster",
                    "endpoints.id",
                    format!("`{id}` is not an endpoint"),
                )
            })?;
            e.weight = weight;
            Ok(all)
        })
    }

    /// Marks an endpoint unhealthy (an active health check failed, it is
    /// draining) or healthy again: unhealthy endpoints are skipped, except
    /// in panic mode. `false` if there is no such endpoint.
    pub fn mark_unhealthy(&self, id: &str, unhealthy: bool) -> bool {
        self.shared.mark(id, unhealthy)
    }

    /// Whether the cluster is in panic mode (see [`crate::outlier`]).
    pub fn is_panicking(&self) -> bool {
        self.shared.panic.load(Ordering::Relaxed)
    }

    /// Counts of endpoints by health.
    pub fn health(&self) -> ClusterHealth {
        let book = lock(&self.shared.health);
        let endpoints = self.shared.set.load().len();
        ClusterHealth {
            endpoints,
            ejected: book.ejected,
            routable: endpoints - book.out.min(endpoints),
            panic: book.panic,
        }
    }

    /// Runs an outlier analysis pass now (returns, success rate, failure
    /// percentage); the next one is due an interval later. Nothing without
    /// outlier detection.
    pub fn analyze(&self) {
        self.shared.analyze_now();
    }

    /// Calls `f` with every event of the cluster until the subscription is dropped.
    pub fn subscribe(
        &self,
        f: impl Fn(&ClusterEvent) + Send + Sync + 'static,
    ) -> ClusterSubscription {
        let id = self.shared.events.subscribe(Arc::new(f));
        let owner: Arc<dyn HubOwner> = self.shared.clone();
        ClusterSubscription {
            hub: Arc::downgrade(&owner),
            id,
        }
    }

    /// Chooses an endpoint and takes its breaker permit, for strategies of
    /// your own: record the outcome on the [`Lease`] (or drop it: a
    /// neutral verdict).
    #[inline]
    pub fn select(&self) -> Result<Lease, Unavailable> {
        self.select_from(&NONE_TRIED)
    }
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.shared.name)
            .field("balancer", &self.shared.balancer)
            .field("endpoints", &self.shared.set.load().endpoints)
            .field("panic", &self.is_panicking())
            .finish()
    }
}
