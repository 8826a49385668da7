//! The tower readiness contract, for every layer: calling without
//! `poll_ready` fails with an instructive error, a clone starts un-ready
//! and does not share a reserved permit, dropping a response future
//! releases its permit and half-open slot, and cancellation is neutral.
#![cfg(all(feature = "tower", feature = "tokio"))]
// Test helpers outside #[test] fns too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::fallback::{Fallback, FallbackValue};
use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
use tripline::pipeline::Pipeline;
use tripline::retry::{Retry, RetryBackoff, RetryConfig};
use tripline::timeout::TokioTimer;
use tripline::tower::{
    BoxError, BulkheadLayer, CircuitBreakerLayer, DeadlineLayer, FallbackLayer, HedgeLayer,
    NotReady, PipelineLayer, RetryLayer, TimeoutLayer,
};
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Rejected, State};

/// Requests the mock service understands: 0 never answers.
trait Probe: Clone + Send + 'static {
    fn make(n: u32) -> Self;
    fn value(&self) -> u32;
}

impl Probe for u32 {
    fn make(n: u32) -> Self {
        n
    }
    fn value(&self) -> u32 {
        *self
    }
}

impl Probe for http::Request<u32> {
    fn make(n: u32) -> Self {
        http::Request::new(n)
    }
    fn value(&self) -> u32 {
        *self.body()
    }
}

async fn answer<R: Probe>(req: R) -> Result<u32, Infallible> {
    if req.value() == 0 {
        std::future::pending::<()>().await;
    }
    Ok(req.value())
}

struct World {
    breaker: CircuitBreaker,
    bulkhead: Bulkhead,
}

fn world() -> World {
    World {
        breaker: CircuitBreaker::builder()
            .config(CircuitBreakerConfig {
                half_open: HalfOpenPolicy::Consecutive { successes: 1 },
                ..Default::default()
            })
            .clock(TokioTimer.clock())
            .build()
            .expect("valid config"),
        bulkhead: Bulkhead::try_new(BulkheadConfig {
            max_concurrent: 1,
            ..Default::default()
        })
        .expect("valid config"),
    }
}

/// Polls `fut` once: `None` if it is pending.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *fut).poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

async fn half_open(w: &World) {
    w.breaker.open_for(Duration::from_millis(1));
    tokio::time::advance(Duration::from_millis(2)).await;
}

/// The contract, for a service whose breaker and bulkhead are `w`'s.
async fn contract<S, R>(name: &str, mut svc: S, w: &World)
where
    R: Probe,
    S: Service<R, Error = BoxError> + Clone,
    S::Response: Debug,
    S::Future: Unpin,
{
    // 1. call without poll_ready: an instructive error, the policy not skipped.
    let e = svc.call(R::make(1)).await.unwrap_err();
    let not_ready = e
        .downcast_ref::<NotReady>()
        .unwrap_or_else(|| panic!("{name}: {e}"));
    assert!(e.to_string().contains("poll_ready"), "{name}: {e}");
    assert!(!not_ready.layer.is_empty());

    // 2. a clone starts un-ready; the original keeps its readiness.
    svc.ready().await.unwrap();
    let mut clone = svc.clone();
    let e = clone.call(R::make(1)).await.unwrap_err();
    assert!(e.is::<NotReady>(), "{name}: clone was ready: {e}");
    assert!(svc.call(R::make(1)).await.is_ok(), "{name}");

    // 3. dropping a response future releases the bulkhead slot and the
    //    half-open probe slot, and 4. the cancellation is neutral.
    half_open(w).await;
    let cancelled = w.breaker.metrics().calls.cancelled;
    svc.ready().await.unwrap();
    let mut fut = svc.call(R::make(0));
    assert!(
        poll_once(&mut fut).await.is_none(),
        "{name}: the mock never answers 0"
    );
    assert_eq!(
        w.bulkhead.stats().in_flight,
        1,
        "{name}: the call is in flight"
    );
    assert_eq!(
        w.breaker.metrics().probes_in_flight,
        1,
        "{name}: as the probe"
    );
    drop(fut);
    assert_eq!(w.bulkhead.stats().in_flight, 0, "{name}: slot released");
    let m = w.breaker.metrics();
    assert_eq!(m.probes_in_flight, 0, "{name}: probe slot released");
    assert_eq!(
        m.calls.cancelled,
        cancelled + 1,
        "{name}: counted as cancelled"
    );
    assert_eq!(
        (m.calls.probes_failed, m.state),
        (0, State::HalfOpen),
        "{name}: neutral"
    );
    // The freed probe slot admits the next call, whose success closes the breaker.
    svc.ready().await.unwrap();
    assert!(svc.call(R::make(7)).await.is_ok(), "{name}");
    assert_eq!(w.breaker.state(), State::Closed, "{name}");
}

/// The mock behind a breaker and a bulkhead (the state the contract watches).
fn guarded<R: Probe>(
    w: &World,
) -> impl Service<R, Response = u32, Error = BoxError, Future: Send> + Clone + Send + 'static {
    // Wrapped by every layer under test, the retry layer included (a
    // harmful order, allowed here: this test is about the tower contract).
    ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(w.breaker.clone()).allow_harmful_order())
        .layer(BulkheadLayer::new(w.bulkhead.clone(), None))
        .service_fn(answer::<R>)
}

fn boxed<S, R>(svc: S) -> tower::util::BoxCloneService<R, <S as Service<R>>::Response, BoxError>
where
    S: Service<R, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    tower::util::BoxCloneService::new(svc)
}

fn retry() -> Retry {
    Retry::builder()
        .config(RetryConfig {
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .timer(Arc::new(TokioTimer))
        .build()
        .expect("valid config")
}

#[tokio::test(start_paused = true)]
async fn every_layer_keeps_the_contract() {
    let w = world();
    contract("circuit_breaker+bulkhead", boxed(guarded::<u32>(&w)), &w).await;

    let w = world();
    let s =
        TimeoutLayer::new(Duration::from_secs(60), Arc::new(TokioTimer)).layer(guarded::<u32>(&w));
    contract("timeout", boxed(s), &w).await;

    let w = world();
    contract(
        "retry",
        boxed(RetryLayer::new(retry()).layer(guarded::<u32>(&w))),
        &w,
    )
    .await;

    let w = world();
    let hedge = Hedge::builder()
        .config(HedgeConfig {
            delay: HedgeDelay::Fixed {
                delay: Duration::from_secs(3600),
            },
            ..Default::default()
        })
        .timer(Arc::new(TokioTimer))
        .clock(TokioTimer.clock())
        .build()
        .expect("valid config");
    contract(
        "hedge",
        boxed(HedgeLayer::new(hedge).layer(guarded::<u32>(&w))),
        &w,
    )
    .await;

    let w = world();
    let fb = Fallback::builder()
        .on_failure(FallbackValue::Static(0u32))
        .build()
        .expect("valid config");
    contract(
        "fallback",
        boxed(FallbackLayer::new(fb).layer(guarded::<u32>(&w))),
        &w,
    )
    .await;

    let w = world();
    let deadline = DeadlineLayer::new(TokioTimer.clock(), Some(Arc::new(TokioTimer)));
    contract(
        "deadline",
        boxed(deadline.layer(guarded::<http::Request<u32>>(&w))),
        &w,
    )
    .await;

    // The pipeline holds the breaker and the bulkhead itself.
    let w = world();
    let pipeline = Pipeline::builder()
        .circuit_breaker(w.breaker.clone())
        .bulkhead(w.bulkhead.clone())
        .retry(RetryConfig::default())
        .clock(TokioTimer.clock())
        .build()
        .expect("valid config");
    let s = PipelineLayer::new(pipeline).layer(
        ServiceBuilder::new()
            .map_err(|e: Infallible| -> BoxError { match e {} })
            .service_fn(answer::<u32>),
    );
    contract("pipeline", boxed(s), &w).await;
}

#[tokio::test(start_paused = true)]
async fn a_breaker_clone_does_not_share_the_reserved_probe_slot() {
    let w = world();
    half_open(&w).await;
    let mut svc =
        CircuitBreakerLayer::new(w.breaker.clone()).layer(tower::service_fn(answer::<u32>));
    svc.ready().await.unwrap(); // reserves the only probe slot
    let mut clone = svc.clone();
    clone.ready().await.unwrap();
    let e = clone.call(1).await.unwrap_err();
    let open = e.downcast_ref::<Rejected>().expect("the clone was refused");
    assert_eq!(open.state(), State::HalfOpen);
    assert_eq!(svc.call(1).await.unwrap(), 1);
    assert_eq!(w.breaker.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_ready_service_dropped_unused_releases_its_reservations() {
    let w = world();
    half_open(&w).await;
    let mut svc = guarded::<u32>(&w);
    svc.ready().await.unwrap();
    assert_eq!(w.breaker.metrics().probes_in_flight, 1);
    assert_eq!(w.bulkhead.stats().in_flight, 1);
    drop(svc);
    assert_eq!(w.breaker.metrics().probes_in_flight, 0);
    assert_eq!(w.bulkhead.stats().in_flight, 0);
    assert_eq!(w.breaker.state(), State::HalfOpen, "neutral");
}

/// The same contract, and the same release of an unused reservation, for
/// a layer over a `'static` breaker, whose response futures borrow it
/// instead of each holding a counted handle.
#[tokio::test(start_paused = true)]
async fn a_layer_over_a_static_breaker_keeps_the_contract() {
    let w = world();
    let breaker: &'static CircuitBreaker = Box::leak(Box::new(w.breaker.clone()));
    let guarded = || {
        ServiceBuilder::new()
            .layer(CircuitBreakerLayer::from_static(breaker).allow_harmful_order())
            .layer(BulkheadLayer::new(w.bulkhead.clone(), None))
            .service_fn(answer::<u32>)
    };
    contract("circuit_breaker(static)+bulkhead", boxed(guarded()), &w).await;

    half_open(&w).await;
    let mut svc = guarded();
    svc.ready().await.unwrap();
    assert_eq!(w.breaker.metrics().probes_in_flight, 1);
    drop(svc);
    assert_eq!(w.breaker.metrics().probes_in_flight, 0);
    assert_eq!(w.breaker.state(), State::HalfOpen, "neutral");
    // A failure is recorded through the borrowed breaker too.
    let mut failing = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::from_static(breaker))
        .service_fn(|_: u32| async { Err::<u32, _>(std::io::Error::other("down")) });
    failing.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(w.breaker.state(), State::Open, "the probe failed");
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_clone_does_not_share_the_reserved_slot() {
    let w = world();
    let mut svc =
        BulkheadLayer::new(w.bulkhead.clone(), None).layer(tower::service_fn(answer::<u32>));
    svc.ready().await.unwrap();
    let mut clone = svc.clone();
    clone.ready().await.unwrap();
    let e = clone.call(1).await.unwrap_err();
    assert!(e.is::<tripline::tower::BulkheadFull>(), "{e}");
    assert_eq!(svc.call(1).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn bulkhead_rejections_inside_the_breaker_do_not_trip_it() {
    let w = world();
    let mut svc = guarded::<u32>(&w);
    let _held = w.bulkhead.try_acquire_owned().unwrap();
    for _ in 0..50 {
        let e = svc.ready().await.unwrap().call(1).await.unwrap_err();
        assert!(e.is::<tripline::tower::BulkheadFull>());
    }
    assert_eq!(w.breaker.state(), State::Closed);
    assert_eq!(w.breaker.window().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_layer_with_a_timer_queues_then_rejects() {
    let bulkhead = Bulkhead::try_new(BulkheadConfig {
        max_concurrent: 1,
        max_queue: 1,
        max_wait: Duration::from_millis(30),
    })
    .unwrap();
    let mut svc = BulkheadLayer::new(bulkhead.clone(), Some(Arc::new(TokioTimer)))
        .layer(tower::service_fn(answer::<u32>));
    let _held = bulkhead.try_acquire_owned().unwrap();
    let start = tokio::time::Instant::now();
    let e = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(
        e.downcast_ref::<tripline::tower::BulkheadFull>()
            .unwrap()
            .queued
    );
    assert_eq!(start.elapsed(), Duration::from_millis(30));
}
