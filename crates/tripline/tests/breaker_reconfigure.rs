//! Live reconfiguration, state snapshots, the learned slow-call baseline
//! and active health probing, on a ManualClock.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::breaker::{
    Backoff, HealthProbe, HealthProber, Jitter, OpenDuration, SlowCallBaseline, Snapshot, WarmUp,
    WarmUpMode,
};
use tripline::clock::{Clock, ManualClock};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, Event, EventKind, HalfOpenPolicy, Outcome, Reason, State,
    WindowConfig,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn base() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "inventory".into(),
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 4,
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

fn record(b: &CircuitBreaker, outcome: Outcome, n: usize, latency: Duration) {
    for _ in 0..n {
        if let Ok(p) = b.try_acquire() {
            p.record(outcome, latency);
        }
    }
}

fn events(b: &CircuitBreaker) -> Arc<Mutex<Vec<Event>>> {
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = seen.clone();
    b.subscribe(move |e| sink.lock().unwrap().push(e.clone()))
        .detach();
    seen
}

#[test]
fn thresholds_change_live_without_losing_state() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    let seen = events(&b);
    record(&b, Outcome::Success, 6, Duration::ZERO);
    record(&b, Outcome::Failure, 3, Duration::ZERO);
    assert_eq!(b.state(), State::Closed, "3 of 9 < 50%");
    let stricter = CircuitBreakerConfig {
        failure_rate_threshold: 0.3,
        ..base()
    };
    assert!(b.reconfigure(stricter.clone()).unwrap().is_empty());
    assert_eq!(b.config_version(), 1);
    assert_eq!(b.window().calls, 9, "the window survived");
    record(&b, Outcome::Success, 1, Duration::ZERO);
    assert_eq!(
        b.state(),
        State::Open,
        "3 of 10 ≥ 30% under the new threshold"
    );
    let seen = seen.lock().unwrap();
    let EventKind::ConfigChanged {
        version, old, new, ..
    } = &seen[0].kind
    else {
        panic!("{:?}", seen[0])
    };
    assert_eq!(
        (
            *version,
            old.failure_rate_threshold,
            new.failure_rate_threshold
        ),
        (1, 0.5, 0.3)
    );
    let EventKind::Transition(t) = &seen[1].kind else {
        panic!("{:?}", seen[1])
    };
    assert_eq!(t.thresholds.config_version, 1);
    assert_eq!(t.thresholds.failure_rate, 0.3);
}

#[test]
fn an_invalid_config_is_refused_and_the_last_good_one_stays() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    let seen = events(&b);
    let err = b
        .reconfigure(CircuitBreakerConfig {
            failure_rate_threshold: 7.0,
            ..base()
        })
        .unwrap_err();
    assert_eq!(err.field, "failure_rate_threshold");
    let err = b
        .reconfigure(CircuitBreakerConfig {
            name: "other".into(),
            ..base()
        })
        .unwrap_err();
    assert_eq!(err.field, "name");
    assert_eq!(b.config_version(), 0);
    assert_eq!(b.config(), base());
    assert!(seen.lock().unwrap().is_empty(), "nothing happened");
}

#[test]
fn a_resized_count_window_keeps_what_still_fits() {
    let clock = ManualClock::new();
    let config = |size| CircuitBreakerConfig {
        window: WindowConfig::Count { size },
        minimum_calls: 10,
        ..base()
    };
    let b = build(config(10), &clock);
    // Oldest → newest: F F S S S S S S.
    record(&b, Outcome::Failure, 2, Duration::ZERO);
    record(&b, Outcome::Success, 6, Duration::ZERO);
    b.reconfigure(config(6)).unwrap();
    let w = b.window();
    assert_eq!((w.calls, w.failures), (6, 0), "the newest six fit");
    b.reconfigure(config(20)).unwrap();
    assert_eq!(b.window().calls, 6, "growing keeps everything");
    record(&b, Outcome::Failure, 6, Duration::ZERO);
    assert_eq!(b.state(), State::Open, "the new window trips as usual");
}

#[test]
fn a_reshaped_time_window_keeps_live_buckets_at_their_times() {
    let clock = ManualClock::new();
    let time = |length, buckets| WindowConfig::Time {
        length: secs(length),
        buckets,
    };
    let b = build(
        CircuitBreakerConfig {
            window: time(10, 10),
            minimum_calls: 100,
            ..base()
        },
        &clock,
    );
    record(&b, Outcome::Failure, 3, Duration::ZERO); // at 0 s
    clock.advance(secs(6));
    record(&b, Outcome::Success, 5, Duration::ZERO); // at 6 s
    clock.advance(secs(1));
    b.reconfigure(CircuitBreakerConfig {
        window: time(5, 5),
        minimum_calls: 100,
        ..base()
    })
    .unwrap();
    let w = b.window();
    assert_eq!(
        (w.calls, w.failures),
        (5, 0),
        "0 s is outside a 5 s window at 7 s"
    );
    clock.advance(secs(5));
    assert_eq!(
        b.window().calls,
        0,
        "and the kept bucket expires on the new schedule"
    );
}

#[test]
fn reconfiguration_restarts_warm_up_as_a_quiet_period() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    clock.advance(secs(60));
    b.reconfigure(CircuitBreakerConfig {
        warm_up: Some(WarmUp {
            duration: secs(10),
            mode: WarmUpMode::NoTrip,
        }),
        ..base()
    })
    .unwrap();
    record(&b, Outcome::Failure, 8, Duration::ZERO);
    assert_eq!(b.state(), State::Closed, "quiet after the change");
    clock.advance(secs(10));
    record(&b, Outcome::Failure, 1, Duration::ZERO);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn changing_the_half_open_policy_starts_a_fresh_round() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    clock.advance(secs(5));
    let probe = b.try_acquire().unwrap();
    b.reconfigure(CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Permits {
            calls: 2,
            failure_rate_threshold: 0.5,
        },
        ..base()
    })
    .unwrap();
    probe.record(Outcome::Success, Duration::ZERO); // late: an old round
    assert_eq!(b.state(), State::HalfOpen);
    record(&b, Outcome::Success, 2, Duration::ZERO);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn snapshots_restore_an_open_breaker_until_its_original_deadline() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Open);
    let json = serde_json::to_string(&snap).unwrap();
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);

    // A new process: a fresh clock, the same wall-clock deadline.
    let clock2 = ManualClock::new();
    let restored = CircuitBreaker::builder()
        .config(base())
        .clock(clock2.clone())
        .restore(back)
        .build()
        .unwrap();
    assert_eq!(restored.state(), State::Open);
    let left = restored.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(left <= secs(5) && left > secs(4), "{left:?}");
    clock2.advance(left);
    assert!(restored.try_acquire().unwrap().is_probe());

    let closed = build(base(), &clock);
    let _ = closed.reconfigure(base());
    closed.reset();
    record(&closed, Outcome::Failure, 2, Duration::ZERO);
    record(&closed, Outcome::Success, 3, Duration::ZERO);
    let snap = closed.snapshot();
    let again = CircuitBreaker::builder()
        .config(base())
        .clock(clock.clone())
        .restore(snap.clone())
        .build()
        .unwrap();
    assert_eq!(again.window(), snap.window, "the window's counts come back");
    let forced = build(base(), &clock);
    forced.force_open();
    let again = CircuitBreaker::builder()
        .config(base())
        .clock(clock.clone())
        .restore(forced.snapshot())
        .build()
        .unwrap();
    assert_eq!(again.state(), State::ForcedOpen);
}

/// A snapshot is input: a hand-edited one whose counts contradict each
/// other, or whose backoff round is absurd, restores into a consistent
/// breaker (found by `breaker_robustness.rs`: both used to overflow).
#[test]
fn contradictory_snapshots_restore_consistently() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    let mut snap = b.snapshot();
    // 10 calls, 10 failures and 5 slow, none of them both: impossible.
    snap.window.calls = 10;
    snap.window.failures = 10;
    snap.window.slow = 5;
    snap.window.slow_failures = 0;
    snap.state = State::Open;
    snap.backoff_round = u64::MAX;
    let restored = CircuitBreaker::builder()
        .config(base())
        .clock(clock.clone())
        .restore(snap)
        .build()
        .unwrap();
    let w = restored.window();
    assert!(w.failures <= w.calls && w.slow <= w.calls, "{w:?}");
    assert!(
        w.failures + w.slow - w.slow_failures <= w.calls,
        "failures and slow calls overlap as much as they must: {w:?}"
    );
    // The next probe round fails; the backoff stays at its cap.
    clock.advance(secs(3600));
    let probe = restored.try_acquire().unwrap();
    probe.record(Outcome::Failure, Duration::ZERO);
    assert_eq!(restored.state(), State::Open);
}

fn learning() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        window: WindowConfig::Count { size: 50 },
        minimum_calls: 20,
        slow_call_rate_threshold: 0.5,
        slow_call: Some(SlowCallBaseline {
            baseline_quantile: 0.99,
            factor: 3.0,
            floor: ms(10),
            ceiling: secs(2),
            max_step: 0.1,
            min_samples: 50,
        }),
        ..base()
    }
}

#[test]
fn the_slow_call_threshold_is_learned_from_healthy_latency() {
    let clock = ManualClock::new();
    let b = build(learning(), &clock);
    assert_eq!(
        b.slow_call_threshold().map(|d| d.as_millis()),
        Some(2000),
        "ceiling until learned"
    );
    record(&b, Outcome::Success, 50, ms(20));
    let learned = b.slow_call_threshold().unwrap();
    // p99 of 20 ms (bucket bound ≤ 25% above) × 3.
    assert!((ms(60)..=ms(76)).contains(&learned), "{learned:?}");
    // Calls at 200 ms are now slow, and trip the breaker.
    record(&b, Outcome::Success, 30, ms(200));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().learned_slow_call, Some(learned));
}

#[test]
fn a_slowly_degrading_dependency_moves_the_baseline_by_bounded_steps() {
    let clock = ManualClock::new();
    let b = build(
        CircuitBreakerConfig {
            slow_call_rate_threshold: 1.0,
            ..learning()
        },
        &clock,
    );
    record(&b, Outcome::Success, 50, ms(20));
    let mut previous = b.slow_call_threshold().unwrap();
    for _ in 0..5 {
        // Just under the threshold: not slow, so a sample.
        let latency = previous - ms(1);
        record(&b, Outcome::Success, 50, latency);
        let next = b.slow_call_threshold().unwrap();
        assert!(
            next <= previous + previous / 10 + Duration::from_nanos(2),
            "{previous:?} → {next:?}"
        );
        assert!(next > previous, "it does follow, slowly");
        previous = next;
    }
}

#[test]
fn a_health_check_probes_before_business_traffic() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    let seen = events(&b);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    let healthy = Arc::new(Mutex::new(false));
    let h = healthy.clone();
    let mut prober = HealthProber::new(
        b.clone(),
        move || {
            let ok = *h.lock().unwrap();
            async move { ok }
        },
        secs(1),
    );
    let sleep = |d| {
        clock.advance(d);
        std::future::ready(())
    };
    assert_eq!(
        futures_executor::block_on(prober.probe_once(&sleep)),
        HealthProbe::NotDue
    );
    clock.advance(secs(5));
    assert_eq!(
        futures_executor::block_on(prober.probe_once(&sleep)),
        HealthProbe::Failed
    );
    assert_eq!(b.state(), State::Open, "another backoff round");
    clock.advance(secs(5));
    *healthy.lock().unwrap() = true;
    assert_eq!(
        futures_executor::block_on(prober.probe_once(&sleep)),
        HealthProbe::Passed
    );
    assert_eq!(b.state(), State::HalfOpen);
    record(&b, Outcome::Success, 1, Duration::ZERO);
    assert_eq!(b.state(), State::Closed);
    let reasons: Vec<Reason> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Transition(t) => Some(t.reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons,
        [
            Reason::FailureRate,
            Reason::HealthCheckFailed,
            Reason::HealthCheckPassed,
            Reason::ProbesSucceeded
        ]
    );
}

#[test]
fn a_hung_health_check_times_out() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    clock.advance(secs(5));
    let mut prober = HealthProber::new(b.clone(), std::future::pending::<bool>, secs(1));
    let sleep = |d| {
        clock.advance(d);
        std::future::ready(())
    };
    assert_eq!(
        futures_executor::block_on(prober.probe_once(&sleep)),
        HealthProbe::TimedOut
    );
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_attached_prober_holds_business_probes_but_never_forever() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    let prober = HealthProber::new(b.clone(), || async { true }, secs(1));
    // Drive `run` until its first sleep, then drop it (the prober "dies").
    {
        let sleeping = Arc::new(Mutex::new(None::<Duration>));
        let s = sleeping.clone();
        let mut run = Box::pin(prober.run(move |d| {
            *s.lock().unwrap() = Some(d);
            std::future::pending::<()>()
        }));
        let waker = std::task::Waker::noop();
        let _ = run
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker));
        assert_eq!(
            *sleeping.lock().unwrap(),
            Some(secs(5)),
            "sleeps until the deadline"
        );
    }
    clock.advance(secs(5));
    let held = b.try_acquire().unwrap_err();
    assert_eq!(
        held.state(),
        State::Open,
        "business waits for the health check"
    );
    clock.advance(secs(2));
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "…but not past timeout + grace"
    );
}

use std::future::Future;

/// Snapshots are read by people and tools: the deadline is RFC 3339 text,
/// and a snapshot written in serde's older `{secs_since_epoch, …}` form by
/// an earlier version still restores.
#[test]
fn snapshot_deadlines_are_rfc3339_and_the_older_form_still_restores() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    record(&b, Outcome::Failure, 4, Duration::ZERO);
    let snap = b.snapshot();
    let json: serde_json::Value = serde_json::to_value(&snap).unwrap();
    let text = json["open_until"].as_str().expect("a string");
    assert!(
        text.len() >= 20 && text.as_bytes()[4] == b'-' && text.contains('T') && text.ends_with('Z'),
        "{text}"
    );
    let until = snap.open_until.unwrap();
    let since_epoch = until.duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut legacy = json.clone();
    legacy["open_until"] = serde_json::json!({
        "secs_since_epoch": since_epoch.as_secs(),
        "nanos_since_epoch": since_epoch.subsec_nanos(),
    });
    let back: Snapshot = serde_json::from_value(legacy).unwrap();
    assert_eq!(back.open_until, Some(until));
    let mut junk = json;
    junk["open_until"] = serde_json::json!("yesterday");
    let err = serde_json::from_value::<Snapshot>(junk).unwrap_err();
    assert!(err.to_string().contains("RFC 3339"), "{err}");
}

/// An event reads as one line with its numbers, and carries the wall-clock
/// time besides the breaker clock's.
#[test]
fn events_display_as_one_explained_line_and_carry_wall_time() {
    let clock = ManualClock::new();
    let mut config = base();
    config.name = "payments".into();
    let b = build(config, &clock);
    let seen = events(&b);
    let before = std::time::SystemTime::UNIX_EPOCH + secs(1_700_000_000);
    record(&b, Outcome::Success, 1, Duration::ZERO);
    record(&b, Outcome::Failure, 3, Duration::ZERO);
    let seen = seen.lock().unwrap();
    let trip = seen
        .iter()
        .find(|e| matches!(e.kind, EventKind::Transition(_)))
        .expect("a trip");
    assert_eq!(
        trip.to_string(),
        "payments: closed → open (failure rate 75% ≥ 50% over 4 calls; open for 5.0s)"
    );
    assert!(trip.wall > before, "wall-clock time of the event");
    let json = serde_json::to_value(trip).unwrap();
    assert!(
        json["wall"].as_str().is_some_and(|w| w.ends_with('Z')),
        "{json}"
    );
}

/// A snapshot whose counts cannot all be kept is restored as far as it can
/// be, and says what was dropped instead of dropping it silently.
#[test]
fn a_snapshot_that_cannot_be_kept_whole_says_what_was_dropped() {
    let clock = ManualClock::new();
    let b = build(base(), &clock);
    let mut snap = b.snapshot();
    snap.window.calls = 1 << 40;
    snap.window.failures = 3;
    let (restored, warnings) = CircuitBreaker::builder()
        .config(base())
        .clock(clock.clone())
        .restore(snap.clone())
        .build_with_warnings()
        .unwrap();
    let dropped = warnings
        .iter()
        .find(|w| w.field == "restore.window.calls")
        .expect("the dropped calls are named");
    assert!(
        dropped
            .message
            .contains("1099511627776 calls do not fit a count window of 10"),
        "{dropped}"
    );
    assert_eq!(restored.window().calls, 10, "what fits is kept");
    assert_eq!(restored.window().failures, 3);

    snap.window.calls = 4;
    snap.window.failures = 9;
    let (_, warnings) = CircuitBreaker::builder()
        .config(base())
        .clock(clock)
        .restore(snap)
        .build_with_warnings()
        .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.field == "restore.window" && w.message.contains("contradict")),
        "{warnings:?}"
    );
}

/// A fixed open duration is kept beside the cold state for trips; a new
/// config must reach it: the next trip opens for the new duration, and a
/// backoff (which varies by round) is read from the settings again.
#[test]
fn a_new_open_duration_applies_from_the_next_trip() {
    let clock = ManualClock::new();
    let with_open = |open: OpenDuration| CircuitBreakerConfig {
        open_duration: open,
        ..base()
    };
    let b = build(with_open(OpenDuration::Fixed(secs(5))), &clock);
    let trip_and_recover = |expected: Duration| {
        record(&b, Outcome::Failure, 4, Duration::ZERO);
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.open_until_time(), Some(clock.now() + expected));
        clock.advance(expected);
        record(&b, Outcome::Success, 1, Duration::ZERO);
        assert_eq!(b.state(), State::Closed, "one good probe closes");
    };
    trip_and_recover(secs(5));
    b.reconfigure(with_open(OpenDuration::Fixed(secs(2))))
        .unwrap();
    trip_and_recover(secs(2));
    b.reconfigure(with_open(OpenDuration::Backoff(Backoff {
        initial: secs(3),
        multiplier: 2.0,
        max: secs(60),
        jitter: Jitter::None,
    })))
    .unwrap();
    trip_and_recover(secs(3));
    b.reconfigure(with_open(OpenDuration::Fixed(ms(1500))))
        .unwrap();
    trip_and_recover(ms(1500));
}
