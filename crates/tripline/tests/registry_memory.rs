//! Memory of keyed breakers: 20 000 breakers — 50
//! services × 20 methods × 20 instances — with 10-bucket time windows fit
//! in 40 MiB, a million with the default 100-call count window in
//! 512 MiB, and a churn of 1 000 000 distinct keys through a registry of
//! at most 10 000 stays bounded in breakers and in bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::fmt;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreakerConfig, WindowConfig};

/// An instance-level key: service + method + instance.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Key {
    service: u16,
    method: u16,
    instance: u16,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "svc{}/m{}@{}", self.service, self.method, self.instance)
    }
}

fn time_window() -> WindowConfig {
    WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 10,
    }
}

const MIB: f64 = 1024.0 * 1024.0;

#[test]
fn twenty_thousand_keyed_breakers_fit_in_40_mib() {
    let clock = ManualClock::new();
    let registry = BreakerRegistry::<Key>::builder(RegistryConfig {
        max_breakers: 20_000,
        breaker: CircuitBreakerConfig {
            name: "rpc".into(),
            window: time_window(),
            ..Default::default()
        },
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap();
    let keys: Vec<Key> = (0..50)
        .flat_map(|service| {
            (0..20).flat_map(move |method| {
                (0..20).map(move |instance| Key {
                    service,
                    method,
                    instance,
                })
            })
        })
        .collect();
    assert_eq!(keys.len(), 20_000);
    let measured = allocation_counter::measure(|| {
        for k in &keys {
            let b = registry.get(k).unwrap();
            let _ = b.call(|| Ok::<_, ()>(()));
        }
    });
    assert_eq!(registry.len(), 20_000);
    let bytes = measured.bytes_current as f64;
    let per_breaker = bytes / 20_000.0;
    let footprint = registry.get(&keys[0]).unwrap().memory_footprint();
    println!(
        "20 000 keyed breakers (10 s / 10-bucket windows): {:.1} MiB live, {:.0} B per keyed \
         breaker (breaker alone reports {footprint} B), peak {:.1} MiB",
        bytes / MIB,
        per_breaker,
        measured.bytes_max as f64 / MIB
    );
    assert!(bytes <= 40.0 * MIB, "{:.1} MiB", bytes / MIB);
    // A registry-level subscriber adds one forwarding subscription to each
    // breaker (reported, not bounded: the goal is about the breakers).
    let forwarders = allocation_counter::measure(|| registry.subscribe(|_, _| {}).detach());
    println!(
        "with a registry-level subscriber: +{:.0} B per breaker, {:.1} MiB in all",
        forwarders.bytes_current as f64 / 20_000.0,
        (bytes + forwarders.bytes_current as f64) / MIB
    );
    assert!(
        measured.bytes_max as f64 <= 40.0 * MIB,
        "peak {:.1} MiB",
        measured.bytes_max as f64 / MIB
    );
}

/// Issue 19's goal: a keyed breaker with a count-100 window costs at most
/// 512 bytes, its registry entry and name included — a million in
/// 512 MiB. Counted here in bytes asked of the allocator (what it really
/// hands out, headers and all, is measured by
/// `benches/examples/keyed_million.rs`: 510 bytes a breaker on glibc).
#[test]
fn a_million_keyed_count_window_breakers_fit_in_512_mib() {
    const KEYS: u32 = 1_000_000;
    let registry = BreakerRegistry::<u32>::builder(RegistryConfig {
        max_breakers: KEYS as usize,
        ..Default::default()
    })
    .clock(ManualClock::new())
    .build()
    .unwrap();
    assert!(matches!(
        registry.get(&0).unwrap().config().window,
        WindowConfig::Count { size: 100 }
    ));
    let measured = allocation_counter::measure(|| {
        for key in 1..KEYS {
            let b = registry.get(&key).unwrap();
            let _ = b.call(|| Ok::<_, ()>(()));
        }
    });
    let per_breaker = measured.bytes_current as f64 / f64::from(KEYS - 1);
    println!(
        "a million keyed count-100 breakers: {per_breaker:.0} B each, {:.1} MiB",
        per_breaker * f64::from(KEYS) / MIB
    );
    assert!(per_breaker <= 512.0, "{per_breaker:.0} B a keyed breaker");
}

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
    let mut baseline = None;
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
                if baseline.is_none() {
                    baseline = Some(registry.stats());
                }
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
    // breakers, ~1.5 KiB each with their map entries), not a million.
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
