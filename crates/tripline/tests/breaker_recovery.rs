//! Recovery and adaptivity on a ManualClock: backoff with jitter across
//! replicas, ramp-up probing, hysteresis (minimum state duration, cooldown)
//! and warm-up.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use tripline::breaker::{Backoff, Cooldown, Jitter, OpenDuration, WarmUp, WarmUpMode};
use tripline::clock::{Clock, ManualClock};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, EventKind, HalfOpenPolicy, Outcome, Reason, State,
    WindowConfig,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn base() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 2,
        failure_rate_threshold: 0.5,
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        max_half_open_duration: None,
        ..Default::default()
    }
}

fn build(config: CircuitBreakerConfig, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn fail(b: &CircuitBreaker, n: usize) {
    for _ in 0..n {
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Failure, Duration::ZERO);
        }
    }
}

fn succeed(b: &CircuitBreaker, n: usize) {
    for _ in 0..n {
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Success, Duration::ZERO);
        }
    }
}

/// (from, to, reason, open duration) of each transition.
type Seen = Arc<Mutex<Vec<(State, State, Reason, Option<Duration>)>>>;

fn transitions(b: &CircuitBreaker) -> Seen {
    let seen: Arc<Mutex<Vec<_>>> = Arc::default();
    let sink = seen.clone();
    b.subscribe(move |e| {
        if let EventKind::Transition(t) = &e.kind {
            sink.lock()
                .unwrap()
                .push((t.from, t.to, t.reason, t.open_duration));
        }
    })
    .detach();
    seen
}

/// The instant each of `replicas` breakers that trip together first lets a
/// probe through, in milliseconds.
fn first_probe_times(jitter: Jitter, replicas: u64) -> Vec<u64> {
    let clock = ManualClock::new();
    let config = CircuitBreakerConfig {
        open_duration: OpenDuration::Backoff(Backoff {
            initial: secs(10),
            multiplier: 2.0,
            max: secs(60),
            jitter,
        }),
        ..base()
    };
    let breakers: Vec<_> = (0..replicas)
        .map(|i| {
            CircuitBreaker::builder()
                .config(config.clone())
                .clock(clock.clone())
                .seed(7)
                .instance_id(i)
                .build()
                .unwrap()
        })
        .collect();
    for b in &breakers {
        fail(b, 2);
        assert_eq!(b.state(), State::Open);
    }
    let mut first = vec![None; breakers.len()];
    for ms in (0..=20_000).step_by(100) {
        clock.set(tripline::Timestamp::from_nanos(ms * 1_000_000));
        for (i, b) in breakers.iter().enumerate() {
            if first[i].is_none() && b.try_acquire().map(|p| p.is_probe()).unwrap_or(false) {
                first[i] = Some(ms);
            }
        }
    }
    first
        .into_iter()
        .map(|t| t.expect("probed within 20 s"))
        .collect()
}

#[test]
fn jitter_spreads_replicas_that_tripped_together() {
    let without = first_probe_times(Jitter::None, 100);
    assert!(
        without.iter().all(|t| *t == 10_000),
        "lock-step without jitter"
    );

    let with = first_probe_times(Jitter::Proportional(0.5), 100);
    let distinct: std::collections::BTreeSet<_> = with.iter().collect();
    assert!(
        distinct.len() > 40,
        "only {} distinct probe instants",
        distinct.len()
    );
    assert!(with.iter().all(|t| (5_000..=15_000).contains(t)));
    // No 100 ms slot receives more than a tenth of the fleet.
    let worst = distinct
        .iter()
        .map(|t| with.iter().filter(|x| x == t).count())
        .max()
        .unwrap();
    assert!(worst <= 10, "{worst} replicas probed in the same 100 ms");
    // Same seed and ids: the same spread (reproducible simulations).
    assert_eq!(with, first_probe_times(Jitter::Proportional(0.5), 100));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn open_duration_stays_in_bounds_and_grows_before_jitter(
        initial_ms in 1u64..10_000,
        multiplier in 1.0f64..5.0,
        extra_ms in 0u64..100_000,
        jitter in 0.0f64..=1.0,
        draws in prop::collection::vec(0.0f64..1.0, 1..30),
    ) {
        let initial = Duration::from_millis(initial_ms);
        let max = Duration::from_millis(initial_ms + extra_ms);
        let od = OpenDuration::Backoff(Backoff { initial, multiplier, max, jitter: Jitter::Proportional(jitter) });
        let mut previous = Duration::ZERO;
        for (round, u) in draws.iter().enumerate() {
            let base = od.base(round as u32);
            prop_assert!(base >= previous, "base shrank at round {round}");
            prop_assert!(base >= initial && base <= max);
            previous = base;
            let d = od.for_round(round as u32, *u).as_secs_f64();
            let lo = initial.as_secs_f64() * (1.0 - jitter) - 1e-9;
            let hi = max.as_secs_f64() * (1.0 + jitter) + 1e-9;
            prop_assert!(d >= lo && d <= hi, "{d} outside [{lo}, {hi}]");
        }
    }
}

fn ramp() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Ramp {
            steps: vec![0.1, 0.5, 1.0],
            step_duration: secs(1),
            failure_rate_threshold: 0.2,
            minimum_calls_per_step: 3,
        },
        ..base()
    }
}

/// Offers `n` calls at `now`, recording `outcome` for those admitted;
/// returns how many were admitted.
fn offer(b: &CircuitBreaker, n: usize, outcome: Outcome) -> usize {
    (0..n)
        .filter(|_| match b.try_acquire() {
            Ok(p) => {
                p.record(outcome, Duration::ZERO);
                true
            }
            Err(_) => false,
        })
        .count()
}

#[test]
fn ramp_admits_a_rising_share_and_closes_after_the_last_step() {
    let clock = ManualClock::new();
    let b = build(ramp(), &clock);
    let seen = transitions(&b);
    fail(&b, 2);
    clock.advance(secs(5));
    assert_eq!(offer(&b, 100, Outcome::Success), 10, "step 1 admits 10%");
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(secs(1));
    assert_eq!(offer(&b, 100, Outcome::Success), 50, "step 2 admits 50%");
    clock.advance(secs(1));
    assert_eq!(
        offer(&b, 100, Outcome::Success),
        100,
        "step 3 admits everything"
    );
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the last step is judged when it ends"
    );
    clock.advance(secs(1));
    assert!(b.try_acquire().is_ok());
    assert_eq!(b.state(), State::Closed);
    let last = seen.lock().unwrap().last().copied().unwrap();
    assert_eq!(
        (last.0, last.1, last.2),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded)
    );
}

#[test]
fn ramp_reopens_on_a_failed_step_and_waits_for_a_sample() {
    let clock = ManualClock::new();
    let b = build(ramp(), &clock);
    fail(&b, 2);
    clock.advance(secs(5));
    // Only 2 outcomes in step 1 (< 3 needed): it runs on past its duration.
    assert_eq!(offer(&b, 11, Outcome::Success), 2);
    clock.advance(secs(3));
    assert_eq!(offer(&b, 10, Outcome::Success), 1, "still 10%");
    // Step 2: one failure in three probes reaches 20% → reopen at once.
    clock.advance(secs(1));
    assert_eq!(offer(&b, 4, Outcome::Success), 2);
    assert_eq!(offer(&b, 2, Outcome::Failure), 1);
    assert_eq!(b.state(), State::Open);
}

/// A ramp whose last step ends before `min_state_duration` has passed
/// decides to close but must wait: calls meanwhile are refused (found by
/// `breaker_robustness.rs`: `try_acquire` used to ask the round again and
/// again, spinning forever), and the first call after the wait closes it.
#[test]
fn a_ramp_decision_parked_by_min_state_duration_refuses_instead_of_spinning() {
    let clock = ManualClock::new();
    let b = build(
        CircuitBreakerConfig {
            min_state_duration: Some(secs(10)),
            ..ramp()
        },
        &clock,
    );
    clock.advance(secs(10));
    fail(&b, 2);
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(10));
    assert_eq!(offer(&b, 100, Outcome::Success), 10, "step 1");
    clock.advance(secs(1));
    assert_eq!(offer(&b, 100, Outcome::Success), 50, "step 2");
    clock.advance(secs(1));
    assert_eq!(offer(&b, 100, Outcome::Success), 100, "step 3");
    clock.advance(secs(1));
    let refused = b.try_acquire().unwrap_err();
    assert_eq!(refused.state(), State::HalfOpen, "decided, parked");
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(secs(7));
    assert!(b.try_acquire().is_ok());
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn min_state_duration_holds_trips_and_parks_half_open_decisions() {
    let clock = ManualClock::new();
    let b = build(
        CircuitBreakerConfig {
            min_state_duration: Some(secs(3)),
            ..base()
        },
        &clock,
    );
    let seen = transitions(&b);
    fail(&b, 4);
    assert_eq!(
        b.state(),
        State::Closed,
        "closed for less than 3 s: no trip"
    );
    clock.advance(secs(3));
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
    // The 5 s open duration is longer than 3 s: unchanged.
    clock.advance(secs(5));
    let probe = b.try_acquire().unwrap();
    probe.record(Outcome::Success, Duration::ZERO);
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "closing is parked until 3 s in half-open"
    );
    clock.advance(secs(3));
    assert!(
        b.try_acquire().is_ok(),
        "the parked close applies on the next call"
    );
    assert_eq!(b.state(), State::Closed);
    let reasons: Vec<_> = seen.lock().unwrap().iter().map(|t| t.2).collect();
    assert_eq!(
        reasons,
        [
            Reason::FailureRate,
            Reason::OpenDurationElapsed,
            Reason::ProbesSucceeded
        ]
    );
}

#[test]
fn cooldown_applies_a_stricter_threshold_after_recovery_only() {
    let clock = ManualClock::new();
    let b = build(
        CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 10,
            cooldown: Some(Cooldown {
                duration: secs(30),
                failure_rate_threshold: 0.2,
            }),
            ..base()
        },
        &clock,
    );
    // Before any recovery the normal 50% applies: 2 failures in 10 is fine.
    succeed(&b, 8);
    fail(&b, 2);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 3);
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(5));
    succeed(&b, 1);
    assert_eq!(b.state(), State::Closed);
    // Within the cooldown, 20% trips.
    succeed(&b, 8);
    fail(&b, 2);
    assert_eq!(b.state(), State::Open, "cooldown threshold");
    let t = b.metrics();
    assert_eq!(t.transitions, 4);
    // After the cooldown, 20% no longer trips.
    clock.advance(secs(5));
    succeed(&b, 1);
    clock.advance(secs(31));
    succeed(&b, 8);
    fail(&b, 2);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn warm_up_no_trip_then_relaxed_thresholds() {
    let clock = ManualClock::new();
    let b = build(
        CircuitBreakerConfig {
            warm_up: Some(WarmUp {
                duration: secs(10),
                mode: WarmUpMode::NoTrip,
            }),
            ..base()
        },
        &clock,
    );
    fail(&b, 10);
    assert_eq!(b.state(), State::Closed, "cold start never trips");
    clock.advance(secs(10));
    fail(&b, 1);
    assert_eq!(b.state(), State::Open, "warm: the held-back trip happens");

    let clock = ManualClock::new();
    let relaxed = build(
        CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 10,
            warm_up: Some(WarmUp {
                duration: secs(10),
                mode: WarmUpMode::Relaxed,
            }),
            ..base()
        },
        &clock,
    );
    // At 5 s the threshold is halfway between 100% and 50%: 75%.
    clock.advance(secs(5));
    succeed(&relaxed, 3);
    fail(&relaxed, 7);
    assert_eq!(relaxed.state(), State::Closed, "70% < 75%");
    fail(&relaxed, 1);
    assert_eq!(relaxed.state(), State::Open, "80% ≥ 75%");
}

#[test]
fn jittered_trip_events_report_the_drawn_duration() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            open_duration: OpenDuration::Backoff(Backoff {
                initial: secs(4),
                multiplier: 3.0,
                max: secs(30),
                jitter: Jitter::Equal,
            }),
            ..base()
        })
        .clock(clock.clone())
        .seed(1)
        .build()
        .unwrap();
    let seen = transitions(&b);
    fail(&b, 2);
    let first = seen.lock().unwrap()[0].3.unwrap();
    assert!((secs(2)..=secs(4)).contains(&first), "{first:?}");
    let until = b.open_until_time().unwrap();
    assert_eq!(
        until - clock.now(),
        first,
        "the deadline is the reported duration"
    );
}
