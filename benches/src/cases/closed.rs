//! Closed path: every library configured as close as it allows to
//! tripline's defaults (100-call window, 20 calls minimum, trip at 50 %
//! failures, 5 s open, 5 half-open probes), each on its production clock.

use std::sync::Arc;
use std::time::Duration;

use failsafe::{backoff, failure_policy};
use layered::Service as _;
use seatbelt::RecoveryInfo;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

use super::{Case, Factory, case, shared, shared_rt};
use crate::{BenchError, Reply, now, op, runtime, value};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case("closed", "bare", bare),
        case("closed", "tripline", tripline),
        case("closed", "tripline_permit", tripline_permit),
        case("closed", "tripline_time", tripline_time),
        case("closed", "recloser", recloser),
        case("closed", "failsafe_default", failsafe_default),
        case("closed", "failsafe_consecutive", failsafe_consecutive),
        case("closed", "circuitbreaker_rs", circuitbreaker_rs),
        case("closed", "bare_async", bare_async),
        case("closed", "tripline_async", tripline_async),
        case("closed", "seatbelt", seatbelt),
    ]
}

/// tripline's defaults: 100-call count window, 20 calls minimum, 50 %,
/// 5 s open, 5 probes; production `MonotonicClock`.
pub(crate) fn tripline_default() -> CircuitBreaker {
    CircuitBreaker::try_new(CircuitBreakerConfig::default()).expect("valid config")
}

fn bare(work: bool) -> Factory {
    shared((), work, |_| value(op()()))
}

fn tripline(work: bool) -> Factory {
    shared(tripline_default(), work, |b| value(b.call(op())))
}

/// The manual permit API: `try_acquire`, call, `record`.
fn tripline_permit(work: bool) -> Factory {
    shared(tripline_default(), work, |b| match b.try_acquire() {
        Ok(permit) => {
            let r = op()();
            let outcome = if r.is_ok() {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            permit.record(outcome, Duration::ZERO);
            value(r)
        }
        Err(_) => 0,
    })
}

/// A 10 s time window in 10 buckets instead of the count window.
fn tripline_time(work: bool) -> Factory {
    let b = CircuitBreaker::try_new(CircuitBreakerConfig {
        window: WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
        ..Default::default()
    })
    .expect("valid config");
    shared(b, work, |b| value(b.call(op())))
}

/// recloser: 100-call closed ring, 50 %, 5-call half-open ring, 5 s open.
pub(crate) fn recloser_default() -> recloser::Recloser {
    recloser::Recloser::custom()
        .closed_len(100)
        .half_open_len(5)
        .error_rate(0.5)
        .open_wait(Duration::from_secs(5))
        .build()
}

fn recloser(work: bool) -> Factory {
    shared(Arc::new(recloser_default()), work, |r| value(r.call(op())))
}

/// failsafe's default policy shape (success rate over a time window *or*
/// consecutive failures) with tripline's numbers where it has them: ≥ 50 %
/// success required, 20 calls minimum, a 10 s window (it has no count
/// window), 5 consecutive failures, 5 s constant backoff.
pub(crate) fn failsafe_default_policy() -> impl failsafe::FailurePolicy + Send + 'static {
    use failsafe::FailurePolicy as _;
    failure_policy::success_rate_over_time_window(
        0.5,
        20,
        Duration::from_secs(10),
        backoff::constant(Duration::from_secs(5)),
    )
    .or_else(failure_policy::consecutive_failures(
        5,
        backoff::constant(Duration::from_secs(5)),
    ))
}

fn failsafe_default(work: bool) -> Factory {
    let cb = failsafe::Config::new()
        .failure_policy(failsafe_default_policy())
        .build();
    shared(cb, work, |cb| {
        value(failsafe::CircuitBreaker::call(cb, op()))
    })
}

/// failsafe's consecutive-failures policy: 5 in a row, 5 s constant backoff.
fn failsafe_consecutive(work: bool) -> Factory {
    let cb = failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(Duration::from_secs(5)),
        ))
        .build();
    shared(cb, work, |cb| {
        value(failsafe::CircuitBreaker::call(cb, op()))
    })
}

/// circuitbreaker-rs's default policy: 50 %, 20 calls minimum, 5 s
/// cooldown, 5 probes (it also trips on 5 consecutive failures).
pub(crate) fn circuitbreaker_rs_default()
-> circuitbreaker_rs::CircuitBreaker<circuitbreaker_rs::DefaultPolicy, BenchError> {
    circuitbreaker_rs::CircuitBreaker::<circuitbreaker_rs::DefaultPolicy, BenchError>::builder()
        .failure_threshold(0.5)
        .min_throughput(20)
        .cooldown(Duration::from_secs(5))
        .probe_interval(5)
        .build()
}

fn circuitbreaker_rs(work: bool) -> Factory {
    shared(Arc::new(circuitbreaker_rs_default()), work, |cb| {
        value(cb.call(op()))
    })
}

/// The protected operation as a `layered` service (seatbelt's model).
pub(crate) type Exec = layered::Execute<fn(()) -> std::future::Ready<Reply>>;

pub(crate) fn exec() -> Exec {
    fn call(_: ()) -> std::future::Ready<Reply> {
        std::future::ready(op()())
    }
    layered::Execute::new(call as fn(()) -> std::future::Ready<Reply>)
}

/// The async baseline: the `layered` service alone, polled by hand.
fn bare_async(work: bool) -> Factory {
    shared(exec(), work, |e| value(now(e.execute(()))))
}

/// `call_async` around the same service future.
fn tripline_async(work: bool) -> Factory {
    shared((tripline_default(), exec()), work, |(b, e)| {
        value(now(b.call_async(e.execute(()))))
    })
}

/// seatbelt's recovery classification: `Err` is a failure.
pub(crate) fn classify(r: &Reply, _: seatbelt::breaker::RecoveryArgs) -> RecoveryInfo {
    if r.is_ok() {
        RecoveryInfo::never()
    } else {
        RecoveryInfo::retry()
    }
}

/// seatbelt's breaker (async only): 50 %, 20 calls minimum, 10 s sampling,
/// 5 s break, its default progressive half-open mode; tick's tokio clock.
fn seatbelt(work: bool) -> Factory {
    use layered::Stack as _;
    let _rt = runtime().enter();
    let clock = tick::Clock::new_tokio();
    let ctx = seatbelt::ResilienceContext::<(), Reply>::new(&clock);
    let svc = (seatbelt_breaker!(&ctx, Duration::from_secs(5)), exec()).into_service();
    shared_rt(svc, work, |s| value(now(s.execute(()))))
}
