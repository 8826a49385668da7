//! The sync success path of the full pipeline allocates nothing: counted
//! by a global allocator of this test binary.
//!
//! The binary runs without libtest's harness (`harness = false`): the
//! harness's own thread allocates while it waits for a test, and a global
//! counter cannot tell its allocations from ours.

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::clock::ManualClock;
use tripline::pipeline::Pipeline;
use tripline::retry::RetryConfig;
use tripline::timeout::{Deadline, TimeoutConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig};

/// Counts every allocation of this test binary (the crate forbids unsafe
/// code, so the counting allocator comes from `stats_alloc`).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ITERS: u32 = 10_000;

fn main() {
    the_sync_success_path_does_not_allocate();
    println!("pipeline_alloc: 1 passed, 0 failed");
}

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
    let region = Region::new(GLOBAL);
    let mut sum = 0;
    for i in 0..ITERS {
        clock.advance(Duration::from_micros(50));
        sum += upstream
            .scope(|| p.call(|a| Ok::<_, ()>(a.number() + i % 2)))
            .expect("success path");
    }
    let change = region.change();
    assert!(sum > 0);
    assert_eq!(change.allocations, 0, "allocations on the success path");
    assert_eq!(change.reallocations, 0);
}
