//! The cluster's call path — selection, breaker admission, the attempt,
//! recording on the breaker and the outlier detector, failover to another
//! endpoint — allocates nothing: counted per thread by
//! `allocation-counter`'s global allocator.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, Failfast, Failover, FailoverConfig};
use tripline::outlier::{ConsecutiveConfig, OutlierConfig};
use tripline::{CircuitBreakerConfig, WindowConfig};

const ITERS: u32 = 10_000;

fn cluster(balancer: Balancer, clock: &ManualClock) -> Cluster {
    Cluster::builder()
        .balancer(balancer)
        .endpoints(
            (0..50).map(|i| {
                EndpointConfig::new(format!("e{i}"), format!("e{i}:80")).weight(1 + i % 3)
            }),
        )
        // Breakers that sample every call but never trip (a transition
        // emits an event: a cold path that allocates).
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 30_000 },
            minimum_calls: 30_000,
            ..Default::default()
        })
        // Outlier detection records every call; no streak is long enough
        // to eject (an ejection emits an event: a cold path that allocates).
        .outlier(OutlierConfig {
            consecutive_failures: Some(ConsecutiveConfig {
                threshold: 1_000_000,
                enforcing_percent: 100,
            }),
            ..Default::default()
        })
        .clock(clock.clone())
        .seed(3)
        .build()
        .unwrap()
}

#[test]
fn selection_admission_and_recording_do_not_allocate() {
    for balancer in [
        Balancer::RoundRobin,
        Balancer::WeightedRandom,
        Balancer::LeastOutstanding,
        Balancer::PowerOfTwoChoices,
        Balancer::WeightedRoundRobin,
    ] {
        let clock = ManualClock::new();
        let c = cluster(balancer, &clock);
        let failfast = Failfast::new(c.clone());
        let failover = Failover::try_new(
            c,
            FailoverConfig {
                retries: 2,
                ..Default::default()
            },
        )
        .unwrap();
        for _ in 0..10 {
            failfast.call(|_, _| Ok::<_, ()>(1)).unwrap();
        }
        let mut sum = 0u64;
        let counted = allocation_counter::measure(|| {
            for i in 0..ITERS {
                // Below the analysis interval: the lazy pass is not due.
                clock.advance(Duration::from_micros(50));
                sum += failfast
                    .call(|_, a| Ok::<_, ()>(u64::from(a.number())))
                    .unwrap();
                // One failover per call: the first attempt fails.
                sum += failover
                    .call(|_, a| {
                        if a.number() == 1 && i % 2 == 0 {
                            Err(())
                        } else {
                            Ok(1)
                        }
                    })
                    .unwrap();
            }
        });
        assert_eq!(sum, 2 * u64::from(ITERS));
        assert_eq!(
            counted.count_total, 0,
            "allocations on the call path ({balancer:?})"
        );
    }
}
