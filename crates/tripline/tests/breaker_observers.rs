//! What observers see: an operator action that changes nothing emits
//! nothing and keeps the generation (so calls in flight stay current);
//! moving an open breaker's deadline is not a transition; a due probe is
//! visible in `metrics()` before traffic arrives; a slow successful probe
//! is reported as slow, not as failed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::clock::{Clock, ManualClock};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, Event, EventKind, HalfOpenPolicy, Outcome, Reason, State,
    WindowConfig,
};

fn breaker(config: CircuitBreakerConfig) -> (CircuitBreaker, ManualClock, Arc<Mutex<Vec<Event>>>) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    b.subscribe(move |e| sink.lock().unwrap().push(e.clone()))
        .detach();
    (b, clock, events)
}

fn count_window(size: u32) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        window: WindowConfig::Count { size },
        minimum_calls: size,
        ..Default::default()
    }
}

#[test]
fn repeating_an_operator_action_emits_nothing_and_keeps_calls_current() {
    type Action = fn(&CircuitBreaker);
    let actions: [(&str, Action); 3] = [
        ("force_open", CircuitBreaker::force_open),
        ("disable", CircuitBreaker::disable),
        ("metrics_only", CircuitBreaker::metrics_only),
    ];
    for (name, action) in actions {
        let (b, _, events) = breaker(count_window(10));
        action(&b);
        let generation = b.metrics().generation;
        let in_flight = b.try_acquire().ok();
        let seen = events.lock().unwrap().len();
        action(&b);
        assert_eq!(events.lock().unwrap().len(), seen, "{name}: no event");
        assert_eq!(
            b.metrics().generation,
            generation,
            "{name}: same generation"
        );
        if let Some(p) = in_flight {
            p.record(Outcome::Failure, Duration::from_millis(1));
            assert_eq!(b.metrics().calls.late, 0, "{name}: the call is not late");
            assert_eq!(b.window().failures, 1, "{name}: counted in the window");
        }
    }
}

#[test]
fn reset_of_a_closed_breaker_clears_the_window_without_a_transition() {
    let (b, _, events) = breaker(count_window(10));
    for _ in 0..3 {
        b.try_acquire()
            .unwrap()
            .record(Outcome::Failure, Duration::from_millis(1));
    }
    let in_flight = b.try_acquire().unwrap();
    b.reset();
    assert_eq!(b.window().calls, 0, "sample discarded");
    assert_eq!(b.metrics().generation, 0);
    let events = events.lock().unwrap().clone();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Transition(_))),
        "{events:?}"
    );
    assert!(matches!(
        &events[..],
        [Event { kind: EventKind::WindowReset { window }, .. }] if window.failures == 3
    ));
    in_flight.record(Outcome::Success, Duration::from_millis(1));
    assert_eq!(
        b.window().calls,
        1,
        "the call in flight counts in the new sample"
    );
    assert_eq!(b.metrics().calls.late, 0);
}

#[test]
fn open_for_on_an_open_breaker_moves_the_deadline_without_a_transition() {
    let (b, clock, events) = breaker(count_window(10));
    b.open_for(Duration::from_secs(5));
    let generation = b.metrics().generation;
    let start = clock.now();
    events.lock().unwrap().clear();
    b.open_for(Duration::from_secs(30));
    assert_eq!(b.metrics().generation, generation);
    assert_eq!(b.open_until_time(), Some(start + Duration::from_secs(30)));
    let kinds: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.kind.clone())
        .collect();
    assert_eq!(
        kinds,
        vec![EventKind::OpenDeadlineChanged {
            previous: start + Duration::from_secs(5),
            until: start + Duration::from_secs(30),
        }]
    );
    clock.advance(Duration::from_secs(10));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_secs(20)));
    b.open_for(Duration::from_secs(20)); // the same deadline: nothing at all
    assert_eq!(events.lock().unwrap().len(), 1);
}

#[test]
fn a_due_probe_is_visible_before_traffic_arrives() {
    let (b, clock, _) = breaker(count_window(10));
    b.open_for(Duration::from_secs(5));
    let m = b.metrics();
    assert_eq!((m.state, m.probe_due), (State::Open, false));
    clock.advance(Duration::from_secs(5));
    let m = b.metrics();
    assert_eq!(m.state, State::Open, "entered lazily, on the next call");
    assert!(m.probe_due, "but the next call will probe");
    let _probe = b.try_acquire().unwrap();
    let m = b.metrics();
    assert_eq!((m.state, m.probe_due), (State::HalfOpen, false));
    b.force_open();
    clock.advance(Duration::from_secs(3600));
    assert!(!b.metrics().probe_due, "forced open never probes");
}

#[test]
fn a_slow_successful_probe_is_reported_as_slow() {
    let (b, clock, events) = breaker(CircuitBreakerConfig {
        slow_call_duration: Some(Duration::from_millis(100)),
        half_open: HalfOpenPolicy::Consecutive { successes: 2 },
        ..count_window(10)
    });
    b.open_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(5));
    // 1.5 × 100 ms tolerated in half-open; 400 ms is too slow.
    b.try_acquire()
        .unwrap()
        .record(Outcome::Success, Duration::from_millis(400));
    assert_eq!(b.state(), State::Open);
    let events = events.lock().unwrap();
    let EventKind::Transition(t) = &events.last().unwrap().kind else {
        panic!("{events:?}")
    };
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::HalfOpen, State::Open, Reason::ProbeSlow)
    );
    assert_eq!(
        (t.window.calls, t.window.failures, t.window.slow),
        (1, 0, 1)
    );
    assert_eq!(Reason::ProbeSlow.as_str(), "probe_slow");
}
