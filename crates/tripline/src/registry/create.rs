//! The slow path of a lookup: a new key gets a breaker, or the overflow
//! policy decides.
//!
//! A slot is reserved against `max_breakers` by CAS *before* the breaker is
//! built, and given back if the insertion loses a race or the config is
//! invalid, so the map never holds more than `max_breakers` entries, even
//! for an instant. The family template's read lock is held from reading
//! the config to the insertion, so a concurrent
//! [`reconfigure_family`](super::BreakerRegistry::reconfigure_family)
//! either sees the new breaker or hands it the new config.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::entry::Entry;
use super::{OverflowPolicy, RegistryError, RegistryKey, Shared, Template};
use crate::breaker::{CircuitBreaker, CircuitBreakerBuilder, CircuitBreakerConfig, ConfigError};
use crate::clock::Clock;

impl<K: RegistryKey> Shared<K> {
    /// Reserve a slot, build, insert; or the overflow policy.
    #[cold]
    pub(crate) fn create(
        &self,
        key: &K,
        this: &Arc<Self>,
    ) -> Result<CircuitBreaker, RegistryError> {
        loop {
            if !self.reserve() {
                return self.full(this);
            }
            let template = self.template();
            let breaker = match self.build(key, &template) {
                Ok(breaker) => breaker,
                Err(e) => {
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    return Err(e);
                }
            };
            if let Some((state, _)) = template.held {
                // Before it is visible: no call sees it in another state.
                super::hold::put_in(&breaker, state);
            }
            let entry = Entry::new(breaker.clone(), self.clock.now());
            let inserted = self.map.insert_sync(key.clone(), entry).is_ok();
            drop(template);
            if inserted {
                self.entries.fetch_add(1, Ordering::AcqRel);
                self.created.fetch_add(1, Ordering::Relaxed);
                self.forward_if_subscribed(key, this);
                return Ok(breaker);
            }
            // Another thread created it first: use theirs (unless it was
            // removed meanwhile; then try again).
            self.live.fetch_sub(1, Ordering::AcqRel);
            if let Some(b) = self.map.peek_with(key, |_, e| e.breaker.clone()) {
                return Ok(b);
            }
        }
    }

    /// Takes one of the `max_breakers` slots, if one is free.
    fn reserve(&self) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_breakers).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back the slot of an entry that left the map.
    pub(crate) fn release(&self) {
        self.entries.fetch_sub(1, Ordering::AcqRel);
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    fn full(&self, this: &Arc<Self>) -> Result<CircuitBreaker, RegistryError> {
        match self.overflow {
            OverflowPolicy::Reject => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(RegistryError::Full {
                    max_breakers: self.max_breakers,
                })
            }
            OverflowPolicy::SharedOverflow => {
                self.overflowed.fetch_add(1, Ordering::Relaxed);
                if let Some(b) = self.overflow_breaker.get() {
                    return Ok(b.clone());
                }
                self.create_overflow(this)
            }
        }
    }

    #[cold]
    fn create_overflow(&self, this: &Arc<Self>) -> Result<CircuitBreaker, RegistryError> {
        let name = self.overflow_name();
        // Held until the breaker is published, as for keyed breakers.
        let template = self.template();
        let breaker = self
            .family_breaker(name.clone(), &template)
            .map_err(|source| RegistryError::InvalidConfig {
                breaker: name,
                source,
            })?;
        if let Some((state, _)) = template.held {
            super::hold::put_in(&breaker, state);
        }
        let mut won = false;
        let breaker = self
            .overflow_breaker
            .get_or_init(|| {
                won = true;
                breaker
            })
            .clone();
        drop(template);
        if won {
            self.forward_overflow_if_subscribed(this);
        }
        Ok(breaker)
    }

    pub(crate) fn overflow_name(&self) -> String {
        format!("{}:overflow", self.family)
    }

    /// Whether a per-key override applies to `key` (the override map
    /// first, then the function).
    pub(crate) fn override_for(&self, key: &K) -> Option<CircuitBreakerConfig> {
        self.by_key
            .get(key)
            .cloned()
            .or_else(|| self.by_fn.as_ref().and_then(|f| f(key)))
    }

    /// The breaker of `key`: its override, else the family template
    /// (shared, not copied), named after the key.
    fn build(&self, key: &K, template: &Template) -> Result<CircuitBreaker, RegistryError> {
        let mut name = (self.naming)(key);
        name.shrink_to_fit();
        let built = match self.override_for(key) {
            Some(config) => self.builder(&name).config(CircuitBreakerConfig {
                name: name.clone(),
                ..config
            }),
            None => {
                return self
                    .family_breaker(name.clone(), template)
                    .map_err(|source| RegistryError::InvalidConfig {
                        breaker: name,
                        source,
                    });
            }
        }
        .build();
        built.map_err(|source| RegistryError::InvalidConfig {
            breaker: name,
            source,
        })
    }

    /// A breaker named `name` on the family's shared settings.
    fn family_breaker(
        &self,
        name: String,
        template: &Template,
    ) -> Result<CircuitBreaker, ConfigError> {
        self.builder(&name)
            .share_settings_of(name, &template.sibling)
            .build()
    }

    /// A builder for a breaker named `name`: the registry's clock, a seed
    /// derived from the name (deterministic whatever the creation order),
    /// and one stripe: a keyed breaker sees a slice of the traffic, and
    /// memory per key matters more than contention (a second stripe costs
    /// a line of counters, 7 words of alignment slack and, for a time
    /// window, a second copy of its buckets).
    fn builder(&self, name: &str) -> CircuitBreakerBuilder {
        let mut builder = CircuitBreaker::builder()
            .clock(self.clock.clone())
            .stripes(1);
        if let Some(seed) = self.seed {
            builder = builder.seed(seed).instance_id(fnv1a(name.as_bytes()));
        }
        builder
    }
}

/// FNV-1a: a stable (unkeyed) hash of a breaker's name, for its instance id.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01B3)
    })
}
