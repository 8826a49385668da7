//! One registry entry: the breaker handle and one packed word of
//! bookkeeping, so that an entry costs two machine words in the map (the
//! 20 000-breaker memory goal has ~90 bytes of headroom per breaker over
//! the breaker itself).
//!
//! The word holds, from the top bit down (the forwarder of registry events
//! is tracked by the breaker itself, whose identity survives the map
//! relocating entries):
//!
//! * bit 63 — unused;
//! * bits 32..63 — the low 31 bits of the breaker's call count as the last
//!   eviction pass saw it (activity shows as a change; it would alias only
//!   after exactly a multiple of 2³¹ calls between two passes);
//! * bits 0..32 — when that count last changed, in whole seconds of the
//!   registry's clock, rounded up (so idleness is never overestimated),
//!   compared with wrapping arithmetic (136 years per lap).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::breaker::CircuitBreaker;
use crate::clock::Timestamp;

const CALLS_MASK: u64 = (1 << 31) - 1;
const SECS_MASK: u64 = (1 << 32) - 1;

pub(crate) struct Entry {
    pub(crate) breaker: CircuitBreaker,
    word: AtomicU64,
}

/// Whole seconds at or after `t`, truncated to 32 bits.
fn secs_up(t: Timestamp) -> u64 {
    t.as_nanos().div_ceil(1_000_000_000) & SECS_MASK
}

impl Entry {
    /// A new entry, active now, with no call seen and no forwarder.
    pub(crate) fn new(breaker: CircuitBreaker, now: Timestamp) -> Self {
        Entry {
            breaker,
            word: AtomicU64::new(secs_up(now)),
        }
    }

    /// The entry that takes `old`'s place when an eviction is undone:
    /// same breaker, active now.
    pub(crate) fn put_back(old: &Entry, now: Timestamp) -> Self {
        Entry {
            breaker: old.breaker.clone(),
            word: AtomicU64::new(CALLS_MASK << 32 | secs_up(now)),
        }
    }

    /// Records what an eviction pass sees: `calls` (the breaker's count)
    /// at `now`. Returns how long the count has not moved.
    pub(crate) fn observe(&self, calls: u64, now: Timestamp) -> Duration {
        let calls = calls & CALLS_MASK;
        let now_secs = now.as_nanos() / 1_000_000_000;
        let mut idle = Duration::ZERO;
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                if (w >> 32) & CALLS_MASK == calls {
                    let since = now_secs.wrapping_sub(w & SECS_MASK) & SECS_MASK;
                    // A reading within the rounded-up second counts as zero.
                    idle = if since > SECS_MASK / 2 {
                        Duration::ZERO
                    } else {
                        Duration::from_secs(since)
                    };
                    None
                } else {
                    idle = Duration::ZERO;
                    Some(calls << 32 | secs_up(now))
                }
            });
        idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::CircuitBreakerConfig;

    fn at(secs: f64) -> Timestamp {
        Timestamp::from_duration(Duration::from_secs_f64(secs))
    }

    #[test]
    fn idleness_is_counted_in_whole_seconds_never_overestimated() {
        let b = CircuitBreaker::try_new(CircuitBreakerConfig::default()).unwrap();
        let e = Entry::new(b, at(10.2));
        // Created at 10.2 s, stored as 11 s: at 70.5 s it has idled 59.
        assert_eq!(e.observe(0, at(70.5)), Duration::from_secs(59));
        assert_eq!(e.observe(0, at(10.9)), Duration::ZERO);
        // A new count restarts the clock.
        assert_eq!(e.observe(5, at(71.0)), Duration::ZERO);
        assert_eq!(e.observe(5, at(131.0)), Duration::from_secs(60));
        // Only the low 31 bits of the count matter.
        assert_eq!(e.observe(5 + (1 << 31), at(140.0)), Duration::from_secs(69));
        assert_eq!(e.observe(6, at(150.0)), Duration::ZERO);
        let back = Entry::put_back(&e, at(200.0));
        assert_eq!(back.observe(6, at(200.0)), Duration::ZERO, "active again");
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }
}
