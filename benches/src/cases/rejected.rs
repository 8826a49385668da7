//! Rejected path: each breaker is open (for an hour) before the
//! measurement starts, tripped through its own API; every constructor
//! checks that the breaker does reject.

use std::future::ready;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use failsafe::{backoff, failure_policy};
use layered::Service as _;
use tower::Layer as _;

use super::{Case, Factory, case, shared, shared_rt};
use crate::{BenchError, Reply, now, op, runtime, value};

const HOUR: Duration = Duration::from_secs(3600);

pub(super) fn cases() -> Vec<Case> {
    vec![
        case("rejected", "empty", empty),
        case("rejected", "tripline", tripline),
        case("rejected", "tripline_permit", tripline_permit),
        case("rejected", "recloser", recloser),
        case("rejected", "failsafe_default", failsafe_default),
        case("rejected", "failsafe_consecutive", failsafe_consecutive),
        case("rejected", "circuitbreaker_rs", circuitbreaker_rs),
        case("rejected", "seatbelt", seatbelt),
        case("rejected", "tower_resilience", tower_resilience),
    ]
}

fn fail() -> Reply {
    Err(BenchError)
}

/// The harness alone: an iteration that returns a constant. A rejection
/// calls nothing, so this — not a bare call — is its floor; the table
/// reports each library's time over it as well as the total.
fn empty(work: bool) -> Factory {
    shared((), work, |_| black_box(0))
}

/// tripline's defaults, opened by `open_for(1 h)`.
fn tripline(work: bool) -> Factory {
    let b = super::closed::tripline_default();
    b.open_for(HOUR);
    assert!(b.call(op()).is_err_and(|e| e.is_rejected()));
    shared(b, work, |b| value(b.call(op())))
}

/// The manual permit API on an open breaker: `try_acquire` refuses.
fn tripline_permit(work: bool) -> Factory {
    let b = super::closed::tripline_default();
    b.open_for(HOUR);
    assert!(b.try_acquire().is_err());
    shared(b, work, |b| match b.try_acquire() {
        Ok(_) => 1,
        Err(r) => u64::from(r.retry_after().is_some()),
    })
}

/// recloser with a 1-call ring and a 1 h wait, tripped by failures.
fn recloser(work: bool) -> Factory {
    let r = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(HOUR)
        .build();
    for _ in 0..4 {
        let _ = r.call(fail);
    }
    assert!(matches!(r.call(op()), Err(recloser::Error::Rejected)));
    shared(Arc::new(r), work, |r| value(r.call(op())))
}

fn trip_failsafe(cb: &impl failsafe::CircuitBreaker) {
    for _ in 0..10 {
        let _ = cb.call(fail);
    }
    assert!(matches!(cb.call(op()), Err(failsafe::Error::Rejected)));
}

/// failsafe's default policy shape (as in `closed`, with a 1 h backoff),
/// tripped by consecutive failures.
fn failsafe_default(work: bool) -> Factory {
    use failsafe::FailurePolicy as _;
    let policy = failure_policy::success_rate_over_time_window(
        0.5,
        20,
        Duration::from_secs(10),
        backoff::constant(HOUR),
    )
    .or_else(failure_policy::consecutive_failures(
        5,
        backoff::constant(HOUR),
    ));
    let cb = failsafe::Config::new().failure_policy(policy).build();
    trip_failsafe(&cb);
    shared(cb, work, |cb| {
        value(failsafe::CircuitBreaker::call(cb, op()))
    })
}

fn failsafe_consecutive(work: bool) -> Factory {
    let cb = failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(HOUR),
        ))
        .build();
    trip_failsafe(&cb);
    shared(cb, work, |cb| {
        value(failsafe::CircuitBreaker::call(cb, op()))
    })
}

/// circuitbreaker-rs with a 1 h cooldown, opened by `force_open`.
fn circuitbreaker_rs(work: bool) -> Factory {
    let cb =
        circuitbreaker_rs::CircuitBreaker::<circuitbreaker_rs::DefaultPolicy, BenchError>::builder(
        )
        .failure_threshold(0.5)
        .min_throughput(20)
        .cooldown(HOUR)
        .build();
    cb.force_open();
    assert!(matches!(
        cb.call(op()),
        Err(circuitbreaker_rs::BreakerError::Open)
    ));
    shared(Arc::new(cb), work, |cb| value(cb.call(op())))
}

/// seatbelt with a 1 h break, tripped by 100 failures (20 minimum).
fn seatbelt(work: bool) -> Factory {
    use layered::Stack as _;
    let _rt = runtime().enter();
    let clock = tick::Clock::new_tokio();
    let ctx = seatbelt::ResilienceContext::<bool, Reply>::new(&clock);
    fn call(fail: bool) -> std::future::Ready<Reply> {
        ready(if fail { Err(BenchError) } else { op()() })
    }
    let svc = (
        seatbelt_breaker!(&ctx, HOUR),
        layered::Execute::new(call as fn(bool) -> std::future::Ready<Reply>),
    )
        .into_service();
    for _ in 0..100 {
        let _ = now(svc.execute(true));
    }
    // Rejected calls return the configured error without calling inside:
    // a call that would succeed fails.
    assert!(now(svc.execute(false)).is_err());
    shared_rt(svc, work, |s| value(now(s.execute(false))))
}

/// tower-resilience's breaker layer, 1 h wait, tripped by failures.
fn tower_resilience(work: bool) -> Factory {
    let _rt = runtime().enter();
    fn call(fail: bool) -> std::future::Ready<Reply> {
        ready(if fail { Err(BenchError) } else { op()() })
    }
    let mut svc = tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .minimum_number_of_calls(20)
        .wait_duration_in_open(HOUR)
        .build()
        .expect("valid config")
        .layer(tower::service_fn(
            call as fn(bool) -> std::future::Ready<Reply>,
        ));
    for _ in 0..100 {
        let _ = crate::tower_call_with(&mut svc, true);
    }
    assert!(crate::tower_call_with(&mut svc, false).is_err_and(|e| e.is_circuit_open()));
    shared_rt(svc, work, |s| value(crate::tower_call_with(s, false)))
}
