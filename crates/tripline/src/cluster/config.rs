//! Cluster configuration and the builder.

use std::sync::atomic::AtomicBool;

use super::balance::{BalanceState, Balancer};
use super::breakers::BreakerFamily;
use super::eject::HealthBook;
use super::set::{EndpointSet, breaker_error, validate_endpoints};
use super::shared::Shared;
use super::{Cluster, EndpointConfig, EndpointId};
use crate::breaker::CircuitBreakerConfig;
use crate::clock::{Clock, SharedClock};
use crate::error::PolicyConfigError;
use crate::outlier::{EventHub, OutlierConfig, OutlierDetector, check_percent};
use crate::registry::BreakerRegistry;
use crate::setters::setters;
use crate::sync::{Arc, Mutex};

/// Everything that shapes a cluster: its endpoints, how it balances, its
/// endpoints' breakers and its outlier detection.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use tripline::cluster::{Balancer, ClusterConfig};
///
/// let config: ClusterConfig = toml::from_str(r#"
///     name = "inventory"
///     balancer = "power_of_two_choices"
///     panic_threshold_percent = 50
///     endpoints = [
///         { id = "inv-1", address = "10.0.0.1:8080" },
///         { id = "inv-2", address = "10.0.0.2:8080", weight = 2 },
///     ]
///     [breaker]
///     name = "inventory"
///     minimum_calls = 10
///     [outlier]
///     interval = "10s"
///     max_ejection_percent = 50
/// "#).unwrap();
/// assert_eq!(config.balancer, Balancer::PowerOfTwoChoices);
/// assert!(config.validate().is_ok());
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ClusterConfig {
    /// Names the cluster in errors, events and its breakers' family.
    pub name: String,
    /// How calls are spread.
    pub balancer: Balancer,
    /// Below this share of routable endpoints, in percent (0–100), health
    /// is ignored and traffic spreads over every endpoint (Envoy's
    /// healthy panic threshold); 0 never panics.
    pub panic_threshold_percent: u32,
    /// The template of every endpoint's breaker, named `"<name>:<endpoint id>"`.
    pub breaker: CircuitBreakerConfig,
    /// Outlier detection; `None` switches it off (ejection never happens,
    /// and the call path records nothing for it).
    pub outlier: Option<OutlierConfig>,
    /// The initial endpoints (they can change at runtime).
    pub endpoints: Vec<EndpointConfig>,
}

impl Default for ClusterConfig {
    /// `"cluster"`, round robin, 50 % panic threshold, default breakers, no
    /// outlier detection, no endpoints.
    fn default() -> Self {
        ClusterConfig {
            name: "cluster".to_owned(),
            balancer: Balancer::RoundRobin,
            panic_threshold_percent: 50,
            breaker: CircuitBreakerConfig::default(),
            outlier: None,
            endpoints: Vec::new(),
        }
    }
}

impl ClusterConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.name.is_empty() {
            return Err(PolicyConfigError::new(
                "cluster",
                "name",
                "must not be empty",
            ));
        }
        check_percent(
            "cluster",
            "panic_threshold_percent",
            self.panic_threshold_percent,
        )?;
        self.breaker.validate().map_err(breaker_error)?;
        if let Some(o) = &self.outlier {
            o.validate()?;
        }
        validate_endpoints(&self.endpoints)
    }
}

/// Builds a [`Cluster`].
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::cluster::{Balancer, Cluster, EndpointConfig};
///
/// let cluster = Cluster::builder()
///     .name("search")
///     .balancer(Balancer::WeightedRandom)
///     .endpoint(EndpointConfig::new("s1", "10.0.0.1:80").weight(3))
///     .endpoint(EndpointConfig::new("s2", "10.0.0.2:80"))
///     .clock(ManualClock::new())
///     .seed(7)
///     .build()
///     .unwrap();
/// assert_eq!(cluster.len(), 2);
/// ```
#[derive(Default)]
pub struct ClusterBuilder {
    config: ClusterConfig,
    clock: Option<SharedClock>,
    seed: Option<u64>,
    registry: Option<BreakerRegistry<EndpointId>>,
}

impl ClusterBuilder {
    setters! {
        /// Replaces the whole config.
        config: ClusterConfig,
    }

    /// The cluster's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// The balancer.
    pub fn balancer(mut self, balancer: Balancer) -> Self {
        self.config.balancer = balancer;
        self
    }

    /// The panic threshold, percent.
    pub fn panic_threshold_percent(mut self, percent: u32) -> Self {
        self.config.panic_threshold_percent = percent;
        self
    }

    /// The endpoints' breaker template.
    pub fn breaker(mut self, config: CircuitBreakerConfig) -> Self {
        self.config.breaker = config;
        self
    }

    /// Takes the endpoints' breakers from `registry` (keyed by endpoint id)
    /// instead of a registry of the cluster's own made from `breaker`: for
    /// per-endpoint overrides, or to watch every cluster's breakers in one
    /// place. Give it `idle_ttl: None` (an evicted breaker would leave its
    /// endpoint holding a detached one) and `OverflowPolicy::Reject`
    /// (endpoints sharing an overflow breaker would trip together).
    pub fn breaker_registry(mut self, registry: BreakerRegistry<EndpointId>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Turns outlier detection on with `config`.
    pub fn outlier(mut self, config: OutlierConfig) -> Self {
        self.config.outlier = Some(config);
        self
    }

    /// Adds an endpoint.
    pub fn endpoint(mut self, endpoint: EndpointConfig) -> Self {
        self.config.endpoints.push(endpoint);
        self
    }

    /// Adds endpoints.
    pub fn endpoints(mut self, endpoints: impl IntoIterator<Item = EndpointConfig>) -> Self {
        self.config.endpoints.extend(endpoints);
        self
    }

    setters! {
        /// The clock of the cluster, its breakers and its outlier detection.
        clock: Some(impl Into<SharedClock>),

        /// Seeds the balancer's draws, the ejection jitter and enforcement
        /// rolls, and the breakers' jitter, for reproducible runs.
        seed: Some(u64),
    }

    /// Validates and builds. An empty cluster is allowed (discovery may
    /// fill it later); calls on it fail with [`Unavailable`](super::Unavailable).
    pub fn build(self) -> Result<Cluster, PolicyConfigError> {
        let config = self.config;
        config.validate()?;
        let clock = self.clock.unwrap_or_default();
        let seed = self.seed.unwrap_or_else(crate::rng::random_seed);
        let family = match self.registry {
            Some(r) => BreakerFamily::from_registry(r),
            None => BreakerFamily::new(config.breaker.clone(), clock.clone(), self.seed)
                .map_err(breaker_error)?,
        };
        let (set, _) = EndpointSet::empty().rebuild(&config.endpoints, &family)?;
        let now = clock.now();
        let shared = Shared {
            name: Arc::from(config.name.as_str()),
            set: arc_swap::ArcSwap::from_pointee(set),
            balancer: config.balancer,
            lb: BalanceState::new(seed),
            panic: AtomicBool::new(false),
            panic_threshold: config.panic_threshold_percent,
            outlier: config.outlier.map(|o| OutlierDetector::new(o, now)),
            health: Mutex::new(HealthBook::new(seed ^ 0x006f_7574_6c69_6572)),
            family,
            clock,
            writer: Mutex::new(()),
            events: EventHub::default(),
        };
        Ok(Cluster {
            shared: Arc::new(shared),
        })
    }
}

impl std::fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("config", &self.config)
            .field(
                "registry",
                &self.registry.as_ref().map(|r| r.family().to_owned()),
            )
            .finish()
    }
}
