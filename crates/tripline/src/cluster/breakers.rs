//! Where endpoints get their breakers: a keyed [`BreakerRegistry`] of
//! the cluster's family, one breaker per endpoint id, named
//! `"<family>:<endpoint id>"`.
//!
//! This is the one place that makes and forgets endpoint breakers. A
//! breaker is taken from the registry when an endpoint joins and removed
//! when it leaves; an endpoint that stays across an update of the endpoint
//! set keeps its breaker (the set keeps the endpoint itself, which holds
//! the handle, so the call path never looks the registry up).
//!
//! The registry the cluster builds for itself never evicts (`idle_ttl`
//! unset: an endpoint's breaker lives as long as the endpoint) and never
//! shares an overflow breaker between endpoints (`OverflowPolicy::Reject`,
//! `max_breakers` = [`MAX_ENDPOINTS`]).

use super::EndpointId;
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError};
use crate::clock::SharedClock;
use crate::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig, RegistryError};

/// Most endpoints (so breakers) a cluster's own registry holds.
pub const MAX_ENDPOINTS: usize = 1_000_000;

/// The family of a cluster's endpoint breakers.
pub(crate) struct BreakerFamily {
    registry: BreakerRegistry<EndpointId>,
}

impl BreakerFamily {
    /// A family of breakers made from `config`; validated once here.
    pub(crate) fn new(
        config: CircuitBreakerConfig,
        clock: SharedClock,
        seed: Option<u64>,
    ) -> Result<Self, ConfigError> {
        let mut b = BreakerRegistry::builder(RegistryConfig {
            max_breakers: MAX_ENDPOINTS,
            overflow: OverflowPolicy::Reject,
            idle_ttl: None,
            breaker: config,
        })
        .clock(clock);
        if let Some(seed) = seed {
            b = b.seed(seed);
        }
        Ok(BreakerFamily {
            registry: b.build()?,
        })
    }

    /// A family in a registry of the caller's (per-endpoint overrides,
    /// shared observation).
    pub(crate) fn from_registry(registry: BreakerRegistry<EndpointId>) -> Self {
        BreakerFamily { registry }
    }

    /// The registry.
    pub(crate) fn registry(&self) -> &BreakerRegistry<EndpointId> {
        &self.registry
    }

    /// The breaker of a joining endpoint.
    pub(crate) fn breaker_for(&self, id: &EndpointId) -> Result<CircuitBreaker, RegistryError> {
        self.registry.get(id)
    }

    /// Forgets the breaker of a leaving endpoint — only if the registry
    /// still holds *that* breaker under its id (a replacement endpoint of
    /// the same id may hold a newer one). Handles held by calls in flight
    /// keep working, detached.
    pub(crate) fn release(&self, id: &EndpointId, breaker: &CircuitBreaker) {
        if self
            .registry
            .peek(id)
            .is_some_and(|current| current.ptr_eq(breaker))
        {
            self.registry.remove(id);
        }
    }
}
