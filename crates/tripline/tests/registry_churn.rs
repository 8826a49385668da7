//! A churn of 1 000 000 distinct keys through a registry of at most
//! 10 000 breakers stays bounded in breakers and in bytes, and evicted
//! breakers are given back.
//!
//! This test has its own binary on purpose. The registry's map reclaims
//! removed entries by epochs that are global to the process: an epoch can
//! only move on once every thread inside a map operation has seen it. A
//! test running beside this one in the same binary (another registry's
//! million lookups, or its drop) can hold the epoch back for as long as
//! this test looks, and the evicted breakers then stay allocated until
//! later. CI saw exactly that: 5.9 MiB, one full registry, "still held".
//! Alone in its process, the lookups after the last eviction move the
//! epoch on and the memory comes back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreakerConfig, WindowConfig};

const MIB: f64 = 1024.0 * 1024.0;

#[test]
fn a_million_distinct_keys_churn_through_a_bounded_registry() {
    const KEYS: u64 = 1_000_000;
    const MAX: usize = 10_000;
    // Each batch of 50 000 new keys fills the registry (10 000 created) and
    // overflows by 40 000; then the batch goes idle and is evicted. So 200 000
    // breakers are created and evicted, and 800 000 lookups overflow (this
    // keeps the test at a few seconds in a debug build).
    const BATCH: u64 = 50_000;
    let clock = ManualClock::new();
    let ttl = Duration::from_secs(60);
    let registry = BreakerRegistry::<u64>::builder(RegistryConfig {
        max_breakers: MAX,
        overflow: OverflowPolicy::SharedOverflow,
        idle_ttl: Some(ttl),
        breaker: CircuitBreakerConfig {
            name: "tenant".into(),
            // A small window keeps a million creations fast in debug builds.
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 10,
            ..Default::default()
        },
    })
    .clock(clock.clone())
    .build()
    .unwrap();

    let mut max_live = 0;
    let mut overflowed = 0u64;
    let measured = allocation_counter::measure(|| {
        for key in 0..KEYS {
            let b = registry.get(&key).unwrap();
            let _ = b.call(|| Ok::<_, ()>(()));
            if b.name() == "tenant:overflow" {
                overflowed += 1;
            }
            if key % 500 == 0 {
                max_live = max_live.max(registry.len());
            }
            if (key + 1).is_multiple_of(BATCH) {
                assert_eq!(registry.len(), MAX, "full after each batch");
                // One pass marks the batch's activity, the next (a TTL
                // later) evicts it.
                registry.evict_idle();
                clock.advance(ttl);
                let evicted = registry.evict_idle();
                assert_eq!(evicted, MAX, "every idle Closed breaker goes");
                assert!(registry.is_empty());
            }
        }
    });
    let stats = registry.stats();
    // Evicted entries are reclaimed once the map's epoch moves on, which
    // any later lookups do.
    let reclaimed = allocation_counter::measure(|| {
        for key in 0..1_000 {
            assert!(registry.peek(&key).is_none());
        }
    });
    println!(
        "churn of {KEYS} keys: max {max_live} live, peak {:.1} MiB, {:.1} MiB left, {stats:?}",
        measured.bytes_max as f64 / MIB,
        (measured.bytes_current as f64 + reclaimed.bytes_current as f64) / MIB,
    );
    assert!(max_live <= MAX);
    assert_eq!(stats.created, KEYS - overflowed);
    assert_eq!(stats.evicted, stats.created);
    assert_eq!(stats.overflowed, overflowed);
    assert_eq!(overflowed, (KEYS / BATCH) * (BATCH - MAX as u64));
    // Bounded memory: the peak is about one full registry (10 000 small
    // breakers, ~0.6 KiB each with their map entries), not a million.
    let per_breaker = measured.bytes_max as f64 / MAX as f64;
    assert!(
        per_breaker < 4096.0,
        "{per_breaker:.0} B per live breaker at peak"
    );
    let left = measured.bytes_current + reclaimed.bytes_current;
    assert!(
        (left as f64) < 2.0 * MIB,
        "{:.1} MiB still held after evicting everything",
        left as f64 / MIB
    );
}
