//! Idle eviction: drop `Closed` breakers whose call counts have not moved
//! for `idle_ttl`, without a write on the call path.
//!
//! # Algorithm
//!
//! A breaker already keeps cumulative counts of every call it saw (they
//! feed its metrics). Each pass reads them and compares with the count the
//! previous pass stored in the entry: a change means activity, and the
//! entry remembers the pass's time (in whole seconds, see `entry.rs`). An
//! entry is evicted when its breaker is `Closed` and its count has not
//! moved for at least `idle_ttl`. So idleness is measured with the
//! resolution of the pass interval: call `evict_idle` every `idle_ttl / 2`
//! or so.
//!
//! # Races
//!
//! A call can slip in between the check and the removal. After removing,
//! the pass reads the breaker's state again; if it is no longer `Closed`
//! (the call tripped it, or an operator forced it), the entry is put back,
//! so a breaker leaves the registry only while `Closed` — with one
//! residual exception: if in that same microsecond a lookup of the key
//! also created a new breaker, the new one stays (a key never has two) and
//! the tripped one leaves, counted as evicted. A caller that obtained the
//! handle just before the removal keeps a working, detached breaker; its
//! next lookup gets a fresh one.

use std::sync::atomic::Ordering;

use super::entry::Entry;
use super::{BreakerRegistry, RegistryKey};
use crate::breaker::{CircuitBreaker, State};
use crate::clock::Clock;

/// The breaker's activity (every call it has seen, whatever its fate), if
/// it may be evicted at all (it is `Closed`). Reads counters only: no
/// allocation per breaker per pass.
fn evictable(breaker: &CircuitBreaker) -> Option<u64> {
    (breaker.state() == State::Closed).then(|| breaker.activity())
}

impl<K: RegistryKey> BreakerRegistry<K> {
    /// One eviction pass: drops every `Closed` breaker that saw no call for
    /// `idle_ttl` (measured on the registry's clock, between passes), with
    /// its subscribers. Returns how many were dropped. Does nothing when
    /// `idle_ttl` is `None`.
    ///
    /// A dropped breaker's memory comes back once the map's epoch moves on,
    /// which later registry calls bring about. Epochs are process-wide: a
    /// thread that stays inside a long map operation (another registry's
    /// drop, say) holds reclamation back until it leaves.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tripline::clock::ManualClock;
    /// use tripline::registry::{BreakerRegistry, RegistryConfig};
    ///
    /// let clock = ManualClock::new();
    /// let registry = BreakerRegistry::<u32>::builder(RegistryConfig {
    ///     idle_ttl: Some(Duration::from_secs(60)),
    ///     ..Default::default()
    /// })
    /// .clock(clock.clone())
    /// .build()
    /// .unwrap();
    ///
    /// let busy = registry.get(&1).unwrap();
    /// let _idle = registry.get(&2).unwrap();
    /// for _ in 0..3 {
    ///     clock.advance(Duration::from_secs(30));
    ///     let _ = busy.call(|| Ok::<_, ()>(()));
    ///     registry.evict_idle();
    /// }
    /// assert!(registry.peek(&1).is_some(), "busy: kept");
    /// assert!(registry.peek(&2).is_none(), "idle for 90 s: evicted");
    /// ```
    pub fn evict_idle(&self) -> usize {
        let s = &*self.shared;
        let Some(ttl) = s.idle_ttl else {
            return 0;
        };
        let now = s.clock.now();
        let guard = scc::Guard::new();
        let mut evicted = 0;
        for (key, entry) in s.map.iter(&guard) {
            let Some(calls) = evictable(&entry.breaker) else {
                continue;
            };
            if entry.observe(calls, now) < ttl {
                continue;
            }
            if !s
                .map
                .remove_if_sync(key, |e| e.breaker.ptr_eq(&entry.breaker))
            {
                continue; // removed or replaced meanwhile
            }
            if entry.breaker.state() != State::Closed
                && s.map
                    .insert_sync(key.clone(), Entry::put_back(entry, now))
                    .is_ok()
            {
                // It tripped (or an operator forced it) between the check
                // and the removal: it is back.
                s.forward_if_subscribed(key, &self.shared);
                continue;
            }
            entry.breaker.unsubscribe_all();
            s.release();
            s.evicted.fetch_add(1, Ordering::Relaxed);
            evicted += 1;
        }
        evicted
    }
}
