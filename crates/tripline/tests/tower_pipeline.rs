//! `PipelineLayer`'s response future through the paths the success-path
//! benchmark never takes: an attempt cut by its timer and retried after a
//! backoff on the timer, a wait in the bulkhead's queue, and the overall
//! deadline ending an attempt. All on tokio's paused clock.
#![cfg(all(feature = "tower", feature = "tokio"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::pipeline::Pipeline;
use tripline::retry::{RetryBackoff, RetryConfig};
use tripline::timeout::{DeadlineExceeded, TimeoutConfig, TokioTimer};
use tripline::tower::{BoxError, PipelineLayer};
use tripline::{CircuitBreaker, CircuitBreakerConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn breaker() -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(TokioTimer.clock())
        .build()
        .expect("valid config")
}

/// A service whose n-th call (from 1) answers as `script(n)` says: `None`
/// never answers, `Some(Ok)` answers at once.
fn scripted(
    calls: Arc<AtomicU32>,
    script: fn(u32) -> Option<Result<u32, &'static str>>,
) -> impl Service<u32, Response = u32, Error = BoxError, Future: Send> + Clone + Send + 'static {
    tower::service_fn(move |x: u32| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            match script(n) {
                Some(r) => r.map(|v| v + x).map_err(BoxError::from),
                None => std::future::pending().await,
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_after_a_backoff_on_the_timer() {
    let breaker = breaker();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::Constant { delay: ms(100) },
            retry_on_timeout: true,
            ..Default::default()
        })
        .timeouts(TimeoutConfig {
            per_attempt: Some(ms(50)),
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .timer(Arc::new(TokioTimer))
        .build()
        .expect("valid config");
    let calls = Arc::new(AtomicU32::new(0));
    // Hangs, then fails, then answers.
    let mut svc = PipelineLayer::new(pipeline).layer(scripted(calls.clone(), |n| match n {
        1 => None,
        2 => Some(Err("reset")),
        _ => Some(Ok(40)),
    }));
    let start = tokio::time::Instant::now();
    let v = svc.ready().await.unwrap().call(2).await.unwrap();
    assert_eq!(v, 42);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // 50 ms until the first attempt's timer fired, then two 100 ms backoffs.
    assert_eq!(start.elapsed(), ms(250));
    let m = breaker.metrics();
    assert_eq!(
        (m.calls.successful, m.calls.failed),
        (1, 0),
        "one logical call, its final outcome"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_waits_in_the_bulkhead_queue_and_frees_the_slot_when_done() {
    let bulkhead = Bulkhead::try_new(BulkheadConfig {
        max_concurrent: 1,
        max_queue: 1,
        max_wait: ms(1000),
    })
    .expect("valid config");
    let pipeline = Pipeline::builder()
        .bulkhead(bulkhead.clone())
        .clock(TokioTimer.clock())
        .timer(Arc::new(TokioTimer))
        .build()
        .expect("valid config");
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = PipelineLayer::new(pipeline).layer(scripted(calls.clone(), |_| Some(Ok(1))));
    let held = bulkhead.try_acquire_owned().unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(ms(200)).await;
        drop(held);
    });
    let start = tokio::time::Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(1).await.unwrap(), 2);
    assert_eq!(start.elapsed(), ms(200), "queued until the slot was freed");
    let stats = bulkhead.stats();
    assert_eq!((stats.in_flight, stats.waiting), (0, 0), "slot freed");
    assert_eq!(stats.rejected, 0);
}

#[tokio::test(start_paused = true)]
async fn the_overall_deadline_ends_a_hung_attempt_as_a_failure() {
    let breaker = breaker();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .timeouts(TimeoutConfig {
            overall: Some(ms(300)),
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .timer(Arc::new(TokioTimer))
        .build()
        .expect("valid config");
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = PipelineLayer::new(pipeline).layer(scripted(calls.clone(), |_| None));
    let start = tokio::time::Instant::now();
    let e = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(e.is::<DeadlineExceeded>(), "{e}");
    assert_eq!(start.elapsed(), ms(300));
    let m = breaker.metrics();
    assert_eq!((m.calls.failed, m.calls.cancelled), (1, 0));
}
