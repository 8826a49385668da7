//! `window_contents` / `restore_window`: a breaker rebuilt in a later
//! process continues the window it saved — buckets age out at their own
//! times, a count window evicts in the original order — where the
//! aggregate snapshot would put everything in the current bucket.

use std::time::Duration;

use tripline::breaker::WindowContents;
use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, State, Timestamp, WindowConfig};

fn config(window: WindowConfig) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "contents".into(),
        window,
        minimum_calls: 4,
        failure_rate_threshold: 0.5,
        ..Default::default()
    }
}

fn build(
    cfg: &CircuitBreakerConfig,
    clock: &ManualClock,
    c: Option<WindowContents>,
) -> CircuitBreaker {
    let mut b = CircuitBreaker::builder()
        .config(cfg.clone())
        .clock(clock.clone());
    if let Some(c) = c {
        b = b.restore_window(c);
    }
    b.build().expect("valid config")
}

fn record(b: &CircuitBreaker, o: Outcome) {
    b.try_acquire().expect("closed").record(o, Duration::ZERO);
}

#[test]
fn time_buckets_age_out_at_their_own_times_after_restore() {
    let cfg = config(WindowConfig::Time {
        length: Duration::from_secs(60),
        buckets: 6,
    });
    let clock = ManualClock::starting_at(Timestamp::from_nanos(1_000_000_000_000));
    let first = build(&cfg, &clock, None);
    record(&first, Outcome::Failure);
    record(&first, Outcome::Failure);
    clock.advance(Duration::from_secs(50));
    record(&first, Outcome::Success);
    let saved = first.window_contents();
    let WindowContents::Time { buckets } = &saved else {
        panic!("time window")
    };
    assert_eq!(buckets.len(), 2, "two live buckets: {saved:?}");

    // A later process, 15 s on: the two old failures have aged out.
    clock.advance(Duration::from_secs(15));
    let second = build(&cfg, &clock, Some(saved.clone()));
    assert_eq!(second.window().calls, 1);
    assert_eq!(second.window().failures, 0);
    // Two failures and one more success now: 2 of 4 would trip at 50%
    // only if the aged failures were still counted (4 failures of 5).
    record(&second, Outcome::Failure);
    record(&second, Outcome::Success);
    record(&second, Outcome::Success);
    assert_eq!(second.state(), State::Closed);
    assert_eq!(second.window().failures, 1);
}

#[test]
fn restored_time_window_equals_saved_one_at_the_same_instant() {
    let cfg = config(WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 5,
    });
    let clock = ManualClock::starting_at(Timestamp::from_nanos(7_000_000_000_000));
    let first = build(&cfg, &clock, None);
    for i in 0..3 {
        record(&first, Outcome::Success);
        clock.advance(Duration::from_secs(2 + i));
    }
    let saved = first.window_contents();
    let second = build(&cfg, &clock, Some(saved.clone()));
    assert_eq!(second.window_contents(), saved);
    assert_eq!(second.window(), first.window());
}

#[test]
fn count_window_keeps_outcome_order_for_eviction() {
    let cfg = config(WindowConfig::Count { size: 4 });
    let clock = ManualClock::new();
    let first = build(&cfg, &clock, None);
    // Oldest first: F S S S — one failure of four, closed.
    record(&first, Outcome::Failure);
    for _ in 0..3 {
        record(&first, Outcome::Success);
    }
    let saved = first.window_contents();
    let second = build(&cfg, &clock, Some(saved));
    // One new failure evicts the old failure, not a success: 1 of 4.
    record(&second, Outcome::Failure);
    assert_eq!(second.window().failures, 1);
    assert_eq!(second.state(), State::Closed);
    // A second failure: 2 of 4 = 50%, trips exactly as the first would.
    record(&second, Outcome::Failure);
    assert_eq!(second.state(), State::Open);
}

#[test]
fn contents_round_trip_through_serde() {
    let cfg = config(WindowConfig::Count { size: 3 });
    let b = build(&cfg, &ManualClock::new(), None);
    record(&b, Outcome::Failure);
    let c = b.window_contents();
    let json = serde_json::to_string(&c).expect("serialises");
    assert!(json.contains("\"kind\":\"count\""), "{json}");
    let back: WindowContents = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, c);
    assert!(
        serde_json::from_str::<WindowContents>(r#"{"kind":"count","outcomes":[],"x":1}"#).is_err()
    );
}

#[test]
fn contents_of_the_other_kind_fall_back_to_aggregate_counts() {
    let count = config(WindowConfig::Count { size: 10 });
    let time = config(WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 2,
    });
    let clock = ManualClock::new();
    let first = build(&count, &clock, None);
    record(&first, Outcome::Failure);
    record(&first, Outcome::Success);
    let second = build(&time, &clock, Some(first.window_contents()));
    assert_eq!(second.window().calls, 2);
    assert_eq!(second.window().failures, 1);
}
