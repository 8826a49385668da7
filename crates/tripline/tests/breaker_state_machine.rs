//! Table-driven state-machine tests on a ManualClock:
//! every legal transition and the boundaries — exactly `minimum_calls`,
//! exactly the threshold, window edges and bucket expiry, half-open quota
//! exhausted, cancelled probes, stale generations, operator states.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::breaker::{Backoff, Jitter, OpenDuration};
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, Event, EventKind, HalfOpenPolicy, Outcome, Reason, State,
    WindowConfig,
};

/// One step of a scenario.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A call admitted and recorded with this outcome and latency (ms).
    Call(Outcome, u64),
    /// A call that must be rejected.
    Rejected,
    /// Move time forward (ms).
    Advance(u64),
    /// The state must be this now.
    Expect(State),
}

use Outcome::{Failure as F, Ignored as I, Success as S};
use Step::*;

struct Case {
    name: &'static str,
    config: CircuitBreakerConfig,
    steps: Vec<Step>,
    /// (from, to, reason) of every transition, in order.
    transitions: Vec<(State, State, Reason)>,
}

fn count(size: u32, minimum_calls: u32, threshold: f64) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "t".into(),
        window: WindowConfig::Count { size },
        minimum_calls,
        failure_rate_threshold: threshold,
        open_duration: OpenDuration::Fixed(Duration::from_secs(5)),
        half_open: HalfOpenPolicy::Consecutive { successes: 2 },
        max_half_open_duration: Some(Duration::from_secs(30)),
        ..Default::default()
    }
}

fn calls(outcome: Outcome, n: usize) -> Vec<Step> {
    vec![Call(outcome, 1); n]
}

fn seq(parts: Vec<Vec<Step>>) -> Vec<Step> {
    parts.into_iter().flatten().collect()
}

fn cases() -> Vec<Case> {
    use Reason::*;
    use State::{Closed, HalfOpen, Open};
    vec![
        Case {
            name: "no trip one call below minimum_calls, trip exactly at it",
            config: count(10, 5, 0.5),
            steps: seq(vec![
                calls(F, 4),
                vec![Expect(Closed), Call(F, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "rate exactly at the threshold trips (>=)",
            config: count(10, 10, 0.3),
            steps: seq(vec![
                calls(S, 7),
                calls(F, 2),
                vec![Expect(Closed), Call(F, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "rate just below the threshold does not trip",
            config: count(10, 10, 0.3),
            steps: seq(vec![calls(S, 8), calls(F, 2), vec![Expect(State::Closed)]]),
            transitions: vec![],
        },
        Case {
            name: "a success can complete a failing sample",
            config: count(10, 4, 0.5),
            steps: seq(vec![
                calls(F, 3),
                vec![Expect(Closed), Call(S, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "the oldest outcome leaves a full count window",
            config: count(4, 4, 0.75),
            // F F S S: 50%. Then F evicts the first F: F S S F = 50%, then
            // F evicts the second F: S S F F = 50%; S S then F F F reaches 75%.
            steps: seq(vec![
                calls(F, 2),
                calls(S, 2),
                calls(F, 2),
                vec![Expect(Closed), Call(F, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "ignored outcomes are neither calls nor failures",
            config: count(10, 4, 0.5),
            steps: seq(vec![
                calls(I, 20),
                calls(F, 3),
                vec![Expect(Closed), Call(F, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "slow calls trip on the slow-call rate",
            config: CircuitBreakerConfig {
                slow_call_duration: Some(Duration::from_millis(100)),
                slow_call_rate_threshold: 0.5,
                ..count(10, 4, 0.5)
            },
            steps: vec![
                Call(S, 99),
                Call(S, 100),
                Call(S, 5),
                Expect(Closed),
                Call(S, 250),
                Expect(Open),
            ],
            transitions: vec![(Closed, Open, SlowCallRate)],
        },
        Case {
            name: "open rejects until exactly the open duration, then probes lazily",
            config: count(4, 2, 0.5),
            steps: seq(vec![
                calls(F, 2),
                vec![
                    Expect(Open),
                    Advance(4_999),
                    Rejected,
                    Expect(Open),
                    Advance(1),
                ],
                vec![
                    Expect(Open),
                    Call(S, 1),
                    Expect(HalfOpen),
                    Call(S, 1),
                    Expect(Closed),
                ],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
            ],
        },
        Case {
            name: "any consecutive probe failure reopens",
            config: count(4, 2, 0.5),
            steps: seq(vec![
                calls(F, 2),
                vec![
                    Advance(5_000),
                    Call(S, 1),
                    Call(F, 1),
                    Expect(Open),
                    Rejected,
                ],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Open, ProbeFailed),
            ],
        },
        Case {
            name: "the window is empty after closing: old failures do not re-trip",
            config: count(10, 2, 0.5),
            steps: seq(vec![
                calls(F, 2),
                vec![Advance(5_000)],
                calls(S, 2),
                vec![Expect(Closed), Call(F, 1), Expect(Closed)],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
            ],
        },
        Case {
            name: "permits: quota exhausted rejects, closes when all finish below the threshold",
            config: CircuitBreakerConfig {
                half_open: HalfOpenPolicy::Permits {
                    calls: 3,
                    failure_rate_threshold: 0.5,
                },
                ..count(4, 2, 0.5)
            },
            steps: seq(vec![
                calls(F, 2),
                vec![
                    Advance(5_000),
                    Call(F, 1),
                    Call(S, 1),
                    Expect(HalfOpen),
                    Call(S, 1),
                    Expect(Closed),
                ],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
            ],
        },
        Case {
            name: "permits: reopens as soon as failures reach the round's threshold",
            config: CircuitBreakerConfig {
                half_open: HalfOpenPolicy::Permits {
                    calls: 10,
                    failure_rate_threshold: 0.2,
                },
                ..count(20, 2, 0.5)
            },
            steps: seq(vec![
                calls(F, 2),
                vec![
                    Advance(5_000),
                    Call(S, 1),
                    Call(F, 1),
                    Expect(HalfOpen),
                    Call(F, 1),
                    Expect(Open),
                ],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Open, ProbeFailed),
            ],
        },
        Case {
            name: "ignored probes free their slot without a verdict",
            config: count(4, 2, 0.5),
            steps: seq(vec![
                calls(F, 2),
                vec![
                    Advance(5_000),
                    Call(I, 1),
                    Call(I, 1),
                    Expect(HalfOpen),
                    Call(S, 1),
                    Call(S, 1),
                    Expect(Closed),
                ],
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
            ],
        },
        Case {
            name: "backoff grows per failed round and resets on close",
            config: CircuitBreakerConfig {
                open_duration: OpenDuration::Backoff(Backoff {
                    initial: Duration::from_secs(1),
                    multiplier: 2.0,
                    max: Duration::from_secs(3),
                    jitter: Jitter::None,
                }),
                half_open: HalfOpenPolicy::Consecutive { successes: 1 },
                ..count(4, 2, 0.5)
            },
            steps: seq(vec![
                calls(F, 2),
                vec![Advance(1_000), Call(F, 1)], // round 1: 2 s
                vec![Advance(1_999), Rejected, Advance(1), Call(F, 1)], // round 2: 3 s (capped)
                vec![
                    Advance(2_999),
                    Rejected,
                    Advance(1),
                    Call(S, 1),
                    Expect(Closed),
                ],
                calls(F, 2),
                vec![
                    Advance(999),
                    Rejected,
                    Advance(1),
                    Call(S, 1),
                    Expect(Closed),
                ], // back to 1 s
            ]),
            transitions: vec![
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Open, ProbeFailed),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Open, ProbeFailed),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
                (Closed, Open, FailureRate),
                (Open, HalfOpen, OpenDurationElapsed),
                (HalfOpen, Closed, ProbesSucceeded),
            ],
        },
        Case {
            name: "time window: failures expire with their bucket",
            config: CircuitBreakerConfig {
                window: WindowConfig::Time {
                    length: Duration::from_secs(10),
                    buckets: 10,
                },
                ..count(1, 4, 0.5)
            },
            // 3 failures at t=0 still count at 9.999 s: one success there
            // completes a 75% sample.
            steps: seq(vec![
                calls(F, 3),
                vec![Advance(9_999), Expect(Closed), Call(S, 1), Expect(Open)],
            ]),
            transitions: vec![(Closed, Open, FailureRate)],
        },
        Case {
            name: "time window: expired failures do not count at the edge",
            config: CircuitBreakerConfig {
                window: WindowConfig::Time {
                    length: Duration::from_secs(10),
                    buckets: 10,
                },
                ..count(1, 4, 0.5)
            },
            steps: seq(vec![
                calls(F, 3),
                vec![Advance(10_000)],
                calls(S, 3),
                vec![Call(F, 1), Expect(Closed)],
            ]),
            transitions: vec![],
        },
    ]
}

fn run(case: &Case) {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(case.config.clone())
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let events = record_events(&breaker);
    for (i, step) in case.steps.iter().enumerate() {
        let at = format!("{} (step {i}: {step:?})", case.name);
        match *step {
            Call(outcome, ms) => {
                let permit = breaker
                    .try_acquire()
                    .unwrap_or_else(|r| panic!("{at}: {r}"));
                permit.record(outcome, Duration::from_millis(ms));
            }
            Rejected => assert!(breaker.try_acquire().is_err(), "{at}: admitted"),
            Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
            }
            Expect(state) => assert_eq!(breaker.state(), state, "{at}"),
        }
    }
    let seen: Vec<_> = transitions(&events);
    assert_eq!(seen, case.transitions, "{}", case.name);
}

fn record_events(breaker: &CircuitBreaker) -> Arc<Mutex<Vec<Event>>> {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = events.clone();
    breaker
        .subscribe(move |e| sink.lock().unwrap().push(e.clone()))
        .detach();
    events
}

fn transitions(events: &Mutex<Vec<Event>>) -> Vec<(State, State, Reason)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Transition(t) => Some((t.from, t.to, t.reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn state_machine_table() {
    for case in cases() {
        run(&case);
    }
}

#[test]
fn trip_event_explains_itself() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "payments".into(),
            slow_call_duration: Some(Duration::from_secs(1)),
            ..count(10, 4, 0.5)
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let events = record_events(&breaker);
    for outcome in [S, F, S, F] {
        breaker
            .try_acquire()
            .unwrap()
            .record(outcome, Duration::from_millis(1500));
    }
    let events = events.lock().unwrap();
    let [event] = events.as_slice() else {
        panic!("one event expected, got {events:?}")
    };
    assert_eq!(&*event.breaker, "payments");
    assert_eq!(event.at.as_secs_f64(), 100.0);
    let EventKind::Transition(t) = &event.kind else {
        panic!("{event:?}")
    };
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::FailureRate)
    );
    assert_eq!(
        (
            t.window.calls,
            t.window.failures,
            t.window.slow,
            t.window.slow_failures
        ),
        (4, 2, 4, 2)
    );
    assert_eq!(t.thresholds.failure_rate, 0.5);
    assert_eq!(t.thresholds.minimum_calls, 4);
    assert_eq!(
        t.thresholds.slow_call_duration,
        Some(Duration::from_secs(1))
    );
    assert_eq!(t.open_duration, Some(Duration::from_secs(5)));
    assert_eq!(t.generation, 1);
}

#[test]
fn half_open_timeout_returns_to_open() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(4, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    let events = record_events(&breaker);
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    clock.advance(Duration::from_secs(5));
    // A probe that never finishes (its permit is leaked on purpose).
    let stuck = breaker.try_acquire().unwrap();
    assert!(stuck.is_probe());
    std::mem::forget(stuck);
    clock.advance(Duration::from_secs(29));
    assert!(breaker.try_acquire().is_err());
    assert_eq!(breaker.state(), State::HalfOpen);
    clock.advance(Duration::from_secs(1));
    assert!(
        breaker.try_acquire().is_err(),
        "the call that notices the timeout is rejected"
    );
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        transitions(&events).last(),
        Some(&(State::HalfOpen, State::Open, Reason::HalfOpenTimeout))
    );
    clock.advance(Duration::from_secs(5));
    assert!(breaker.try_acquire().unwrap().is_probe(), "probing resumes");
}

#[test]
fn dropped_and_panicking_probes_release_their_slot() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(4, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    clock.advance(Duration::from_secs(5));
    let probe = breaker.try_acquire().unwrap();
    assert!(breaker.try_acquire().is_err(), "one probe at a time");
    drop(probe); // cancelled: neutral
    assert_eq!(breaker.state(), State::HalfOpen);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = breaker.call(|| -> Result<(), ()> { panic!("boom") });
    }));
    assert!(r.is_err());
    assert_eq!(breaker.state(), State::HalfOpen, "a panic is not evidence");
    assert_eq!(breaker.metrics().probes_in_flight, 0);
    assert_eq!(breaker.metrics().calls.cancelled, 2);
    // The slot is free: two successes close.
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    assert!(breaker.call(|| Ok::<_, ()>(())).is_ok());
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn cancelled_async_probe_releases_its_slot() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(4, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    clock.advance(Duration::from_secs(5));
    {
        let pending = std::future::pending::<Result<(), ()>>();
        let mut fut = Box::pin(breaker.call_async(pending));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert!(breaker.try_acquire().is_err(), "the probe is in flight");
    } // the future is dropped mid-call
    assert_eq!(breaker.metrics().probes_in_flight, 0);
    let ok = futures_executor::block_on(breaker.call_async(async { Ok::<_, ()>(7) }));
    assert_eq!(ok, Ok(7));
}

#[test]
fn late_results_are_counted_but_never_move_the_new_state() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(4, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    // Admitted while closed, finishing after the trip.
    let slow_calls: Vec<_> = (0..3).map(|_| breaker.try_acquire().unwrap()).collect();
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(5));
    let probe = breaker.try_acquire().unwrap();
    for p in slow_calls {
        p.record(S, Duration::ZERO); // would close a naive breaker
    }
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.metrics().calls.late, 3);
    probe.record(F, Duration::ZERO);
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn operator_states_never_move_on_their_own() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(4, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    let events = record_events(&breaker);

    breaker.force_open();
    clock.advance(Duration::from_secs(3600));
    let r = breaker.try_acquire().unwrap_err();
    assert_eq!((r.state(), r.retry_after()), (State::ForcedOpen, None));
    assert_eq!(breaker.state(), State::ForcedOpen);

    breaker.disable();
    for _ in 0..10 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    assert_eq!(breaker.state(), State::Disabled, "disabled never trips");
    assert_eq!(breaker.window().failures, 4, "but still records");

    breaker.metrics_only();
    for _ in 0..2 {
        breaker.try_acquire().unwrap().record(F, Duration::ZERO);
    }
    assert_eq!(
        breaker.state(),
        State::MetricsOnly,
        "shadow mode never rejects"
    );
    assert!(breaker.try_acquire().is_ok());

    breaker.reset();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.window().calls, 0);

    breaker.open_for(Duration::from_secs(2));
    let r = breaker.try_acquire().unwrap_err();
    assert_eq!(
        (r.state(), r.retry_after()),
        (State::Open, Some(Duration::from_secs(2)))
    );
    clock.advance(Duration::from_secs(2));
    assert!(
        breaker.try_acquire().unwrap().is_probe(),
        "a Retry-After open probes afterwards"
    );

    let until = clock.now() + Duration::from_secs(7);
    breaker.open_until(until);
    assert_eq!(breaker.open_until_time(), Some(until));

    let events = events.lock().unwrap();
    let would_trip = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::WouldTrip {
                    reason: Reason::FailureRate,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        would_trip, 1,
        "shadow mode reports the trip it would have made"
    );
    let forced = events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Transition(t) if t.reason == Reason::Forced))
        .count();
    assert_eq!(forced, 6);
}

use std::future::Future;
use tripline::clock::Clock;

/// Transitions nobody listens to take their place in the delivery order
/// without being queued; a subscriber that arrives later gets every later
/// transition, in order, and nothing is left stuck in the queue.
#[test]
fn late_subscriber_sees_later_transitions_in_order() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(count(10, 2, 0.5))
        .clock(clock.clone())
        .build()
        .unwrap();
    breaker.force_open();
    breaker.reset();
    breaker.disable();
    breaker.reset();
    let events = record_events(&breaker);
    for _ in 0..2 {
        breaker
            .try_acquire()
            .unwrap()
            .record(F, Duration::from_millis(1));
    }
    clock.advance(Duration::from_secs(5));
    for _ in 0..2 {
        breaker
            .try_acquire()
            .unwrap()
            .record(S, Duration::from_millis(1));
    }
    assert_eq!(
        transitions(&events),
        vec![
            (State::Closed, State::Open, Reason::FailureRate),
            (State::Open, State::HalfOpen, Reason::OpenDurationElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        ]
    );
}

/// In the closed state too, a call whose closure panics or whose future is
/// dropped counts as cancelled and leaves the window untouched.
#[test]
fn closed_calls_that_panic_or_are_dropped_count_as_cancelled() {
    let breaker = CircuitBreaker::builder()
        .config(count(10, 2, 0.5))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = breaker.call(|| -> Result<(), ()> { panic!("boom") });
    }));
    assert!(r.is_err());
    {
        let mut fut = Box::pin(breaker.call_async(std::future::pending::<Result<(), ()>>()));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
    }
    let m = breaker.metrics();
    assert_eq!(m.calls.cancelled, 2);
    assert_eq!(m.window.calls, 0, "cancellation is not evidence");
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.call(|| Ok::<_, ()>(1)), Ok(1));
    assert_eq!(breaker.metrics().window.calls, 1);
}
