//! Where endpoints get their breakers: one family config, one breaker per
//! endpoint id, named `"<family>:<endpoint id>"`.
//!
//! This is the one place that makes and forgets endpoint breakers, so that
//! moving to the keyed breaker registry changes nothing else. A breaker is
//! made when an endpoint joins and forgotten when it leaves; an endpoint
//! that stays across an update of the endpoint set keeps its breaker
//! (the set keeps the endpoint itself).

use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError};
use crate::clock::SharedClock;

/// The family of a cluster's endpoint breakers.
pub(crate) struct BreakerFamily {
    config: CircuitBreakerConfig,
    clock: SharedClock,
    seed: Option<u64>,
}

impl BreakerFamily {
    /// A family; its config is validated once here.
    pub(crate) fn new(
        config: CircuitBreakerConfig,
        clock: SharedClock,
        seed: Option<u64>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(BreakerFamily {
            config,
            clock,
            seed,
        })
    }

    /// The family's config (names are per endpoint).
    pub(crate) fn config(&self) -> &CircuitBreakerConfig {
        &self.config
    }

    /// The breaker of a joining endpoint. Its jitter seed mixes the
    /// endpoint id, so endpoints of one family never back off in lock-step.
    pub(crate) fn breaker_for(&self, id: &str) -> Result<CircuitBreaker, ConfigError> {
        let config = CircuitBreakerConfig {
            name: format!("{}:{id}", self.config.name),
            ..self.config.clone()
        };
        let mut b = CircuitBreaker::builder()
            .config(config)
            .clock(self.clock.clone())
            .instance_id(id_hash(id));
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        b.build()
    }

    /// Forgets the breaker of a leaving endpoint (its handles, held by
    /// requests still in flight, keep working, detached).
    pub(crate) fn release(&self, breaker: &CircuitBreaker) {
        breaker.unsubscribe_all();
    }
}

/// A stable hash of an endpoint id (FNV-1a: the same in every process,
/// unlike std's randomly keyed hasher), for the breakers' instance ids.
fn id_hash(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
