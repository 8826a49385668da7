//! The composed pipeline: outer statistics with inner short-circuit, local
//! refusals kept out of the breaker, the error type, and harmful orders.

use std::time::Duration;

use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::clock::ManualClock;
use tripline::pipeline::{Pipeline, PolicyError, Stage, check_order};
use tripline::retry::{RetryBackoff, RetryConfig};
use tripline::timeout::TimeoutConfig;
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, State, WindowConfig};

fn breaker(clock: &ManualClock, minimum_calls: u32) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls,
            failure_rate_threshold: 0.5,
            half_open: HalfOpenPolicy::Consecutive { successes: 1 },
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .expect("valid config")
}

fn retrying(b: &CircuitBreaker, attempts: u32) -> Pipeline {
    Pipeline::builder()
        .circuit_breaker(b.clone())
        .retry(RetryConfig {
            max_attempts: attempts,
            backoff: RetryBackoff::Constant {
                delay: Duration::from_millis(10),
            },
            ..Default::default()
        })
        .build()
        .expect("valid config")
}

#[test]
fn the_breaker_counts_each_logical_call_once() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 4);
    let p = retrying(&b, 3);
    let mut attempts = 0;
    for _ in 0..3 {
        let _ = p.call(|_| {
            attempts += 1;
            Err::<(), _>("503")
        });
    }
    assert_eq!(attempts, 9);
    let w = b.window();
    assert_eq!(
        (w.calls, w.failures),
        (3, 3),
        "3 logical calls, not 9 attempts"
    );
    assert_eq!(
        b.state(),
        State::Closed,
        "minimum_calls 4 not reached by 9 attempts"
    );
    // A call that succeeds on its retry is one success.
    let mut n = 0;
    assert_eq!(
        p.call(|_| {
            n += 1;
            if n == 1 { Err("503") } else { Ok(()) }
        }),
        Ok(())
    );
    assert_eq!(b.state(), State::Open, "75% of 4 logical calls failed");
    let counts = b.metrics().calls;
    assert_eq!((counts.successful, counts.failed), (1, 3));
}

#[test]
fn a_half_open_probe_is_one_logical_call_and_its_retries_stay_in_the_probe() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let p = retrying(&b, 3);
    let _ = p.call(|_| Err::<(), _>("down"));
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(5));
    let mut n = 0;
    let out = p.call(|_| {
        n += 1;
        if n < 3 {
            Err("still warming")
        } else {
            Ok("up")
        }
    });
    assert_eq!(out, Ok("up"));
    assert_eq!(
        b.state(),
        State::Closed,
        "the probe's final outcome closed it"
    );
}

#[test]
fn local_refusals_never_count_as_breaker_failures() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    let bulkhead = Bulkhead::try_new(BulkheadConfig {
        max_concurrent: 1,
        ..Default::default()
    })
    .unwrap();
    let p = Pipeline::builder()
        .circuit_breaker(b.clone())
        .bulkhead(bulkhead.clone())
        .build()
        .unwrap();
    let _hold = bulkhead.try_acquire().unwrap();
    for _ in 0..20 {
        assert!(matches!(
            p.call(|_| Ok::<_, ()>(())),
            Err(PolicyError::BulkheadFull(_))
        ));
    }
    assert_eq!(
        b.state(),
        State::Closed,
        "bulkhead rejections did not trip it"
    );
    assert_eq!(b.window().calls, 0);
    assert_eq!(b.metrics().calls.cancelled, 20, "released as neutral");
}

#[test]
fn the_error_names_the_layer_and_why() {
    let clock = ManualClock::new();
    let b = breaker(&clock, 1);
    b.open_for(Duration::from_secs(7));
    let p = retrying(&b, 2);
    let e = p.call(|_| Ok::<_, std::io::Error>(())).unwrap_err();
    assert_eq!(e.layer(), "circuit_breaker");
    assert!(e.is_local());
    assert_eq!(
        e.to_string(),
        "call rejected: circuit breaker is open (retry after 7.0s)"
    );
    match e {
        PolicyError::CircuitOpen(open) => {
            assert_eq!(open.retry_after(), Some(Duration::from_secs(7)));
            let direct = b.call(|| Ok::<_, &str>(())).unwrap_err();
            assert_eq!(
                direct,
                tripline::CallError::Rejected(open),
                "the pipeline refuses with the breaker's own refusal"
            );
        }
        other => panic!("{other:?}"),
    }
    let inner: PolicyError<&str> = PolicyError::Inner("reset");
    assert_eq!(
        (inner.layer(), inner.to_string()),
        ("inner", "reset".to_owned())
    );
}

#[test]
fn harmful_orders_are_refused_with_the_reason() {
    let e = check_order(&[Stage::Retry, Stage::CircuitBreaker]).unwrap_err();
    assert_eq!(e.field, "circuit_breaker");
    assert!(e.constraint.contains("counts every attempt"), "{e}");
    let e = check_order(&[Stage::Bulkhead, Stage::CircuitBreaker]).unwrap_err();
    assert_eq!(e.field, "bulkhead");
    let e = check_order(&[Stage::CircuitBreaker, Stage::Fallback]).unwrap_err();
    assert_eq!(e.field, "fallback");
    let e = check_order(&[Stage::Retry, Stage::Retry]).unwrap_err();
    assert_eq!(e.field, "retry");
    let w = check_order(&[Stage::Timeout, Stage::CircuitBreaker, Stage::Retry]).unwrap();
    assert_eq!(w.len(), 1);
    assert!(w[0].reason.contains("whole retry loop"), "{}", w[0]);

    // The pipeline runs the canonical order only.
    assert!(Pipeline::builder().order(&Stage::CANONICAL).build().is_ok());
    let e = Pipeline::builder()
        .order(&[Stage::Bulkhead, Stage::CircuitBreaker])
        .build()
        .unwrap_err();
    assert!(e.constraint.contains("outside `circuit_breaker`"), "{e}");
}

#[test]
fn contradictory_settings_are_warned_about() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            slow_call_duration: Some(Duration::from_secs(2)),
            ..Default::default()
        })
        .clock(clock)
        .build()
        .unwrap();
    let (_, warnings) = Pipeline::builder()
        .circuit_breaker(b)
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .build_with_warnings()
        .unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].field, "timeouts.per_attempt");
    let e = Pipeline::builder()
        .budget(tripline::budget::RetryBudget::try_new(Default::default()).unwrap())
        .build()
        .unwrap_err();
    assert_eq!(e.field, "budget");
}
