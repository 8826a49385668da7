//! Keyed breakers: one breaker per service, method, instance or business
//! parameter, bounded in number and reclaimed when idle.
//!
//! # Why a registry
//!
//! The right granularity is usually finer than "one breaker per
//! dependency": a service-level breaker cuts off nineteen
//! healthy methods because one is slow; method level (`service + method`)
//! is the usual default; instance level isolates one bad host; parameter
//! level (tenant, shard) isolates one bad shard. Finer keys multiply
//! breakers — 50 services × 20 methods × 20 instances is 20 000 of them
//! — and a business key's cardinality is whatever the traffic says
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
//! # Configuration
//!
//! A [`RegistryConfig`] (same serde vocabulary as the breaker's) holds the
//! family's breaker template, `max_breakers`, the `overflow` policy and
//! `idle_ttl`. Per-key overrides — a map and/or a function of the key —
//! are given to the [`RegistryBuilder`]; every breaker is named after its
//! key (`"<family>:<key>"` by default), so its events and metrics say which
//! key they are about. [`BreakerRegistry::reconfigure_family`] changes the
//! template live, for present and future breakers alike.
//!
//! # Observability with bounded cardinality
//!
//! Per-key metrics ([`BreakerRegistry::metrics`]) are there for an admin
//! page; for time series, export [`BreakerRegistry::stats`] — counts by
//! state, creations, evictions, overflows — whose size does not grow with
//! the keys. Events of every breaker reach
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
mod create;
mod entry;
mod events;
mod evict;
mod hold;
mod reconfigure;
mod snapshot;
mod stats;

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard};

pub use builder::RegistryBuilder;
pub use config::{MIN_IDLE_TTL, OverflowPolicy, RegistryConfig};
pub use events::RegistrySubscription;
pub use stats::{RegistryStats, StateCounts};

use self::entry::Entry;
use self::events::Subscribers;
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError, State};
use crate::clock::{SharedClock, Timestamp};

/// What a registry key must be: hashable, comparable, cheap enough to
/// clone into the map, and shareable across threads. Implemented for every
/// such type: `String`, `(String, String)`, a `u64` tenant id, your own
/// struct.
///
/// ```
/// use tripline::registry::{BreakerRegistry, RegistryConfig};
///
/// // Method-level keys as a tuple: no Display, so name them explicitly.
/// let registry = BreakerRegistry::<(&'static str, &'static str)>::builder_with_names(
///     RegistryConfig::default(),
///     |(service, method)| format!("rpc:{service}.{method}"),
/// )
/// .build()
/// .unwrap();
/// assert_eq!(registry.get(&("orders", "create")).unwrap().name(), "rpc:orders.create");
/// ```
pub trait RegistryKey: Hash + Eq + Clone + Send + Sync + 'static {}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RegistryKey for T {}

type NameFn<K> = Arc<dyn Fn(&K) -> String + Send + Sync>;
type OverrideFn<K> = Arc<dyn Fn(&K) -> Option<CircuitBreakerConfig> + Send + Sync>;

/// A family of keyed circuit breakers: a cheap, cloneable handle; clones
/// share one registry.
///
/// See the [module docs](self) for the design; [`get`](Self::get) is the
/// call path.
///
/// ```
/// use tripline::registry::{BreakerRegistry, RegistryConfig};
///
/// let registry = BreakerRegistry::<u64>::try_new(RegistryConfig::default()).unwrap();
/// let shard_7 = registry.get(&7).unwrap();
/// assert!(shard_7.ptr_eq(&registry.get(&7).unwrap()), "one breaker per key");
/// let state = registry.with(&7, |b| b.state()).unwrap(); // no handle clone
/// assert_eq!(state, tripline::State::Closed);
/// ```
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
    template: RwLock<Template>,
    by_key: HashMap<K, CircuitBreakerConfig>,
    by_fn: Option<OverrideFn<K>>,
    naming: NameFn<K>,
    clock: SharedClock,
    seed: Option<u64>,
    overflow_breaker: OnceLock<CircuitBreaker>,
    /// One [`hold_family`](BreakerRegistry::hold_family) at a time.
    holding: hold::Holding,
    subscribers: Subscribers<K>,
    /// Whether anyone subscribed to the registry (forwarders are installed
    /// from then on).
    forwarding: AtomicBool,
    overflow_forwarded: AtomicBool,
    created: AtomicU64,
    evicted: AtomicU64,
    removed: AtomicU64,
    overflowed: AtomicU64,
    refused: AtomicU64,
}

/// A lookup that found no breaker and could not make one.
///
/// ```
/// use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig, RegistryError};
///
/// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig {
///     max_breakers: 1,
///     overflow: OverflowPolicy::Reject,
///     ..Default::default()
/// })
/// .unwrap();
/// registry.get(&1).unwrap();
/// assert_eq!(registry.get(&2).unwrap_err(), RegistryError::Full { max_breakers: 1 });
/// ```
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
        self.shared.template().config.clone()
    }

    /// The shared overflow breaker, once a full registry has handed it out.
    pub fn overflow_breaker(&self) -> Option<CircuitBreaker> {
        self.shared.overflow_breaker.get().cloned()
    }
}

/// The family's config, and an idle breaker running it whose settings every
/// breaker of the family shares: thousands of breakers, one config in memory.
pub(crate) struct Template {
    pub(crate) config: CircuitBreakerConfig,
    pub(crate) sibling: CircuitBreaker,
    /// The operator state every breaker is made in, while a
    /// [`hold_family`](BreakerRegistry::hold_family) lasts, and since when
    /// (on the registry's clock).
    pub(crate) held: Option<(State, Timestamp)>,
}

impl<K: RegistryKey> Shared<K> {
    pub(crate) fn template(&self) -> RwLockReadGuard<'_, Template> {
        // Writers replace the config whole: a poisoned lock still holds a
        // consistent value.
        self.template
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
