//! No config value and no sequence of operations panics a keyed registry
//! or an adaptive throttle: hostile values are refused with an error or
//! built; built ones survive lookups, calls, removals, evictions, family
//! reconfigurations, snapshot round trips and clock jumps of any size, and
//! keep their bounds (at most `max_breakers` live breakers; a rejection
//! probability within `[0, max_rejection_probability]`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, ThrottleWindow};
use tripline::{CircuitBreakerConfig, Outcome, WindowConfig};

fn jump() -> impl Strategy<Value = Duration> {
    prop_oneof![
        8 => (0..30_000u64).prop_map(Duration::from_millis),
        1 => Just(Duration::from_secs(u64::MAX / 4)),
        1 => Just(Duration::MAX),
    ]
}

#[derive(Clone, Debug)]
enum RegistryOp {
    Call(u8, bool),
    Remove(u8),
    Evict,
    Advance(Duration),
    Reconfigure(u32, f64),
    SnapshotRoundTrip,
}

fn registry_op() -> impl Strategy<Value = RegistryOp> {
    prop_oneof![
        20 => (0..40u8, any::<bool>()).prop_map(|(k, ok)| RegistryOp::Call(k, ok)),
        2 => (0..40u8).prop_map(RegistryOp::Remove),
        2 => Just(RegistryOp::Evict),
        4 => jump().prop_map(RegistryOp::Advance),
        1 => (prop_oneof![0..50u32, Just(u32::MAX)], prop_oneof![0.0..1.5f64, Just(f64::NAN)])
            .prop_map(|(m, f)| RegistryOp::Reconfigure(m, f)),
        1 => Just(RegistryOp::SnapshotRoundTrip),
    ]
}

#[derive(Clone, Debug)]
enum ThrottleOp {
    Request(u8),
    Advance(Duration),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_registry_config_and_no_operation_sequence_panics(
        max_breakers in prop_oneof![0..12usize, Just(usize::MAX)],
        reject in any::<bool>(),
        idle_ttl in prop::option::of(prop_oneof![jump(), Just(Duration::ZERO)]),
        ops in prop::collection::vec(registry_op(), 0..150),
    ) {
        let clock = ManualClock::new();
        let built = BreakerRegistry::<u8>::builder(RegistryConfig {
            max_breakers,
            overflow: if reject { OverflowPolicy::Reject } else { OverflowPolicy::SharedOverflow },
            idle_ttl,
            breaker: CircuitBreakerConfig {
                window: WindowConfig::Count { size: 10 },
                minimum_calls: 3,
                ..Default::default()
            },
        })
        .clock(clock.clone())
        .build();
        let Ok(registry) = built else {
            return Ok(());
        };
        for op in &ops {
            match op {
                RegistryOp::Call(k, ok) => {
                    if let Ok(b) = registry.get(k)
                        && let Ok(p) = b.try_acquire()
                    {
                        let outcome = if *ok { Outcome::Success } else { Outcome::Failure };
                        p.record(outcome, Duration::ZERO);
                    }
                }
                RegistryOp::Remove(k) => {
                    registry.remove(k);
                }
                RegistryOp::Evict => {
                    registry.evict_idle();
                }
                RegistryOp::Advance(d) => {
                    clock.advance(*d);
                }
                RegistryOp::Reconfigure(minimum_calls, threshold) => {
                    let before = registry.family_config();
                    let next = CircuitBreakerConfig {
                        minimum_calls: *minimum_calls,
                        failure_rate_threshold: *threshold,
                        ..before.clone()
                    };
                    if registry.reconfigure_family(next).is_err() {
                        prop_assert_eq!(registry.family_config(), before);
                    }
                }
                RegistryOp::SnapshotRoundTrip => {
                    for (k, snap) in registry.snapshot() {
                        let _ = registry.restore(&k, &snap);
                    }
                }
            }
            prop_assert!(registry.len() <= max_breakers, "{} live", registry.len());
        }
    }

    #[test]
    fn no_throttle_config_and_no_request_sequence_panics(
        length in prop_oneof![(0..120_000u64).prop_map(Duration::from_millis), Just(Duration::MAX)],
        buckets in prop_oneof![0..130u32, Just(u32::MAX)],
        k in prop_oneof![0.0..4.0f64, Just(f64::NAN), Just(f64::INFINITY), Just(-1.0)],
        cap in prop_oneof![0.0..1.2f64, Just(f64::NAN)],
        minimum in prop_oneof![0.0..50.0f64, Just(f64::INFINITY), Just(-1.0)],
        ops in prop::collection::vec(
            prop_oneof![
                10 => (0..3u8).prop_map(ThrottleOp::Request),
                2 => jump().prop_map(ThrottleOp::Advance),
            ],
            0..300,
        ),
    ) {
        let clock = ManualClock::new();
        let built = AdaptiveThrottle::builder()
            .config(AdaptiveThrottleConfig {
                window: ThrottleWindow { length, buckets },
                k,
                max_rejection_probability: cap,
                minimum_requests_per_second: minimum,
                ..Default::default()
            })
            .clock(clock.clone())
            .seed(3)
            .build();
        let Ok(throttle) = built else {
            return Ok(());
        };
        for op in &ops {
            match op {
                ThrottleOp::Request(answer) => match throttle.try_acquire() {
                    Ok(permit) if *answer == 0 => permit.accepted(),
                    Ok(permit) if *answer == 1 => permit.rejected_by_backend(),
                    Ok(permit) => drop(permit),
                    Err(shed) => {
                        prop_assert!(shed.rejection_probability > 0.0);
                        prop_assert!(shed.rejection_probability <= cap);
                    }
                },
                ThrottleOp::Advance(d) => {
                    clock.advance(*d);
                }
            }
            let p = throttle.rejection_probability();
            prop_assert!((0.0..=cap).contains(&p), "p = {p}");
        }
    }
}
