//! tower layers and full pipelines on the success path, around a service
//! that answers at once; futures polled by hand inside the tokio runtime's
//! context (timers need one; no executor runs).

use std::future::{Ready, ready};
use std::time::Duration;

use tower::Layer as _;
use tower::util::ServiceFn;
use tripline::clock::SharedClock;
use tripline::pipeline::Pipeline;
use tripline::tower::{CircuitBreakerLayer, PipelineLayer};

use super::{Case, Factory, case, shared, shared_rt};
use crate::{BenchError, Reply, op, runtime, tower_call, value};

pub(super) fn tower_cases() -> Vec<Case> {
    vec![
        case("tower", "bare", bare),
        case("tower", "tripline", tripline_layer),
        case("tower", "tripline_static", tripline_static_layer),
        case("tower", "tower_resilience", tower_resilience_layer),
        case("tower", "seatbelt", seatbelt_layer),
    ]
}

pub(super) fn pipeline_cases() -> Vec<Case> {
    vec![
        case("pipeline", "bare_sync", bare_sync),
        case("pipeline", "tripline_sync", tripline_sync),
        case("pipeline", "bare", bare),
        case("pipeline", "tripline_layer", tripline_pipeline_layer),
        case("pipeline", "tower_resilience", tower_resilience_stack),
        case("pipeline", "seatbelt", seatbelt_stack),
    ]
}

/// The protected service: answers at once with the operation's reply.
pub(crate) type Echo = ServiceFn<fn(u64) -> Ready<Reply>>;

pub(crate) fn echo() -> Echo {
    fn call(_: u64) -> Ready<Reply> {
        ready(op()())
    }
    tower::service_fn(call as fn(u64) -> Ready<Reply>)
}

fn bare(work: bool) -> Factory {
    shared_rt(echo(), work, |s| value(tower_call(s)))
}

/// `tripline::tower::CircuitBreakerLayer` with tripline's defaults.
fn tripline_layer(work: bool) -> Factory {
    let svc = CircuitBreakerLayer::new(super::closed::tripline_default()).layer(echo());
    shared_rt(svc, work, |s| value(tower_call(s)))
}

/// The same layer over a breaker that lives as long as the program
/// (`CircuitBreakerLayer::from_static`): no reference count per call.
fn tripline_static_layer(work: bool) -> Factory {
    let breaker: &'static tripline::CircuitBreaker =
        Box::leak(Box::new(super::closed::tripline_default()));
    let svc = CircuitBreakerLayer::from_static(breaker).layer(echo());
    shared_rt(svc, work, |s| value(tower_call(s)))
}

pub(super) fn tower_resilience_breaker() -> tower_resilience_circuitbreaker::CircuitBreakerLayer {
    tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .minimum_number_of_calls(20)
        .wait_duration_in_open(Duration::from_secs(5))
        .permitted_calls_in_half_open(5)
        .build()
        .expect("valid config")
}

/// tower-resilience's breaker: 100-call count window, 20 minimum, 50 %,
/// 5 s open, 5 probes.
fn tower_resilience_layer(work: bool) -> Factory {
    let _rt = runtime().enter();
    let svc = tower_resilience_breaker().layer(echo());
    shared_rt(svc, work, |s| value(tower_call(s)))
}

/// One seatbelt context (its tick clock spawns a driver task on the
/// runtime), shared by every seatbelt breaker the suite builds.
fn seatbelt_context() -> &'static seatbelt::ResilienceContext<u64, Reply> {
    static CTX: std::sync::OnceLock<seatbelt::ResilienceContext<u64, Reply>> =
        std::sync::OnceLock::new();
    CTX.get_or_init(|| {
        let _rt = runtime().enter();
        seatbelt::ResilienceContext::new(tick::Clock::new_tokio())
    })
}

/// seatbelt's breaker around `inner`: 50 %, 20 minimum, 10 s sampling, 5 s
/// break, tick's tokio clock.
fn seatbelt_breaker<S>(
    ctx: &seatbelt::ResilienceContext<u64, Reply>,
    inner: S,
) -> seatbelt::breaker::Breaker<u64, Reply, S> {
    seatbelt_breaker!(ctx, Duration::from_secs(5)).layer(inner)
}

/// One seatbelt breaker around the echo service.
pub(super) fn seatbelt_service() -> seatbelt::breaker::Breaker<u64, Reply, Echo> {
    seatbelt_breaker(seatbelt_context(), echo())
}

/// seatbelt's breaker as a tower layer (`tower-service` feature).
fn seatbelt_layer(work: bool) -> Factory {
    shared_rt(seatbelt_service(), work, |s| value(tower_call(s)))
}

/// tripline's full pipeline on the production clock
/// ([`full_pipeline`](crate::full_pipeline)).
fn full_pipeline() -> Pipeline {
    crate::full_pipeline(SharedClock::monotonic())
}

fn bare_sync(work: bool) -> Factory {
    shared((), work, |_| value(op()()))
}

/// The sync `Pipeline::call`.
fn tripline_sync(work: bool) -> Factory {
    shared(full_pipeline(), work, |p| value(p.call(|_| op()())))
}

/// The same pipeline as a `PipelineLayer` (async: a nameable response future).
fn tripline_pipeline_layer(work: bool) -> Factory {
    let svc = PipelineLayer::new(full_pipeline()).layer(echo());
    shared_rt(svc, work, |s| value(tower_call(s)))
}

/// tower-resilience, outermost first: time limiter 1 s, retry (3 attempts,
/// exponential from 50 ms, token-bucket budget 10/s up to 100), breaker
/// (as in `tower`), bulkhead (25 concurrent, reject when full), time
/// limiter 100 ms.
fn tower_resilience_stack(work: bool) -> Factory {
    let _rt = runtime().enter();
    let budget = tower_resilience_retry::RetryBudgetBuilder::new()
        .token_bucket()
        .tokens_per_second(10.0)
        .max_tokens(100)
        .build()
        .expect("valid budget");
    let retry = tower_resilience_retry::RetryLayer::builder()
        .max_attempts(3)
        .exponential_backoff(Duration::from_millis(50))
        .budget(budget)
        .build();
    let bulkhead = tower_resilience_bulkhead::BulkheadLayer::builder()
        .max_concurrent_calls(25)
        .reject_when_full()
        .build()
        .expect("valid config");
    let attempt = tower_resilience_timelimiter::TimeLimiterLayer::builder()
        .timeout_duration(Duration::from_millis(100))
        .build();
    let overall = tower_resilience_timelimiter::TimeLimiterLayer::builder()
        .timeout_duration(Duration::from_secs(1))
        .build();
    let svc = overall.layer(
        retry.layer(tower_resilience_breaker().layer(bulkhead.layer(attempt.layer(echo())))),
    );
    shared_rt(svc, work, |s| value(tower_call(s)))
}

/// seatbelt, outermost first: timeout 1 s, retry (3 attempts, its default
/// exponential backoff with jitter), breaker (as in `tower`), timeout
/// 100 ms. seatbelt has no bulkhead.
fn seatbelt_stack(work: bool) -> Factory {
    let ctx = seatbelt_context();
    let overall = seatbelt::timeout::Timeout::layer("overall", ctx)
        .timeout_error(|_| BenchError)
        .timeout(Duration::from_secs(1));
    let retry = seatbelt::retry::Retry::layer("retry", ctx)
        .clone_input()
        .recovery_with(|r: &Reply, _| {
            if r.is_ok() {
                seatbelt::RecoveryInfo::never()
            } else {
                seatbelt::RecoveryInfo::retry()
            }
        })
        .max_retry_attempts(2);
    let attempt = seatbelt::timeout::Timeout::layer("attempt", ctx)
        .timeout_error(|_| BenchError)
        .timeout(Duration::from_millis(100));
    let svc = overall.layer(retry.layer(seatbelt_breaker(ctx, attempt.layer(echo()))));
    shared_rt(svc, work, |s| value(tower_call(s)))
}
