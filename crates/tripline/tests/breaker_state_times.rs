//! `state_times` / `restore_times`: a breaker rebuilt in a new process from
//! its window and its state times honours `warm_up`, `cooldown` and
//! `min_state_duration` exactly as the long-lived original does — the same
//! outcomes at the same times move both the same way — where a breaker
//! rebuilt without the times starts all three afresh.

use std::time::Duration;

use tripline::Clock;
use tripline::breaker::{Cooldown, OpenDuration, StateTimes, WarmUp, WarmUpMode};
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, State, Timestamp, WindowConfig,
};

const START: u64 = 1_800_000_000_000_000_000;

fn config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "times".into(),
        window: WindowConfig::Count { size: 4 },
        minimum_calls: 4,
        failure_rate_threshold: 0.5,
        open_duration: OpenDuration::Fixed(Duration::from_secs(10)),
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        max_half_open_duration: None,
        ..Default::default()
    }
}

fn build(cfg: &CircuitBreakerConfig, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(cfg.clone())
        .clock(clock.clone())
        .build()
        .expect("valid config")
}

/// What a new process does: a fresh breaker with `original`'s window and,
/// if `times`, its state times.
fn rebuild(
    cfg: &CircuitBreakerConfig,
    clock: &ManualClock,
    original: &CircuitBreaker,
    times: bool,
) -> CircuitBreaker {
    let mut b = CircuitBreaker::builder()
        .config(cfg.clone())
        .clock(clock.clone())
        .restore_window(original.window_contents());
    if times {
        b = b.restore_times(original.state_times());
    }
    b.build().expect("valid config")
}

fn record(b: &CircuitBreaker, o: Outcome) {
    b.try_acquire()
        .expect("admits")
        .record(o, Duration::from_millis(1));
}

/// Feeds `outcomes` to every breaker in `bs` and returns their states.
fn feed(bs: &[&CircuitBreaker], outcomes: &[Outcome]) -> Vec<State> {
    for b in bs {
        for o in outcomes {
            if b.state() == State::Closed {
                record(b, *o);
            }
        }
    }
    bs.iter().map(|b| b.state()).collect()
}

fn now(clock: &ManualClock) -> u64 {
    clock.now().as_nanos()
}

/// Trips `b`, waits out the open state and closes it with one probe:
/// the breaker has just recovered (its cooldown starts now).
fn trip_and_recover(b: &CircuitBreaker, clock: &ManualClock) {
    trip_and_recover_holding(b, clock, Duration::ZERO);
}

/// As [`trip_and_recover`], for a breaker whose every state is held for
/// `hold` (`min_state_duration`).
fn trip_and_recover_holding(b: &CircuitBreaker, clock: &ManualClock, hold: Duration) {
    clock.advance(hold);
    for _ in 0..4 {
        record(b, Outcome::Failure);
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(hold.max(Duration::from_secs(10)));
    record(b, Outcome::Success);
    if !hold.is_zero() {
        // The round decided to close; the close waits for the hold.
        assert_eq!(b.state(), State::HalfOpen);
        clock.advance(hold);
        drop(b.try_acquire());
    }
    assert_eq!(b.state(), State::Closed);
}

const ONE_BAD_IN_FOUR: [Outcome; 4] = [
    Outcome::Success,
    Outcome::Success,
    Outcome::Success,
    Outcome::Failure,
];

#[test]
fn a_breaker_restored_mid_cooldown_keeps_the_stricter_threshold_until_it_ends() {
    let cfg = CircuitBreakerConfig {
        cooldown: Some(Cooldown {
            duration: Duration::from_secs(60),
            failure_rate_threshold: 0.25,
        }),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    trip_and_recover(&original, &clock);
    let recovered = now(&clock);
    assert_eq!(original.state_times().recovered_nanos, Some(recovered));

    // 20 s into the cooldown, a new process.
    clock.advance(Duration::from_secs(20));
    let restored = rebuild(&cfg, &clock, &original, true);
    let forgetful = rebuild(&cfg, &clock, &original, false);
    assert_eq!(restored.state_times(), original.state_times());
    // One failure in four (25%) trips under the cooldown's 25%, not the
    // normal 50%: the original and the restored breaker trip, the one
    // rebuilt without its times has forgotten it just recovered.
    assert_eq!(
        feed(&[&original, &restored, &forgetful], &ONE_BAD_IN_FOUR),
        [State::Open, State::Open, State::Closed]
    );
}

#[test]
fn a_breaker_restored_after_its_cooldown_uses_the_normal_threshold() {
    let cfg = CircuitBreakerConfig {
        cooldown: Some(Cooldown {
            duration: Duration::from_secs(60),
            failure_rate_threshold: 0.25,
        }),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    trip_and_recover(&original, &clock);
    clock.advance(Duration::from_secs(61));
    let restored = rebuild(&cfg, &clock, &original, true);
    assert_eq!(
        feed(&[&original, &restored], &ONE_BAD_IN_FOUR),
        [State::Closed, State::Closed]
    );
}

#[test]
fn a_breaker_restored_mid_warm_up_finishes_the_warm_up_the_original_began() {
    let cfg = CircuitBreakerConfig {
        warm_up: Some(WarmUp {
            duration: Duration::from_secs(60),
            mode: WarmUpMode::NoTrip,
        }),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    assert_eq!(original.state_times().warm_up_start_nanos, START);

    // 30 s in: still warming up, in both — no trip on four failures.
    clock.advance(Duration::from_secs(30));
    let restored = rebuild(&cfg, &clock, &original, true);
    assert_eq!(
        feed(&[&original, &restored], &[Outcome::Failure; 4]),
        [State::Closed, State::Closed]
    );

    // 31 s later the warm-up that began at START is over: a process
    // restored with the times trips with the original; one rebuilt without
    // them starts a new 60 s warm-up and does not.
    clock.advance(Duration::from_secs(31));
    let restored = rebuild(&cfg, &clock, &original, true);
    let forgetful = rebuild(&cfg, &clock, &original, false);
    assert_eq!(
        feed(&[&original, &restored, &forgetful], &[Outcome::Failure]),
        [State::Open, State::Open, State::Closed]
    );
}

#[test]
fn a_relaxed_warm_up_relaxes_the_restored_breaker_by_the_same_share() {
    let cfg = CircuitBreakerConfig {
        warm_up: Some(WarmUp {
            duration: Duration::from_secs(100),
            mode: WarmUpMode::Relaxed,
        }),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    // 80 s in, a fifth of the warm-up is left: the threshold is
    // 0.5 + 0.5 × 0.2 = 60%. Three failures in four (75%) trip both.
    clock.advance(Duration::from_secs(80));
    let restored = rebuild(&cfg, &clock, &original, true);
    let forgetful = rebuild(&cfg, &clock, &original, false);
    let three_bad = [
        Outcome::Failure,
        Outcome::Failure,
        Outcome::Success,
        Outcome::Failure,
    ];
    assert_eq!(
        feed(&[&original, &restored, &forgetful], &three_bad),
        [State::Open, State::Open, State::Closed]
    );
}

#[test]
fn a_breaker_restored_within_min_state_duration_holds_its_state_as_long_as_the_original() {
    let cfg = CircuitBreakerConfig {
        min_state_duration: Some(Duration::from_secs(30)),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    trip_and_recover_holding(&original, &clock, Duration::from_secs(30));
    let closed_at = now(&clock);
    assert_eq!(original.state_times().entered_nanos, closed_at);

    // 10 s after closing: four failures reach the threshold but the state
    // is held in both.
    clock.advance(Duration::from_secs(10));
    let restored = rebuild(&cfg, &clock, &original, true);
    assert_eq!(
        feed(&[&original, &restored], &[Outcome::Failure; 4]),
        [State::Closed, State::Closed]
    );

    // 21 s later the 30 s have passed since the close: the next outcome
    // re-evaluates the same window and trips, in a process restored with
    // the times as in the original; without them the new process counts
    // its 30 s from its own start.
    clock.advance(Duration::from_secs(21));
    let restored = rebuild(&cfg, &clock, &original, true);
    let forgetful = rebuild(&cfg, &clock, &original, false);
    assert_eq!(
        feed(&[&original, &restored, &forgetful], &[Outcome::Failure]),
        [State::Open, State::Open, State::Closed]
    );
}

#[test]
fn state_times_round_trip_through_a_rebuild_and_serde() {
    let cfg = config();
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    let fresh = original.state_times();
    assert_eq!(
        fresh,
        StateTimes {
            entered_nanos: START,
            warm_up_start_nanos: START,
            recovered_nanos: None,
        }
    );
    trip_and_recover(&original, &clock);
    clock.advance(Duration::from_secs(5));
    let times = original.state_times();
    let rebuilt = rebuild(&cfg, &clock, &original, true);
    assert_eq!(rebuilt.state_times(), times);

    let json = serde_json::to_string(&times).expect("serialises");
    assert_eq!(
        serde_json::from_str::<StateTimes>(&json).expect("parses"),
        times
    );
    // Never recovered: the field may be left out.
    let without: StateTimes =
        serde_json::from_str(r#"{"entered_nanos": 5, "warm_up_start_nanos": 3}"#).expect("parses");
    assert_eq!(without.recovered_nanos, None);
    // Unknown fields are refused, as everywhere in the state format.
    assert!(
        serde_json::from_str::<StateTimes>(
            r#"{"entered_nanos": 5, "warm_up_start_nanos": 3, "entred": 1}"#
        )
        .is_err()
    );
}

#[test]
fn an_operator_close_ends_the_cooldown_and_the_restored_times_say_so() {
    let cfg = CircuitBreakerConfig {
        cooldown: Some(Cooldown {
            duration: Duration::from_secs(60),
            failure_rate_threshold: 0.25,
        }),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let original = build(&cfg, &clock);
    trip_and_recover(&original, &clock);
    clock.advance(Duration::from_secs(1));
    // Held open and closed again by an operator: not a recovery.
    original.force_open();
    original.reset();
    let times = original.state_times();
    assert_eq!(times.recovered_nanos, None);
    assert_eq!(times.entered_nanos, now(&clock));
    let restored = rebuild(&cfg, &clock, &original, true);
    assert_eq!(
        feed(&[&original, &restored], &ONE_BAD_IN_FOUR),
        [State::Closed, State::Closed]
    );
}

#[test]
fn times_in_the_future_are_restored_as_now() {
    let cfg = CircuitBreakerConfig {
        min_state_duration: Some(Duration::from_secs(30)),
        ..config()
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let far = START + 3_600_000_000_000;
    let b = CircuitBreaker::builder()
        .config(cfg)
        .clock(clock.clone())
        .restore_times(StateTimes {
            entered_nanos: far,
            warm_up_start_nanos: far,
            recovered_nanos: Some(far),
        })
        .build()
        .expect("valid config");
    assert_eq!(
        b.state_times(),
        StateTimes {
            entered_nanos: START,
            warm_up_start_nanos: START,
            recovered_nanos: Some(START),
        }
    );
    // The hold counts from now, not from an hour ahead.
    clock.advance(Duration::from_secs(31));
    assert_eq!(feed(&[&b], &[Outcome::Failure; 4]), [State::Open]);
}
