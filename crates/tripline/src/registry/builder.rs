//! Building a registry: config, naming, per-key overrides, clock, seed.

use std::collections::HashMap;
use std::fmt::{self, Display};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock, RwLock};

use super::config::{error, nested};
use super::events::Subscribers;
use super::{BreakerRegistry, NameFn, OverrideFn, RegistryConfig, RegistryKey, Shared, Template};
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError, ConfigWarning};
use crate::clock::SharedClock;
use crate::setters::setters;

/// Builds a [`BreakerRegistry`]: per-key overrides, a naming function, a
/// clock or a seed.
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::registry::{BreakerRegistry, RegistryConfig};
/// use tripline::{CircuitBreakerConfig, WindowConfig};
///
/// /// Parameter-level breakers: one per tenant of a payment API.
/// #[derive(Clone, Hash, PartialEq, Eq)]
/// struct Tenant(u32);
///
/// let registry = BreakerRegistry::<Tenant>::builder_with_names(
///     RegistryConfig::default(),
///     |t: &Tenant| format!("payments:tenant-{}", t.0),
/// )
/// // Tenant 1 is large: a bigger sample before judging it.
/// .override_key(Tenant(1), CircuitBreakerConfig {
///     window: WindowConfig::Count { size: 500 },
///     minimum_calls: 100,
///     ..Default::default()
/// })
/// // Tenants above 1000 are trial accounts: trip early.
/// .override_with(|t: &Tenant| (t.0 > 1000).then(|| CircuitBreakerConfig {
///     minimum_calls: 5,
///     ..Default::default()
/// }))
/// .clock(ManualClock::new())
/// .build()
/// .unwrap();
///
/// assert_eq!(registry.get(&Tenant(1)).unwrap().config().minimum_calls, 100);
/// assert_eq!(registry.get(&Tenant(2)).unwrap().config().minimum_calls, 20);
/// let trial = registry.get(&Tenant(5000)).unwrap();
/// assert_eq!((trial.name(), trial.config().minimum_calls), ("payments:tenant-5000", 5));
/// ```
pub struct RegistryBuilder<K: RegistryKey> {
    config: RegistryConfig,
    naming: NameFn<K>,
    by_key: HashMap<K, CircuitBreakerConfig>,
    by_fn: Option<OverrideFn<K>>,
    clock: Option<SharedClock>,
    seed: Option<u64>,
}

impl<K: RegistryKey + Display> BreakerRegistry<K> {
    /// A registry whose breakers are named `"<family>:<key>"`, on the
    /// production clock.
    pub fn try_new(config: RegistryConfig) -> Result<Self, ConfigError> {
        Self::builder(config).build()
    }

    /// A builder whose breakers are named `"<family>:<key>"`.
    pub fn builder(config: RegistryConfig) -> RegistryBuilder<K> {
        let family = config.breaker.name.clone();
        Self::builder_with_names(config, move |k: &K| format!("{family}:{k}"))
    }
}

impl<K: RegistryKey> BreakerRegistry<K> {
    /// A builder whose breakers are named by `naming` (for keys without
    /// `Display`, or another scheme). Names appear in events, metrics and
    /// errors: make them say which key they are. `naming` runs when a
    /// breaker is created, under the family template's read lock: it must
    /// not call back into the registry.
    pub fn builder_with_names(
        config: RegistryConfig,
        naming: impl Fn(&K) -> String + Send + Sync + 'static,
    ) -> RegistryBuilder<K> {
        RegistryBuilder {
            config,
            naming: Arc::new(naming),
            by_key: HashMap::new(),
            by_fn: None,
            clock: None,
            seed: None,
        }
    }
}

impl<K: RegistryKey> RegistryBuilder<K> {
    /// Gives `key` its own config instead of the family's (its `name` is
    /// replaced by the key's name). Checked by [`build`](Self::build).
    pub fn override_key(mut self, key: K, config: CircuitBreakerConfig) -> Self {
        self.by_key.insert(key, config);
        self
    }

    /// Computes a per-key config: `Some` replaces the family config for
    /// that key (its `name` is replaced by the key's name), `None` keeps
    /// it. Consulted when a key's breaker is created, after
    /// [`override_key`](Self::override_key); an invalid result makes that
    /// lookup fail with [`RegistryError::InvalidConfig`](super::RegistryError::InvalidConfig).
    /// Like the naming function, it must not call back into the registry,
    /// and it should be pure: [`reconfigure_family`](BreakerRegistry::reconfigure_family)
    /// asks it again which keys are overridden.
    pub fn override_with(
        mut self,
        f: impl Fn(&K) -> Option<CircuitBreakerConfig> + Send + Sync + 'static,
    ) -> Self {
        self.by_fn = Some(Arc::new(f));
        self
    }

    setters! {
        /// Uses `clock` for every breaker and for idle eviction.
        clock: Some(impl Into<SharedClock>),

        /// Seeds every breaker's jitter, mixed with a hash of its name: runs
        /// are reproducible whatever order keys arrive in.
        seed: Some(u64),
    }

    /// Validates everything and builds the registry.
    pub fn build(self) -> Result<BreakerRegistry<K>, ConfigError> {
        self.build_with_warnings().map(|(r, _)| r)
    }

    /// Like [`build`](Self::build), also returning the configs' warnings.
    pub fn build_with_warnings(
        self,
    ) -> Result<(BreakerRegistry<K>, Vec<ConfigWarning>), ConfigError> {
        let mut warnings = self.config.validate()?;
        for (key, config) in &self.by_key {
            let name = (self.naming)(key);
            let config = CircuitBreakerConfig {
                name: name.clone(),
                ..config.clone()
            };
            let prefix = format!("overrides[{name}]");
            if name.is_empty() {
                return Err(error(prefix, "the naming function gave an empty name"));
            }
            for mut w in config.validate().map_err(|e| nested(&prefix, e))? {
                w.field = format!("{prefix}.{}", w.field);
                warnings.push(w);
            }
        }
        let family = &self.config.breaker.name;
        for w in &warnings {
            tracing::warn!(target: "tripline::registry", family = %family, "{w}");
        }
        let RegistryConfig {
            max_breakers,
            overflow,
            idle_ttl,
            breaker,
        } = self.config;
        let clock = self.clock.unwrap_or_default();
        let shared = Shared {
            family: Arc::from(breaker.name.as_str()),
            map: scc::HashIndex::with_hasher(foldhash::fast::RandomState::default()),
            live: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            max_breakers,
            overflow,
            idle_ttl,
            template: RwLock::new(Template {
                sibling: CircuitBreaker::builder()
                    .config(breaker.clone())
                    .clock(clock.clone())
                    .stripes(1)
                    .build()
                    .map_err(|e| nested("breaker", e))?,
                config: breaker,
                held: None,
            }),
            by_key: self.by_key,
            by_fn: self.by_fn,
            naming: self.naming,
            clock,
            seed: self.seed,
            overflow_breaker: OnceLock::new(),
            holding: Default::default(),
            subscribers: Subscribers::new(),
            forwarding: AtomicBool::new(false),
            overflow_forwarded: AtomicBool::new(false),
            created: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            overflowed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        };
        Ok((
            BreakerRegistry {
                shared: Arc::new(shared),
            },
            warnings,
        ))
    }
}

impl<K: RegistryKey> fmt::Debug for RegistryBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("config", &self.config)
            .field("overridden_keys", &self.by_key.len())
            .field("override_fn", &self.by_fn.is_some())
            .field("clock", &self.clock)
            .field("seed", &self.seed)
            .finish()
    }
}
