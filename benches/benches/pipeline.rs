//! The policies' overhead on the success path: the full pipeline (sync and
//! as a tower layer) and `CircuitBreakerLayer` alone, each against the bare
//! call, with tower-resilience's circuit breaker layer in the same run.
//!
//! Futures are polled by hand with a no-op waker inside an entered tokio
//! runtime, so the figures are the layers' own cost, not an executor's.
//! Every inner call answers at once, as on the success path.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tower::{Layer, Service};
use tripline::clock::{ManualClock, SharedClock};
use tripline::tower::{CircuitBreakerLayer, PipelineLayer};
use tripline::{CircuitBreaker, CircuitBreakerConfig};
use tripline_benches::full_pipeline;

fn sync_pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_sync");
    g.bench_function("bare", |b| {
        b.iter(|| black_box(Ok::<u64, ()>(black_box(1))))
    });
    let manual = full_pipeline(ManualClock::new().into());
    g.bench_function("full_manual_clock", |b| {
        b.iter(|| black_box(manual.call(|_| Ok::<u64, ()>(black_box(1)))))
    });
    let mono = full_pipeline(SharedClock::monotonic());
    g.bench_function("full_monotonic_clock", |b| {
        b.iter(|| black_box(mono.call(|_| Ok::<u64, ()>(black_box(1)))))
    });
    g.finish();
}

/// Polls a future that must be ready at once.
#[inline]
fn now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(fut).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the success path never waits"),
    }
}

/// One tower call: poll_ready, call, poll the response.
#[inline]
fn tower_call<S: Service<u64>>(svc: &mut S) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => panic!("always ready"),
    }
    now(svc.call(black_box(1)))
}

/// The protected service: answers at once.
type Echo = tower::util::ServiceFn<fn(u64) -> std::future::Ready<Result<u64, std::io::Error>>>;

fn echo() -> Echo {
    tower::service_fn(|x| std::future::ready(Ok(x)))
}

fn tower_layers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _entered = rt.enter();
    let mut g = c.benchmark_group("tower");
    let mut bare = echo();
    g.bench_function("bare", |b| b.iter(|| black_box(tower_call(&mut bare))));

    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(ManualClock::new())
        .build()
        .expect("valid config");
    let mut cb = CircuitBreakerLayer::new(breaker).layer(echo());
    g.bench_function("tripline_circuit_breaker_layer", |b| {
        b.iter(|| black_box(tower_call(&mut cb)))
    });

    let mut peer = tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .build()
        .expect("valid config")
        .layer(echo());
    g.bench_function("tower_resilience_circuit_breaker_layer", |b| {
        b.iter(|| black_box(tower_call(&mut peer)))
    });

    let mut pipeline = PipelineLayer::new(full_pipeline(ManualClock::new().into())).layer(echo());
    g.bench_function("tripline_pipeline_layer", |b| {
        b.iter(|| black_box(tower_call(&mut pipeline)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = sync_pipeline, tower_layers
}
criterion_main!(benches);
