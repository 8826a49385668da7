//! Fallback: typed per cause, the Degraded marker, cache age, and the
//! irreversible-operation rule.

use std::time::Duration;

use tripline::clock::{Clock, ManualClock};
use tripline::fallback::{
    Degraded, DegradedReason, Fallback, FallbackSource, FallbackValue, Served,
};
use tripline::pipeline::{Pipeline, PolicyError};
use tripline::timeout::{Timeout, TimeoutConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig};

#[test]
fn each_cause_gets_its_own_fallback_marked_degraded() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(clock.clone())
        .build()
        .unwrap();
    let p = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_millis(100)),
            ..Default::default()
        })
        .build()
        .unwrap();
    let fb: Fallback<Vec<&str>, &str> = Fallback::builder()
        .on_rejected(FallbackValue::Static(vec![]))
        .on_failure(FallbackValue::function(|e| {
            vec![if matches!(e, PolicyError::Inner("404")) {
                "none"
            } else {
                "?"
            }]
        }))
        .on_timeout(FallbackValue::Cached {
            max_age: Duration::from_secs(60),
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let p = p.with_fallback(fb).unwrap();

    let real = p.call(|_| Ok(vec!["a"])).unwrap();
    assert_eq!(real, Served::fresh(vec!["a"]));

    let failed = p.call(|_| Err("404")).unwrap();
    assert_eq!(failed.value, vec!["none"]);
    assert_eq!(
        failed.degraded,
        Some(Degraded {
            reason: DegradedReason::Failed,
            source: FallbackSource::Function,
            as_of: None
        })
    );

    let fetched_at = clock.now();
    clock.advance(Duration::from_secs(10));
    let timed_out = p
        .call(|_| {
            clock.advance(Duration::from_millis(200));
            Ok(vec!["late"])
        })
        .unwrap();
    assert_eq!(timed_out.value, vec!["a"], "the cached last good value");
    assert_eq!(
        timed_out.degraded,
        Some(Degraded {
            reason: DegradedReason::TimedOut,
            source: FallbackSource::Cache,
            as_of: Some(fetched_at)
        })
    );

    breaker.force_open();
    let rejected = p.call(|_| Ok(vec!["x"])).unwrap();
    assert!(rejected.value.is_empty());
    assert_eq!(rejected.degraded.unwrap().reason, DegradedReason::Rejected);
}

#[test]
fn stale_cache_is_not_served_past_max_age() {
    let clock = ManualClock::new();
    let fb: Fallback<u32, ()> = Fallback::builder()
        .on_failure(FallbackValue::Cached {
            max_age: Duration::from_secs(30),
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(
        fb.apply(Err(PolicyError::Inner(()))),
        Err(PolicyError::Inner(())),
        "empty cache"
    );
    fb.apply(Ok(7)).unwrap();
    clock.advance(Duration::from_secs(31));
    assert_eq!(
        fb.apply(Err(PolicyError::Inner(()))),
        Err(PolicyError::Inner(()))
    );
    // A cause with no fallback stays an explicit error.
    let t = PolicyError::Timeout(Timeout {
        after: Duration::from_secs(1),
    });
    assert_eq!(fb.apply(Err(t.clone())), Err(t));
}

#[test]
fn an_irreversible_operation_refuses_a_fallback_at_build_time() {
    let err = Fallback::<u32, ()>::builder()
        .on_any(FallbackValue::Static(0))
        .irreversible(true)
        .build()
        .unwrap_err();
    assert_eq!((err.policy, err.field), ("fallback", "fallback"));
    assert!(err.to_string().contains("irreversible"), "{err}");

    let payments = Pipeline::builder().irreversible().build().unwrap();
    let fb = Fallback::<u32, ()>::builder()
        .on_any(FallbackValue::Static(0))
        .build()
        .unwrap();
    assert_eq!(payments.with_fallback(fb).unwrap_err().field, "fallback");
    // It fails explicitly instead.
    assert_eq!(
        payments.call(|_| Err::<u32, _>("declined")),
        Err(PolicyError::Inner("declined"))
    );
}

#[test]
fn a_fallback_with_nothing_to_serve_is_refused() {
    let e = Fallback::<u32, ()>::builder().build().unwrap_err();
    assert_eq!(e.field, "on_rejected");
    let e = Fallback::<u32, ()>::builder()
        .on_timeout(FallbackValue::Cached {
            max_age: Duration::ZERO,
        })
        .build()
        .unwrap_err();
    assert_eq!(e.field, "on_timeout");
}
