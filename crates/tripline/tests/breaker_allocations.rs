//! The hot paths allocate nothing: a counting global allocator
//! (`allocation-counter`) watches a
//! burst of calls on the closed path (both windows), the rejected path and
//! the half-open path.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

/// Heap allocations made by this thread while `f` runs.
fn allocations_during(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

fn breaker(window: WindowConfig, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window,
            minimum_calls: 1_000_000,
            slow_call_duration: Some(Duration::from_millis(50)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn hot_paths_do_not_allocate() {
    assert_eq!(
        allocations_during(|| drop(std::hint::black_box(Box::new(1)))),
        1,
        "the counter sees allocations"
    );
    let clock = ManualClock::new();
    for window in [
        WindowConfig::Count { size: 100 },
        WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
    ] {
        let b = breaker(window, &clock);
        let _ = b.call(|| Ok::<_, ()>(())); // first touch of thread-locals
        let n = allocations_during(|| {
            for i in 0..10_000u32 {
                clock.advance(Duration::from_millis(3));
                let r = b.call(|| if i % 7 == 0 { Err(i) } else { Ok(i) });
                std::hint::black_box(&r);
                let p = b.try_acquire().unwrap();
                p.record(Outcome::Success, Duration::from_millis(u64::from(i % 100)));
            }
        });
        assert_eq!(n, 0, "closed path allocated {n} times with {window:?}");

        b.open_for(Duration::from_secs(3600));
        let n = allocations_during(|| {
            for _ in 0..10_000 {
                std::hint::black_box(b.try_acquire().unwrap_err());
            }
        });
        assert_eq!(n, 0, "rejected path allocated {n} times");
    }

    // Half-open probes, no subscribers (events are built only on transitions).
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 1,
            half_open: tripline::HalfOpenPolicy::Permits {
                calls: 10_000,
                failure_rate_threshold: 1.0,
            },
            max_half_open_duration: None,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = b.call(|| Err::<(), _>(()));
    clock.advance(Duration::from_secs(5));
    drop(b.try_acquire().unwrap()); // enters half-open (emits an event)
    let n = allocations_during(|| {
        for _ in 0..1_000 {
            let p = b.try_acquire().unwrap();
            assert!(p.is_probe());
            drop(p);
        }
    });
    assert_eq!(n, 0, "half-open path allocated {n} times");
}

/// The breaker's memory goal: one breaker with a 100-call count window or a
/// 10-bucket time window in at most 2 KiB, everything it allocates counted.
#[test]
fn one_breaker_fits_in_two_kib() {
    for window in [
        WindowConfig::Count { size: 100 },
        WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
    ] {
        let clock = ManualClock::new();
        let mut breaker = None;
        let info = allocation_counter::measure(|| {
            breaker = Some(
                CircuitBreaker::builder()
                    .config(CircuitBreakerConfig {
                        window,
                        ..Default::default()
                    })
                    .clock(clock.clone())
                    .build()
                    .unwrap(),
            );
        });
        let b = breaker.unwrap();
        let bytes = info.bytes_current;
        println!(
            "{window:?}: {bytes} bytes allocated, footprint {} bytes",
            b.memory_footprint()
        );
        assert!(bytes <= 2048, "{window:?}: {bytes} bytes");
        assert!(b.memory_footprint() <= 2048);
    }
}
