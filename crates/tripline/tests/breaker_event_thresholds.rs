//! A trip's event reports the thresholds its decision used, even when an
//! operator action or a reconfiguration lands between the decision and the
//! event. The gap is made deterministic: the tripping thread asks `tracing`
//! whether anyone listens before it builds the event, and a subscriber that
//! acts on the breaker right there stands for another thread that did.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod support {
    pub mod evidence;
}

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use support::evidence::{Trip, assert_justified, record_trips};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event as TraceEvent, Metadata, Subscriber};
use tripline::breaker::{Cooldown, OpenDuration};
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, State, WindowConfig,
};

type Action = Box<dyn Fn(&CircuitBreaker) + Send + Sync>;

/// Runs `action` on the breaker the first time, once armed, that the
/// breaker asks whether its events are listened to.
struct InTheGap {
    breaker: Arc<OnceLock<Arc<CircuitBreaker>>>,
    armed: Arc<AtomicBool>,
    action: Action,
}

impl Subscriber for InTheGap {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes() // ask `enabled` every time
    }
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        if metadata.target() == "tripline::breaker" && self.armed.swap(false, Ordering::SeqCst) {
            (self.action)(self.breaker.get().unwrap());
        }
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &TraceEvent<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "gap".into(),
        window: WindowConfig::Count { size: 4 },
        minimum_calls: 4,
        failure_rate_threshold: 0.5,
        open_duration: OpenDuration::Fixed(Duration::from_secs(1)),
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        ..Default::default()
    }
}

/// Builds the breaker, subscribes to its trips and would-trips, and runs
/// `scenario` with `action` armed to fire in the gap of the next one.
fn with_gap(
    config: CircuitBreakerConfig,
    action: impl Fn(&CircuitBreaker) + Send + Sync + 'static,
    scenario: impl FnOnce(&CircuitBreaker, &ManualClock, &AtomicBool),
) -> Vec<Trip> {
    let clock = ManualClock::new();
    let b = Arc::new(
        CircuitBreaker::builder()
            .config(config)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (seen, _subscription) = record_trips(&b);
    let cell = Arc::new(OnceLock::new());
    cell.set(b.clone()).ok().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let gap = InTheGap {
        breaker: cell,
        armed: armed.clone(),
        action: Box::new(action),
    };
    tracing::subscriber::with_default(gap, || scenario(&b, &clock, &armed));
    seen.lock().unwrap().clone()
}

fn record(b: &CircuitBreaker, outcomes: &[Outcome]) {
    for &o in outcomes {
        b.try_acquire().unwrap().record(o, Duration::ZERO);
    }
}

const ONE_IN_FOUR: [Outcome; 4] = [
    Outcome::Success,
    Outcome::Success,
    Outcome::Success,
    Outcome::Failure,
];
const TWO_IN_FOUR: [Outcome; 4] = [
    Outcome::Success,
    Outcome::Success,
    Outcome::Failure,
    Outcome::Failure,
];

#[test]
fn a_reset_in_the_gap_does_not_hide_the_cooldown_threshold_that_tripped() {
    let config = CircuitBreakerConfig {
        cooldown: Some(Cooldown {
            duration: Duration::from_secs(60),
            failure_rate_threshold: 0.2,
        }),
        ..config()
    };
    let seen = with_gap(config, CircuitBreaker::reset, |b, clock, armed| {
        record(b, &[Outcome::Failure; 4]);
        clock.advance(Duration::from_secs(1));
        record(b, &[Outcome::Success]); // the probe closes: cooldown begins
        assert_eq!(b.state(), State::Closed);
        armed.store(true, Ordering::SeqCst);
        record(b, &ONE_IN_FOUR); // 25 %: trips under the cooldown's 20 %
        assert!(!armed.load(Ordering::SeqCst), "the reset ran in the gap");
        assert_eq!(b.state(), State::Closed, "and closed the breaker again");
    });
    let trip = seen.last().unwrap();
    assert_eq!(trip.2.failure_rate, 0.2, "the cooldown's threshold");
    assert_justified(trip, "the reported trip");
}

#[test]
fn a_reconfiguration_in_the_gap_does_not_change_the_reported_threshold() {
    let stricter_than_the_trip = |b: &CircuitBreaker| {
        b.reconfigure(CircuitBreakerConfig {
            failure_rate_threshold: 0.9,
            ..config()
        })
        .unwrap();
    };
    let seen = with_gap(config(), stricter_than_the_trip, |b, _, armed| {
        armed.store(true, Ordering::SeqCst);
        record(b, &TWO_IN_FOUR);
        assert!(!armed.load(Ordering::SeqCst), "the reconfiguration ran");
    });
    let trip = seen.last().unwrap();
    assert_eq!(trip.2.failure_rate, 0.5);
    assert_justified(trip, "the reported trip");
}

#[test]
fn a_would_trip_reports_the_thresholds_it_judged_by() {
    let looser = |b: &CircuitBreaker| {
        b.reconfigure(CircuitBreakerConfig {
            failure_rate_threshold: 0.9,
            ..config()
        })
        .unwrap();
    };
    let seen = with_gap(config(), looser, |b, _, armed| {
        b.metrics_only();
        armed.store(true, Ordering::SeqCst);
        record(b, &TWO_IN_FOUR);
        assert!(!armed.load(Ordering::SeqCst), "the reconfiguration ran");
    });
    let trip = seen.last().unwrap();
    assert_eq!(trip.2.failure_rate, 0.5);
    assert_justified(trip, "the reported trip");
}
