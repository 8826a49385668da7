//! Keyed breakers: one breaker per service, method, instance or business
//! parameter, bounded in number and reclaimed when idle.
//!
//! # Why a registry
//!
//! The right granularity is usually finer than "one breaker per
//! dependency" (seed 001 §5.1): a service-level breaker cuts off nineteen
//! healthy methods because one is slow; method level (`service + method`)
//! is the usual default; instance level isolates one bad host; parameter
//! level (tenant, shard) isolates one bad shard. Finer keys multiply
//! breakers — 50 services × 20 methods × 20 instances is 20 000 of them
//! (§3.3.2) — and a business key's cardinality is whatever the traffic says
//! it is. So a [`BreakerRegistry`] creates breakers on first use from a
//! family config (with per-key overrides), caps their number at
//! `max_breakers` with an explicit [`OverflowPolicy`], and evicts breakers
//! that sit idle and `Closed` for `idle_ttl`.
//!
//! # Lookups
//!
//! Breakers live in an [`scc::HashIndex`]: a lookup of an existing key is
//! lock-free and writes no shared memory (it pins a thread-local epoch,
//! hashes the key with foldhash and probes one bucket whose entries are
//! stored inline), so threads looking up breakers never wait for one
//! another nor for a creation or eviction in progress. It was chosen over
//! papaya (also lock-free, but each entry is a separate allocation, one
//! more cache miss, and it measured slower over 20 000 keys) and dashmap
//! (reads take a shard's read lock: a hot key stops scaling at two
//! threads); the figures are in `benches/README.md`. [`get`](BreakerRegistry::get)
//! returns an owned handle (one reference-count increment);
//! [`with`](BreakerRegistry::with) lends the breaker instead.
//!
//! Creating a breaker (first lookup of a key) is the slow path: a slot is
//! reserved against `max_breakers` by CAS before the breaker is built, so
//! the registry never holds more than `max_breakers`, even for an instant.
//!
//! # Idle eviction
//!
//! [`BreakerRegistry::evict_idle`] is an explicit pass (call it from a
//! timer or a background task) driven by the registry's clock. Idleness is
//! detected without adding any write to the call path: each pass reads a
//! breaker's cumulative call counts (which the breaker keeps anyway) and
//! remembers when they last changed. A breaker is evicted only when it is
//! `Closed` and its counts have not moved for `idle_ttl`; an open,
//! half-open or operator-forced breaker is kept, because dropping it would
//! forget that its dependency is down, or an operator's decision. A
//! consequence: an open breaker whose key is never used again stays until
//! [`remove`](BreakerRegistry::remove)d (it still counts towards
//! `max_breakers`).
//!
//! # Observability with bounded cardinality
//!
//! Per-key metrics ([`BreakerRegistry::metrics`]) are there for an admin
//! page; for time series, export [`BreakerRegistry::stats`] — counts by
//! state, creations, evictions, overflows — whose size does not grow with
//! the keys (seed 001 §8.1.2). Events of every breaker reach
//! [`BreakerRegistry::subscribe`] tagged with their key.
//!
//! ```
//! use tripline::registry::{BreakerRegistry, RegistryConfig};
//! use tripline::{CircuitBreakerConfig, State, WindowConfig};
//!
//! // Method-level breakers, keyed by "service/method".
//! let registry = BreakerRegistry::<String>::try_new(RegistryConfig {
//!     max_breakers: 1_000,
//!     breaker: CircuitBreakerConfig {
//!         name: "rpc".into(),
//!         window: WindowConfig::Count { size: 10 },
//!         minimum_calls: 5,
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! })
//! .unwrap();
//!
//! let search = registry.get(&"catalog/search".to_string()).unwrap();
//! for _ in 0..5 {
//!     let _ = search.call(|| Err::<(), _>("timeout"));
//! }
//! assert_eq!(search.state(), State::Open);
//! assert_eq!(search.name(), "rpc:catalog/search");
//! // Another method of the same service is unaffected.
//! let lookup = registry.get(&"catalog/lookup".to_string()).unwrap();
//! assert_eq!(lookup.state(), State::Closed);
//! assert_eq!(registry.len(), 2);
//! ```

mod builder;
mod config;
mod events;
mod evict;

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

pub use builder::RegistryBuilder;
pub use config::{MIN_IDLE_TTL, OverflowPolicy, RegistryConfig};
pub use events::RegistrySubscription;

use self::events::{Subscribers, Unsubscribe};
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError, Event, Metrics, State};
use crate::clock::{Clock, SharedClock};

/// What a registry key must be: hashable, comparable, cheap enough to
/// clone into the map, and shareable across threads. Implemented for every
/// such type: `String`, `(String, String)`, a `u64` tenant id, your own
/// struct.
pub trait RegistryKey: Hash + Eq + Clone + Send + Sync + 'static {}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RegistryKey for T {}

type NameFn<K> = Arc<dyn Fn(&K) -> String + Send + Sync>;
type OverrideFn<K> = Arc<dyn Fn(&K) -> Option<CircuitBreakerConfig> + Send + Sync>;

/// A family of keyed circuit breakers: a cheap, cloneable handle; clones
/// share one registry.
///
/// See the [module docs](self) for the design; [`get`](Self::get) is the
/// call path.
pub struct BreakerRegistry<K: RegistryKey> {
    shared: Arc<Shared<K>>,
}

impl<K: RegistryKey> Clone for BreakerRegistry<K> {
    fn clone(&self) -> Self {
        BreakerRegistry {
            shared: self.shared.clone(),
        }
    }
}

pub(crate) struct Entry {
    pub(crate) breaker: CircuitBreaker,
    /// The call count the last eviction pass saw.
    pub(crate) seen_calls: AtomicU64,
    /// When that count last changed, in nanoseconds on the registry clock.
    pub(crate) active_at: AtomicU64,
    /// Whether a per-key override made this breaker's config.
    pub(crate) overridden: bool,
}

pub(crate) struct Shared<K> {
    family: Arc<str>,
    map: scc::HashIndex<K, Entry, foldhash::fast::RandomState>,
    /// Slots taken in the map (reserved before insertion): never above
    /// `max_breakers`.
    live: AtomicUsize,
    /// Entries in the map (the index counts only by scanning).
    entries: AtomicUsize,
    max_breakers: usize,
    overflow: OverflowPolicy,
    idle_ttl: Option<std::time::Duration>,
    /// The family template; read only when a breaker is created.
    template: RwLock<CircuitBreakerConfig>,
    by_key: HashMap<K, CircuitBreakerConfig>,
    by_fn: Option<OverrideFn<K>>,
    naming: NameFn<K>,
    clock: SharedClock,
    seed: Option<u64>,
    overflow_breaker: OnceLock<CircuitBreaker>,
    subscribers: Subscribers<K>,
    created: AtomicU64,
    evicted: AtomicU64,
    removed: AtomicU64,
    overflowed: AtomicU64,
    refused: AtomicU64,
}

/// A lookup that found no breaker and could not make one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The registry holds `max_breakers` and its overflow policy is
    /// [`OverflowPolicy::Reject`].
    #[error("breaker registry is full (max_breakers = {max_breakers}): new keys are refused")]
    Full {
        /// The bound that was reached.
        max_breakers: usize,
    },
    /// The config for this key (a per-key override, or the family config
    /// with the key's name) is invalid.
    #[error("no breaker for `{breaker}`: {source}")]
    InvalidConfig {
        /// The name the breaker would have had.
        breaker: String,
        /// What is wrong with its config.
        #[source]
        source: ConfigError,
    },
}

/// Registry-wide counts whose size does not grow with the keys: the
/// series to export when per-key series would explode (seed 001 §8.1.2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RegistryStats {
    /// The family's name.
    pub family: String,
    /// Breakers in the registry now (the overflow breaker excluded).
    pub live: usize,
    /// The bound on `live`.
    pub max_breakers: usize,
    /// Live breakers by state.
    pub by_state: StateCounts,
    /// Breakers created since the registry was.
    pub created: u64,
    /// Breakers dropped by [`BreakerRegistry::evict_idle`].
    pub evicted: u64,
    /// Breakers dropped by [`BreakerRegistry::remove`].
    pub removed: u64,
    /// Lookups of new keys served by the shared overflow breaker.
    pub overflowed: u64,
    /// Lookups of new keys refused because the registry was full.
    pub refused: u64,
}

/// Breakers per state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StateCounts {
    /// `Closed`.
    pub closed: usize,
    /// `Open`.
    pub open: usize,
    /// `HalfOpen`.
    pub half_open: usize,
    /// `ForcedOpen`, `Disabled` or `MetricsOnly`.
    pub operator: usize,
}

impl<K: RegistryKey> BreakerRegistry<K> {
    /// The breaker of `key`, created from the family config (or the key's
    /// override) on first use. When the registry is full, a new key gets
    /// the shared overflow breaker or [`RegistryError::Full`], per the
    /// [`OverflowPolicy`].
    #[inline]
    pub fn get(&self, key: &K) -> Result<CircuitBreaker, RegistryError> {
        if let Some(breaker) = self.shared.map.peek_with(key, |_, e| e.breaker.clone()) {
            return Ok(breaker);
        }
        self.shared.create(key, &self.shared)
    }

    /// Runs `f` with the breaker of `key` (created as by [`get`](Self::get))
    /// without cloning the handle: no reference-count traffic, for hot
    /// synchronous paths shared by many threads. Do not block in `f`: it
    /// holds the map's epoch guard, delaying reclamation of removed entries.
    #[inline]
    pub fn with<R>(
        &self,
        key: &K,
        f: impl FnOnce(&CircuitBreaker) -> R,
    ) -> Result<R, RegistryError> {
        let guard = scc::Guard::new();
        if let Some(entry) = self.shared.map.peek(key, &guard) {
            return Ok(f(&entry.breaker));
        }
        drop(guard);
        self.shared.create(key, &self.shared).map(|b| f(&b))
    }

    /// The breaker of `key` if the registry holds one; never creates.
    pub fn peek(&self, key: &K) -> Option<CircuitBreaker> {
        self.shared.map.peek_with(key, |_, e| e.breaker.clone())
    }

    /// Drops the breaker of `key` with its subscribers and its metrics;
    /// returns it (handles still held elsewhere keep working, detached).
    pub fn remove(&self, key: &K) -> Option<CircuitBreaker> {
        let mut removed = None;
        self.shared.map.remove_if_sync(key, |e| {
            removed = Some(e.breaker.clone());
            true
        });
        let breaker = removed?;
        breaker.unsubscribe_all();
        self.shared.release();
        self.shared.removed.fetch_add(1, Ordering::Relaxed);
        Some(breaker)
    }

    /// Breakers in the registry (the overflow breaker excluded).
    pub fn len(&self) -> usize {
        self.shared.entries.load(Ordering::Acquire)
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The family's name (its breaker template's `name`).
    pub fn family(&self) -> &str {
        &self.shared.family
    }

    /// The family's breaker config as new breakers get it.
    pub fn family_config(&self) -> CircuitBreakerConfig {
        self.shared.template().clone()
    }

    /// The shared overflow breaker, once a full registry has handed it out.
    pub fn overflow_breaker(&self) -> Option<CircuitBreaker> {
        self.shared.overflow_breaker.get().cloned()
    }

    /// Every breaker's metrics with its key, for an admin page (one entry
    /// per key: do not export these as time series, see [`stats`](Self::stats)).
    pub fn metrics(&self) -> Vec<(K, Metrics)> {
        let guard = scc::Guard::new();
        self.shared
            .map
            .iter(&guard)
            .map(|(k, e)| (k.clone(), e.breaker.metrics()))
            .collect()
    }

    /// Registry-wide counts, bounded in size whatever the key cardinality.
    pub fn stats(&self) -> RegistryStats {
        let s = &*self.shared;
        let mut by_state = StateCounts::default();
        let guard = scc::Guard::new();
        for (_, e) in s.map.iter(&guard) {
            match e.breaker.state() {
                State::Closed => by_state.closed += 1,
                State::Open => by_state.open += 1,
                State::HalfOpen => by_state.half_open += 1,
                _ => by_state.operator += 1,
            }
        }
        RegistryStats {
            family: s.family.to_string(),
            live: s.entries.load(Ordering::Acquire),
            max_breakers: s.max_breakers,
            by_state,
            created: s.created.load(Ordering::Relaxed),
            evicted: s.evicted.load(Ordering::Relaxed),
            removed: s.removed.load(Ordering::Relaxed),
            overflowed: s.overflowed.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
        }
    }

    /// Calls `f` with every event of every breaker of the family — present
    /// and future — with the breaker's key (`None` for the overflow
    /// breaker), until the returned subscription is dropped.
    pub fn subscribe(
        &self,
        f: impl Fn(Option<&K>, &Event) + Send + Sync + 'static,
    ) -> RegistrySubscription {
        let id = self.shared.subscribers.add(Arc::new(f));
        let shared: Arc<dyn Unsubscribe> = self.shared.clone();
        RegistrySubscription {
            registry: Arc::downgrade(&shared),
            id,
        }
    }
}

impl<K: RegistryKey> Unsubscribe for Shared<K> {
    fn unsubscribe(&self, id: u64) {
        self.subscribers.remove(id);
    }
}

impl<K: RegistryKey> Shared<K> {
    fn template(&self) -> std::sync::RwLockReadGuard<'_, CircuitBreakerConfig> {
        // Writers replace the config whole: a poisoned lock still holds a
        // consistent value.
        self.template
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The slow path of a lookup: reserve a slot, build, insert.
    #[cold]
    fn create(&self, key: &K, this: &Arc<Self>) -> Result<CircuitBreaker, RegistryError> {
        loop {
            if !self.reserve() {
                return self.full(this);
            }
            let entry = match self.build(key, this) {
                Ok(entry) => entry,
                Err(e) => {
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    return Err(e);
                }
            };
            let breaker = entry.breaker.clone();
            match self.map.insert_sync(key.clone(), entry) {
                Ok(()) => {
                    self.entries.fetch_add(1, Ordering::AcqRel);
                    self.created.fetch_add(1, Ordering::Relaxed);
                    return Ok(breaker);
                }
                Err((_, lost)) => {
                    // Another thread created it first: use theirs (unless it
                    // was removed meanwhile; then try again).
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    lost.breaker.unsubscribe_all();
                    if let Some(b) = self.map.peek_with(key, |_, e| e.breaker.clone()) {
                        return Ok(b);
                    }
                }
            }
        }
    }

    /// Gives back the slot of an entry that left the map.
    pub(crate) fn release(&self) {
        self.entries.fetch_sub(1, Ordering::AcqRel);
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes one of the `max_breakers` slots, if one is free.
    fn reserve(&self) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_breakers).then_some(n + 1)
            })
            .is_ok()
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
                let name = format!("{}:overflow", self.family);
                let config = CircuitBreakerConfig {
                    name: name.clone(),
                    ..self.template().clone()
                };
                let breaker = self.breaker(config, None, this).map_err(|source| {
                    RegistryError::InvalidConfig {
                        breaker: name,
                        source,
                    }
                })?;
                Ok(self.overflow_breaker.get_or_init(|| breaker).clone())
            }
        }
    }

    /// A new entry for `key`: its config (override, else template), named
    /// after the key, with a forwarder of its events to the registry.
    fn build(&self, key: &K, this: &Arc<Self>) -> Result<Entry, RegistryError> {
        let name = (self.naming)(key);
        let (config, overridden) = match self
            .by_key
            .get(key)
            .cloned()
            .or_else(|| self.by_fn.as_ref().and_then(|f| f(key)))
        {
            Some(config) => (config, true),
            None => (self.template().clone(), false),
        };
        let config = CircuitBreakerConfig {
            name: name.clone(),
            ..config
        };
        let breaker = self.breaker(config, Some(key), this).map_err(|source| {
            RegistryError::InvalidConfig {
                breaker: name,
                source,
            }
        })?;
        Ok(Entry {
            breaker,
            seen_calls: AtomicU64::new(0),
            active_at: AtomicU64::new(self.clock.now().as_nanos()),
            overridden,
        })
    }

    fn breaker(
        &self,
        config: CircuitBreakerConfig,
        key: Option<&K>,
        this: &Arc<Self>,
    ) -> Result<CircuitBreaker, ConfigError> {
        let mut builder = CircuitBreaker::builder().clock(self.clock.clone());
        if let Some(seed) = self.seed {
            // Deterministic per key, whatever the creation order.
            builder = builder
                .seed(seed)
                .instance_id(fnv1a(config.name.as_bytes()));
        }
        let breaker = builder.config(config).build()?;
        let registry = Arc::downgrade(this);
        let key = key.cloned();
        breaker
            .subscribe(move |event| {
                if let Some(shared) = registry.upgrade() {
                    shared.subscribers.dispatch(key.as_ref(), event);
                }
            })
            .detach();
        Ok(breaker)
    }
}

/// FNV-1a: a stable (unkeyed) hash of a breaker's name, for its instance id.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01B3)
    })
}

impl<K: RegistryKey> fmt::Debug for BreakerRegistry<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerRegistry")
            .field("family", &self.shared.family)
            .field("len", &self.len())
            .field("max_breakers", &self.shared.max_breakers)
            .field("overflow", &self.shared.overflow)
            .field("idle_ttl", &self.shared.idle_ttl)
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<BreakerRegistry<String>>();
    check::<RegistrySubscription>();
}
