//! Loom models of the breaker's atomic state machine: every interleaving of
//! the threads below is explored.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tripline --test loom --release`
//! (`scripts/test` does).
#![cfg(loom)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom::thread;
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, EventKind, HalfOpenPolicy, Outcome, State, WindowConfig,
};

fn breaker(clock: &ManualClock, half_open: HalfOpenPolicy) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 4 },
            minimum_calls: 2,
            failure_rate_threshold: 0.5,
            half_open,
            max_half_open_duration: None,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn count_transitions(b: &CircuitBreaker) -> Arc<Mutex<Vec<(State, State)>>> {
    let seen: Arc<Mutex<Vec<(State, State)>>> = Arc::default();
    let sink = seen.clone();
    b.subscribe(move |e| {
        if let EventKind::Transition(t) = &e.kind {
            sink.lock().unwrap().push((t.from, t.to));
        }
    })
    .detach();
    seen
}

/// Threads crossing the threshold together: exactly one Closed→Open
/// transition and exactly one event.
#[test]
fn concurrent_trip_happens_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        let seen = count_transitions(&b);
        // One failure recorded; three threads add a failure each, so every
        // one of them sees the threshold crossed.
        b.try_acquire()
            .unwrap()
            .record(Outcome::Failure, Duration::ZERO);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire() {
                        p.record(Outcome::Failure, Duration::ZERO);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(*seen.lock().unwrap(), vec![(State::Closed, State::Open)]);
        assert_eq!(b.metrics().transitions, 1);
    });
}

fn open_then_elapse(b: &CircuitBreaker, clock: &ManualClock) {
    for _ in 0..2 {
        b.try_acquire()
            .unwrap()
            .record(Outcome::Failure, Duration::ZERO);
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(5));
}

/// Threads racing into half-open with a quota of one probe: one admitted,
/// and a dropped probe leaves no slot behind.
#[test]
fn half_open_admits_within_quota_and_never_leaks() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 2 });
        open_then_elapse(&b, &clock);
        let admitted = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                let admitted = admitted.clone();
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire() {
                        admitted.fetch_add(1, Ordering::SeqCst);
                        drop(p); // cancelled: neutral
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let n = admitted.load(Ordering::SeqCst);
        assert!((1..=2).contains(&n), "admitted {n}");
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.metrics().probes_in_flight, 0, "no slot leaked");
        assert!(b.try_acquire().is_ok(), "the slot is free again");
    });
}

/// Permits quota under contention: never more than `calls` probes at once.
#[test]
fn permits_quota_holds_under_contention() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(
            &clock,
            HalfOpenPolicy::Permits {
                calls: 2,
                failure_rate_threshold: 1.0,
            },
        );
        open_then_elapse(&b, &clock);
        let first = b.try_acquire().unwrap(); // enters half-open
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire().map(|p| std::mem::forget(p)).is_ok())
            })
            .collect();
        let admitted = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        assert_eq!(admitted, 1, "quota of 2, one already taken");
        drop(first);
    });
}

/// A probe closing the breaker while an operator forces it open: whichever
/// wins, the operator's state is final and every published transition has
/// exactly one event, in order.
#[test]
fn probe_close_races_operator_open() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        let seen = count_transitions(&b);
        open_then_elapse(&b, &clock);
        let probe = b.try_acquire().unwrap();
        let b2 = b.clone();
        let t = thread::spawn(move || b2.force_open());
        probe.record(Outcome::Success, Duration::ZERO);
        t.join().unwrap();
        let seen = seen.lock().unwrap();
        // Closed→Open, Open→HalfOpen, then either HalfOpen→Closed→ForcedOpen
        // or HalfOpen→ForcedOpen (the probe's close lost the race).
        assert_eq!(b.state(), State::ForcedOpen);
        assert_eq!(seen.last().map(|t| t.1), Some(State::ForcedOpen));
        assert!(seen.len() == 3 || seen.len() == 4, "{seen:?}");
        assert_eq!(b.metrics().transitions as usize, seen.len());
    });
}

/// Ramp admission is a share of askers, whatever the interleaving: with
/// 50% in the first step, exactly two of the first three askers get in.
#[test]
fn ramp_admission_is_an_exact_share() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(
            &clock,
            HalfOpenPolicy::Ramp {
                steps: vec![0.5, 1.0],
                step_duration: Duration::from_secs(1),
                failure_rate_threshold: 0.5,
                minimum_calls_per_step: 1,
            },
        );
        open_then_elapse(&b, &clock);
        let first = b.try_acquire().map(|p| std::mem::forget(p)).is_ok();
        assert!(first, "the caller entering half-open probes");
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire().map(|p| std::mem::forget(p)).is_ok())
            })
            .collect();
        let admitted = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        assert_eq!(1 + admitted, 2);
    });
}

/// A reconfiguration racing a call: the call lands in the old or the new
/// window, never corrupts either, and exactly one config event is emitted.
#[test]
fn reconfiguration_racing_a_call_stays_consistent() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        let configs = Arc::new(AtomicUsize::new(0));
        let c = configs.clone();
        b.subscribe(move |e| {
            if matches!(e.kind, EventKind::ConfigChanged { .. }) {
                c.fetch_add(1, Ordering::SeqCst);
            }
        })
        .detach();
        let b2 = b.clone();
        let t = thread::spawn(move || {
            b2.reconfigure(CircuitBreakerConfig {
                window: WindowConfig::Count { size: 2 },
                minimum_calls: 2,
                failure_rate_threshold: 0.5,
                max_half_open_duration: None,
                ..Default::default()
            })
            .unwrap();
        });
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Failure, Duration::ZERO);
        }
        t.join().unwrap();
        assert_eq!(b.config_version(), 1);
        assert_eq!(configs.load(Ordering::SeqCst), 1);
        let w = b.window();
        assert!(w.calls <= 2 && w.failures <= w.calls, "{w:?}");
        assert_eq!(
            b.state(),
            State::Closed,
            "one failure cannot trip 2 minimum calls"
        );
    });
}

/// Reshapes racing a call: the call records into whichever window it
/// loaded — the inline one, or one being replaced and retired — and the
/// cumulative counts include it exactly once.
#[test]
fn a_call_racing_reshapes_is_counted_once() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        b.try_acquire()
            .unwrap()
            .record(Outcome::Success, Duration::ZERO);
        let b2 = b.clone();
        let t = thread::spawn(move || {
            // The first reshape moves the window out of line, the second
            // swaps it (and retires the first replacement).
            for size in [2, 3] {
                b2.reconfigure(CircuitBreakerConfig {
                    window: WindowConfig::Count { size },
                    minimum_calls: 2,
                    failure_rate_threshold: 0.5,
                    max_half_open_duration: None,
                    ..Default::default()
                })
                .unwrap();
            }
        });
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Failure, Duration::ZERO);
        }
        t.join().unwrap();
        let calls = b.metrics().calls;
        assert_eq!((calls.successful, calls.failed), (1, 1), "{calls:?}");
    });
}

/// Rejections on an open breaker, from a thread that owns the stripe's
/// rejection word (plain stores) and threads that do not (atomic adds),
/// including the race to claim it: none is lost, and a concurrent reader
/// never sees the count go down or past the truth.
#[test]
fn rejection_counts_are_exact_across_owners_and_sharers() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        b.open_for(Duration::from_secs(60));
        // Three threads on the one stripe a loom model has: one of them
        // wins the claim, two count atomically side by side.
        let rejecters: Vec<_> = (0..3)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || assert!(b.try_acquire().is_err()))
            })
            .collect();
        let first = b.metrics().calls.rejected;
        let second = b.metrics().calls.rejected;
        assert!(first <= second && second <= 3, "{first} then {second}");
        for t in rejecters {
            t.join().unwrap();
        }
        assert!(b.try_acquire().is_err());
        assert_eq!(b.metrics().calls.rejected, 4);
    });
}

/// A reader of the cumulative counts racing a failure's record and a reset
/// that moves the time window's counts into its folded totals: the reader
/// never sees a count go down, nor the failure as a success. (It may see
/// the failure before its call, and so one success fewer for a moment: a
/// count may lag, never lead.)
#[test]
fn cumulative_counts_read_consistently_across_a_reset() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = CircuitBreaker::builder()
            .config(CircuitBreakerConfig {
                window: WindowConfig::Time {
                    length: Duration::from_secs(1),
                    buckets: 1,
                },
                minimum_calls: 100,
                ..Default::default()
            })
            .clock(clock.clone())
            .build()
            .unwrap();
        b.try_acquire()
            .unwrap()
            .record(Outcome::Success, Duration::ZERO);
        let writer = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire()
                    .unwrap()
                    .record(Outcome::Failure, Duration::ZERO);
                b.reset();
            })
        };
        let first = b.metrics().calls;
        let second = b.metrics().calls;
        let why = format!("{first:?} then {second:?}");
        assert!(
            first.successful <= second.successful && second.successful <= 1,
            "{why}"
        );
        assert!(first.failed <= second.failed && second.failed <= 1, "{why}");
        writer.join().unwrap();
        let last = b.metrics().calls;
        assert_eq!((last.successful, last.failed), (1, 1), "{last:?}");
    });
}

/// The three half-open policies, as a reconfiguration installs them.
fn policies() -> [HalfOpenPolicy; 3] {
    [
        HalfOpenPolicy::Consecutive { successes: 1 },
        HalfOpenPolicy::Permits {
            calls: 1,
            failure_rate_threshold: 0.5,
        },
        HalfOpenPolicy::Ramp {
            steps: vec![1.0],
            step_duration: Duration::from_millis(1),
            failure_rate_threshold: 0.5,
            minimum_calls_per_step: 1,
        },
    ]
}

/// A reconfiguration to another half-open policy racing the call that
/// enters half-open, for every pair of policies: whichever goes first, the
/// round in progress afterwards runs under rules it was started with, so
/// healthy probes close the breaker (with no `max_half_open_duration` to
/// rescue a round that was left without rules).
#[test]
fn reconfiguring_the_half_open_policy_while_entering_half_open_never_strands_a_round() {
    for from in policies() {
        for to in policies() {
            if std::mem::discriminant(&from) == std::mem::discriminant(&to) {
                continue;
            }
            let (from, to) = (from.clone(), to);
            loom::model(move || {
                let clock = ManualClock::new();
                let b = breaker(&clock, from.clone());
                open_then_elapse(&b, &clock);
                let b2 = b.clone();
                let to = to.clone();
                let t = thread::spawn(move || {
                    b2.reconfigure(CircuitBreakerConfig {
                        window: WindowConfig::Count { size: 4 },
                        minimum_calls: 2,
                        failure_rate_threshold: 0.5,
                        half_open: to,
                        max_half_open_duration: None,
                        ..Default::default()
                    })
                    .unwrap();
                });
                if let Ok(p) = b.try_acquire() {
                    p.record(Outcome::Success, Duration::ZERO);
                }
                t.join().unwrap();
                // A ramp step is judged once its duration has passed.
                clock.advance(Duration::from_millis(1));
                for _ in 0..4 {
                    if b.state() == State::Closed {
                        break;
                    }
                    if let Ok(p) = b.try_acquire() {
                        p.record(Outcome::Success, Duration::ZERO);
                    }
                    clock.advance(Duration::from_millis(1));
                }
                assert_eq!(b.state(), State::Closed, "{:?}", b.metrics());
            });
        }
    }
}

/// The first subscription racing transitions (events take a place in the
/// delivery order only once something listens): what it hears is an
/// in-order, gap-free suffix of the transitions that happened — those
/// before it may go unheard, none after it — and a transition after it is
/// always heard.
#[test]
fn a_first_subscription_racing_transitions_hears_a_gap_free_suffix() {
    loom::model(|| {
        let clock = ManualClock::new();
        let b = breaker(&clock, HalfOpenPolicy::Consecutive { successes: 1 });
        let operator = {
            let b = b.clone();
            thread::spawn(move || {
                b.force_open();
                b.reset();
            })
        };
        let seen = count_transitions(&b);
        operator.join().unwrap();
        b.force_open();
        let seen = seen.lock().unwrap().clone();
        let all = [
            (State::Closed, State::ForcedOpen),
            (State::ForcedOpen, State::Closed),
            (State::Closed, State::ForcedOpen),
        ];
        assert!(all.ends_with(&seen), "not a suffix: {seen:?}");
        assert!(!seen.is_empty(), "the transition after it went unheard");
    });
}
