//! `call_async`'s future, [`CallAsync`]: admission on the first poll, a
//! nameable type, probes and refusals as in the sync path.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::future::{Ready, ready};
use std::time::Duration;

use futures_executor::block_on;
use tripline::clock::ManualClock;
use tripline::{
    CallAsync, CircuitBreaker, CircuitBreakerConfig, DefaultClassifier, HalfOpenPolicy, State,
    WindowConfig,
};

fn breaker(clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 4 },
            minimum_calls: 2,
            failure_rate_threshold: 0.5,
            half_open: HalfOpenPolicy::Consecutive { successes: 1 },
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// The future is a plain type a struct can hold, no boxing.
struct Queued<'a> {
    call: CallAsync<'a, Ready<Result<u32, ()>>, DefaultClassifier>,
}

#[test]
fn a_future_never_polled_costs_nothing() {
    let clock = ManualClock::new();
    let b = breaker(&clock);
    let queued = Queued {
        call: b.call_async(ready(Ok(1))),
    };
    drop(queued);
    let m = b.metrics();
    assert_eq!(
        (m.window.calls, m.calls.cancelled, m.calls.rejected),
        (0, 0, 0)
    );
    let queued = Queued {
        call: b.call_async(ready(Ok(2))),
    };
    assert_eq!(block_on(queued.call), Ok(2));
    assert_eq!(b.metrics().window.calls, 1);
}

#[test]
fn failures_trip_refusals_are_counted_and_a_probe_closes() {
    let clock = ManualClock::new();
    let b = breaker(&clock);
    for _ in 0..2 {
        let r = block_on(b.call_async(async { Err::<(), _>("down") }));
        assert_eq!(r.unwrap_err().into_inner(), Some("down"));
    }
    assert_eq!(b.state(), State::Open);

    let refused = block_on(b.call_async(async { Ok::<_, ()>(()) }));
    let rejected = match refused {
        Err(tripline::CallError::Rejected(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(rejected.state(), State::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(b.metrics().calls.rejected, 1);

    clock.advance(Duration::from_secs(5));
    assert_eq!(block_on(b.call_async(async { Ok::<_, ()>(9) })), Ok(9));
    assert_eq!(b.state(), State::Closed, "the successful probe closed it");
    assert_eq!(b.metrics().calls.probes_succeeded, 1);
}

#[test]
fn a_custom_classifier_decides_the_outcome() {
    let clock = ManualClock::new();
    let b = breaker(&clock);
    // "Not found" is the dependency answering, not failing.
    let not_found_is_fine = |r: &Result<u32, u16>| match r {
        Err(404) | Ok(_) => tripline::Outcome::Success,
        Err(_) => tripline::Outcome::Failure,
    };
    for _ in 0..4 {
        let r = block_on(b.call_async_with(&not_found_is_fine, async { Err::<u32, u16>(404) }));
        assert!(r.is_err());
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.window().failures, 0);
}
