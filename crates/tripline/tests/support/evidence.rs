//! Shared by the tests of the breaker's cumulative counts and trip events:
//! every count that must never decrease, and every trip's own evidence.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tripline::breaker::{CallCounts, Subscription, Thresholds};
use tripline::{CircuitBreaker, EventKind, Reason, State, WindowSnapshot};

/// Every count of [`CallCounts`] that only counts up, and the sum the
/// scrapes were seen to go backwards on.
pub fn monotonic_fields(c: &CallCounts) -> [(&'static str, u64); 11] {
    [
        ("successful", c.successful),
        ("failed", c.failed),
        ("successful + failed", c.successful + c.failed),
        ("slow", c.slow),
        ("slow_failed", c.slow_failed),
        ("ignored", c.ignored),
        ("rejected", c.rejected),
        ("cancelled", c.cancelled),
        ("late", c.late),
        ("probes_succeeded", c.probes_succeeded),
        ("probes_failed", c.probes_failed),
    ]
}

/// Panics naming the first count that went down between `before` and
/// `after`; `when` says which reads they were.
pub fn assert_not_lower(before: &CallCounts, after: &CallCounts, when: &str) {
    let pairs = monotonic_fields(before)
        .into_iter()
        .zip(monotonic_fields(after));
    for ((name, b), (_, a)) in pairs {
        assert!(a >= b, "{name} went from {b} to {a} {when}");
    }
}

/// What a trip (Closed → Open on a rate) or a would-trip reported.
pub type Trip = (Reason, WindowSnapshot, Thresholds);

/// Subscribes to `b`'s trips and would-trips, keeping each one's evidence.
pub fn record_trips(b: &CircuitBreaker) -> (Arc<Mutex<Vec<Trip>>>, Subscription) {
    let trips: Arc<Mutex<Vec<Trip>>> = Arc::default();
    let sink = trips.clone();
    let subscription = b.subscribe(move |e| match &e.kind {
        EventKind::Transition(t)
            if t.from == State::Closed
                && t.to == State::Open
                && matches!(t.reason, Reason::FailureRate | Reason::SlowCallRate) =>
        {
            sink.lock()
                .unwrap()
                .push((t.reason, t.window, t.thresholds));
        }
        EventKind::WouldTrip {
            reason,
            window,
            thresholds,
        } => sink.lock().unwrap().push((*reason, *window, *thresholds)),
        _ => {}
    });
    (trips, subscription)
}

/// Panics unless the trip is justified by its own evidence: trips allowed,
/// enough calls, and the rate it names reached.
pub fn assert_justified((reason, w, t): &Trip, context: &str) {
    let why = format!("{context}: {reason:?} on {w:?} by {t:?}");
    assert!(t.trips_allowed, "{why}: tripped during a no-trip warm-up");
    assert!(w.calls >= t.minimum_calls, "{why}: below minimum_calls");
    match reason {
        Reason::FailureRate => assert!(
            w.failure_rate() >= t.failure_rate,
            "{why}: a trip at {} reported with a threshold of {}",
            w.failure_rate(),
            t.failure_rate
        ),
        Reason::SlowCallRate => assert!(w.slow_call_rate() >= t.slow_call_rate, "{why}"),
        other => panic!("{why}: unexpected reason {other:?}"),
    }
}
