//! Transitions reach `tracing` even when nobody subscribed to the breaker:
//! the event is built lazily, only when someone will see it, and a
//! `tracing` subscriber that wants the breaker's INFO events is someone.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

/// Keeps the message and `reason` field of every `tripline::breaker` event.
#[derive(Clone, Default)]
struct Capture {
    seen: Arc<Mutex<Vec<(String, String)>>>,
    ids: Arc<AtomicUsize>,
}

#[derive(Default)]
struct Fields {
    message: String,
    reason: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "reason" => self.reason = format!("{value:?}"),
            _ => {}
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tripline::breaker"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.ids.fetch_add(1, Ordering::Relaxed) as u64 + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut f = Fields::default();
        event.record(&mut f);
        self.seen.lock().unwrap().push((f.message, f.reason));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn tripping_breaker() -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 4 },
            minimum_calls: 2,
            failure_rate_threshold: 0.5,
            ..Default::default()
        })
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

fn trip(b: &CircuitBreaker) {
    for _ in 0..2 {
        b.try_acquire()
            .unwrap()
            .record(Outcome::Failure, Duration::ZERO);
    }
}

/// One test, not two: `tracing` caches each callsite's interest per
/// process, and a parallel test hitting the transition callsite without a
/// subscriber could cache "never" before this one installs its own.
#[test]
fn trips_are_traced_without_breaker_subscribers_and_keep_their_order() {
    // A `tracing` subscriber, no breaker subscriber: the trip is traced.
    let capture = Capture::default();
    let b = tripping_breaker();
    tracing::subscriber::with_default(capture.clone(), || trip(&b));
    {
        let seen = capture.seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].0, "circuit breaker transition");
        assert!(!seen[0].1.is_empty(), "the trip names its reason: {seen:?}");
    }

    // Nobody listening at all: the trip still happens, and a subscriber
    // that comes later sees the later transitions, in order.
    let b = tripping_breaker();
    trip(&b);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    let _sub = b.subscribe(move |e| sink.lock().unwrap().push(format!("{:?}", e.kind)));
    b.reset();
    trip(&b);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "reset and the second trip: {seen:?}");
    assert!(seen[1].contains("to: Open"), "{seen:?}");
}
