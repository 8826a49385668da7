//! The sync success path of the full pipeline allocates nothing: counted
//! per thread by `allocation-counter`'s global allocator.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::clock::ManualClock;
use tripline::pipeline::Pipeline;
use tripline::retry::RetryConfig;
use tripline::timeout::{Deadline, TimeoutConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig};

const ITERS: u32 = 10_000;

#[test]
fn the_sync_success_path_does_not_allocate() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(clock.clone())
        .build()
        .expect("success path");
    let p = Pipeline::builder()
        .circuit_breaker(breaker)
        .retry(RetryConfig::default())
        .budget(
            RetryBudget::with_clock(RetryBudgetConfig::default(), clock.clone())
                .expect("valid config"),
        )
        .bulkhead(Bulkhead::try_new(BulkheadConfig::default()).expect("valid config"))
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_millis(100)),
            overall: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .expect("success path");
    let upstream = Deadline::after(&clock, Duration::from_secs(5));
    // Warm up (thread-locals, lazily built statics).
    for _ in 0..10 {
        upstream
            .scope(|| p.call(|_| Ok::<_, ()>(1)))
            .expect("valid config");
    }
    let mut sum = 0;
    let counted = allocation_counter::measure(|| {
        for i in 0..ITERS {
            clock.advance(Duration::from_micros(50));
            sum += upstream
                .scope(|| p.call(|a| Ok::<_, ()>(a.number() + i % 2)))
                .expect("success path");
        }
    });
    assert!(sum > 0);
    assert_eq!(counted.count_total, 0, "allocations on the success path");
}
