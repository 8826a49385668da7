//! Half-open rounds end: a round (or a ramp step) is bounded by
//! `max_half_open_duration` whatever its free slots, a decided round stops
//! probing while `min_state_duration` parks its decision, a probe held
//! across any number of later rounds never joins them, and a change of
//! half-open policy while the breaker enters half-open never leaves a round
//! without rules. All on a `ManualClock`, through the public API.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, EventKind, HalfOpenPolicy, Outcome, Reason, State,
};

fn breaker(config: CircuitBreakerConfig) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

fn transitions(b: &CircuitBreaker) -> Arc<Mutex<Vec<(State, State, Reason)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    b.subscribe(move |e| {
        if let EventKind::Transition(t) = &e.kind {
            sink.lock().unwrap().push((t.from, t.to, t.reason));
        }
    })
    .detach();
    seen
}

fn ramp(steps: &[f64], step: Duration) -> HalfOpenPolicy {
    HalfOpenPolicy::Ramp {
        steps: steps.to_vec(),
        step_duration: step,
        failure_rate_threshold: 0.5,
        minimum_calls_per_step: 1,
    }
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn an_expired_round_with_free_slots_admits_no_more_probes() {
    let (b, clock) = breaker(CircuitBreakerConfig::default());
    b.open_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(5));
    let _stuck = b.try_acquire().unwrap(); // a probe that never finishes
    clock.advance(Duration::from_secs(120)); // the limit is 60 s
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.state(), State::Open, "timed out back to open");
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_last_ramp_step_times_out_when_its_probes_never_finish() {
    let max = Duration::from_secs(10);
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: ramp(&[0.5, 1.0], Duration::from_secs(2)),
        max_half_open_duration: Some(max),
        ..Default::default()
    });
    let seen = transitions(&b);
    b.open_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(5));
    let first = b.try_acquire().unwrap();
    first.record(Outcome::Success, MS);
    clock.advance(Duration::from_secs(2));
    // Step 2 (100%): every call is admitted, and none ever finishes.
    let mut stuck = Vec::new();
    for _ in 0..20 {
        stuck.push(b.try_acquire().expect("the full step admits everyone"));
    }
    clock.advance(max);
    assert!(b.try_acquire().is_err(), "the step outlived the limit");
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        seen.lock().unwrap().last().copied(),
        Some((State::HalfOpen, State::Open, Reason::HalfOpenTimeout))
    );
    drop(stuck);
    assert_eq!(b.state(), State::Open, "late probes move nothing");
}

#[test]
fn a_ramp_longer_than_the_limit_closes_because_the_limit_bounds_each_step() {
    // Five 20 s steps take 100 s; the limit of 60 s bounds each step.
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: ramp(&[0.1, 0.25, 0.5, 0.75, 1.0], Duration::from_secs(20)),
        ..Default::default()
    });
    let seen = transitions(&b);
    b.open_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(5));
    // Healthy traffic, 10 calls a second, for up to an hour.
    for _ in 0..36_000 {
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Success, MS);
        }
        if b.state() == State::Closed {
            break;
        }
        clock.advance(Duration::from_millis(100));
    }
    assert_eq!(b.state(), State::Closed);
    let seen = seen.lock().unwrap();
    assert!(
        !seen.iter().any(|t| t.2 == Reason::HalfOpenTimeout),
        "{seen:?}"
    );
    assert_eq!(
        seen.last().copied(),
        Some((State::HalfOpen, State::Closed, Reason::ProbesSucceeded))
    );
}

#[test]
fn a_ramp_step_as_long_as_the_limit_is_refused_naming_the_field() {
    let err = CircuitBreaker::try_new(CircuitBreakerConfig {
        half_open: ramp(&[0.5, 1.0], Duration::from_secs(60)),
        max_half_open_duration: Some(Duration::from_secs(60)),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.field, "half_open.step_duration");
    assert!(err.to_string().contains("max_half_open_duration"), "{err}");
}

#[test]
fn a_parked_reopen_admits_no_more_probes() {
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Consecutive { successes: 3 },
        min_state_duration: Some(Duration::from_secs(10)),
        ..Default::default()
    });
    b.open_for(Duration::from_secs(10));
    clock.advance(Duration::from_secs(10));
    b.try_acquire().unwrap().record(Outcome::Failure, MS);
    assert_eq!(b.state(), State::HalfOpen, "parked by min_state_duration");
    let before = b.metrics().calls.probes_failed;
    for _ in 0..20 {
        clock.advance(Duration::from_millis(100));
        let r = b.try_acquire().expect_err("the round has decided");
        assert_eq!(r.state(), State::HalfOpen);
    }
    assert_eq!(b.metrics().calls.probes_failed, before);
    clock.advance(Duration::from_secs(8));
    assert!(b.try_acquire().is_err());
    assert_eq!(b.state(), State::Open, "the parked reopen applied");
}

#[test]
fn a_parked_ramp_reopen_admits_no_more_probes() {
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: ramp(&[1.0], Duration::from_secs(5)),
        min_state_duration: Some(Duration::from_secs(4)),
        ..Default::default()
    });
    b.open_for(Duration::from_secs(4));
    clock.advance(Duration::from_secs(4));
    b.try_acquire().unwrap().record(Outcome::Failure, MS);
    assert_eq!(b.state(), State::HalfOpen, "parked");
    assert!(
        b.try_acquire().is_err(),
        "no probe while the reopen is parked"
    );
    clock.advance(Duration::from_secs(4));
    assert!(b.try_acquire().is_err());
    assert_eq!(b.state(), State::Open);
}

/// Opens a closed breaker so that the next call enters half-open at
/// exactly `target_generation`, by cycling operator states first.
fn half_open_at(b: &CircuitBreaker, clock: &ManualClock, target_generation: u64) {
    loop {
        // Transitions still to make; the last two are `open_for` and the
        // entry into half-open.
        match target_generation - b.metrics().generation {
            2 => break,
            3 => b.disable(),
            _ => {
                b.force_open();
                b.reset();
            }
        }
    }
    b.open_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
}

#[test]
fn a_probe_held_across_65536_rounds_never_fills_a_later_round() {
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        max_half_open_duration: None,
        ..Default::default()
    });
    b.open_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let held = b.try_acquire().unwrap();
    assert!(held.is_probe());
    let g = held.generation();
    b.reset();
    half_open_at(&b, &clock, g + 65_536);
    let probe = b.try_acquire().expect("the new round starts empty");
    assert_eq!(probe.generation(), g + 65_536);
    drop(held); // late: must not release the new round's slot
    assert!(
        b.try_acquire().is_err(),
        "one probe at a time: the new round's slot is still taken"
    );
    probe.record(Outcome::Success, MS);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_late_probe_outcome_never_settles_a_later_round() {
    let (b, clock) = breaker(CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Permits {
            calls: 2,
            failure_rate_threshold: 0.5,
        },
        max_half_open_duration: None,
        ..Default::default()
    });
    b.open_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let held = b.try_acquire().unwrap();
    let g = held.generation();
    b.reset();
    half_open_at(&b, &clock, g + 65_536);
    let p = b.try_acquire().unwrap();
    held.record(Outcome::Failure, MS); // would reopen the round if it joined
    assert_eq!(b.state(), State::HalfOpen);
    p.record(Outcome::Success, MS);
    b.try_acquire().unwrap().record(Outcome::Success, MS);
    assert_eq!(b.state(), State::Closed);
}
