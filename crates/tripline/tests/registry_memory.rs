//! Memory of keyed breakers: 20 000 breakers — 50
//! services × 20 methods × 20 instances — with 10-bucket time windows fit
//! in 40 MiB, and a million with the default 100-call count window in
//! 512 MiB. (The churn of a million keys is in `registry_churn.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::fmt;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
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

/// The keyed breakers' memory goal: a keyed breaker with a count-100 window costs at most
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
