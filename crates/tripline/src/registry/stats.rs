//! What a registry reports: per-key metrics for an admin page, and
//! registry-wide counts whose size does not grow with the keys, for time
//! series (instance- and parameter-level breakers must not
//! turn into one series per key).

use std::sync::atomic::Ordering;

use super::{BreakerRegistry, RegistryKey};
use crate::breaker::{CircuitBreaker, Metrics, State};

/// Registry-wide counts whose size does not grow with the keys: the
/// series to export when per-key series would explode.
///
/// ```
/// use tripline::registry::{BreakerRegistry, RegistryConfig};
///
/// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
/// for tenant in 0..100 {
///     registry.get(&tenant).unwrap();
/// }
/// registry.get(&3).unwrap().force_open();
/// let stats = registry.stats();
/// assert_eq!((stats.live, stats.created), (100, 100));
/// assert_eq!((stats.by_state.closed, stats.by_state.operator), (99, 1));
/// ```
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
///
/// ```
/// use tripline::registry::StateCounts;
///
/// let counts = StateCounts { closed: 3, open: 1, ..Default::default() };
/// assert_eq!(counts.closed + counts.open + counts.half_open + counts.operator, 4);
/// ```
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

    /// Visits every breaker of the registry with its key, without cloning
    /// a handle or collecting a list: for exporters that read thousands of
    /// breakers at scrape time (a cold path: the call path never waits for
    /// it, and it writes no shared memory). Breakers created or removed
    /// during the visit may or may not be seen. Do not block in `f`: the
    /// visit holds the map's epoch guard, delaying reclamation of removed
    /// entries.
    ///
    /// ```
    /// use tripline::registry::{BreakerRegistry, RegistryConfig};
    ///
    /// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    /// registry.get(&1).unwrap();
    /// registry.get(&2).unwrap();
    /// let mut names = Vec::new();
    /// registry.for_each_breaker(|_key, breaker| names.push(breaker.name().to_string()));
    /// names.sort();
    /// assert_eq!(names, ["default:1", "default:2"]);
    /// ```
    pub fn for_each_breaker(&self, mut f: impl FnMut(&K, &CircuitBreaker)) {
        let guard = scc::Guard::new();
        for (k, e) in self.shared.map.iter(&guard) {
            f(k, &e.breaker);
        }
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
}
