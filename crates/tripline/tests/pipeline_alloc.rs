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

/// Every stage on: `breaker`, retry with a budget, a bulkhead, attempt and
/// overall timeouts, on `clock`.
fn full_pipeline(breaker: CircuitBreaker, clock: &ManualClock) -> Pipeline {
    Pipeline::builder()
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
        .expect("valid config")
}

#[test]
fn the_sync_success_path_does_not_allocate() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(clock.clone())
        .build()
        .expect("success path");
    let p = full_pipeline(breaker, &clock);
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

/// The same pipeline as a tower layer, and the breaker layer alone: one
/// `poll_ready` + `call` + poll of a response that is ready at once
/// allocates nothing (the response futures are nameable, not boxed, and
/// hold their permit and slot without a reference count of their own).
#[cfg(feature = "tower")]
#[test]
fn the_tower_layers_success_path_does_not_allocate() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use tower::{Layer, Service};
    use tripline::tower::{CircuitBreakerLayer, PipelineLayer};

    fn call_once<S: Service<u32>>(svc: &mut S) -> S::Response
    where
        S::Error: std::fmt::Debug,
    {
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        match std::pin::pin!(svc.call(1)).poll(&mut cx) {
            Poll::Ready(r) => r.expect("success path"),
            Poll::Pending => panic!("the echo answers at once"),
        }
    }

    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(clock.clone())
        .build()
        .expect("valid config");
    let p = full_pipeline(breaker.clone(), &clock);
    let echo = || tower::service_fn(|x: u32| std::future::ready(Ok::<_, std::io::Error>(x)));
    let mut pipeline = PipelineLayer::new(p).layer(echo());
    let mut guarded = CircuitBreakerLayer::new(breaker.clone()).layer(echo());
    for _ in 0..10 {
        call_once(&mut pipeline);
        call_once(&mut guarded);
    }
    let mut sum = 0;
    let counted = allocation_counter::measure(|| {
        for _ in 0..ITERS {
            clock.advance(Duration::from_micros(50));
            sum += call_once(&mut pipeline) + call_once(&mut guarded);
        }
    });
    assert_eq!(sum, 2 * ITERS);
    assert_eq!(counted.count_total, 0, "allocations on the success path");
    assert_eq!(
        breaker.metrics().calls.successful,
        u64::from(2 * ITERS + 20)
    );
}
