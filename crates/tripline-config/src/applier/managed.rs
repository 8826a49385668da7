//! The breakers an applier owns, and the metrics-only twins that shadow
//! them during a rollout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tripline::clock::SharedClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, ConfigError, EventKind, Outcome, State, Subscription,
};

use crate::rollout::TrafficSample;

/// One owned breaker and its trip counter (fed by an event subscription,
/// so counting costs the breaker's hot path nothing).
pub(crate) struct Managed {
    pub(crate) breaker: CircuitBreaker,
    trips: Arc<AtomicU64>,
    _subscription: Subscription,
    /// An operator override (force-open) is in force.
    pub(crate) overridden: bool,
}

impl Managed {
    pub(crate) fn new(breaker: CircuitBreaker) -> Self {
        let trips = Arc::new(AtomicU64::new(0));
        let _subscription = count_into(
            &breaker,
            trips.clone(),
            |kind| matches!(kind, EventKind::Transition(t) if t.to == State::Open),
        );
        Managed {
            breaker,
            trips,
            _subscription,
            overridden: false,
        }
    }

    pub(crate) fn sample(&self) -> TrafficSample {
        let metrics = self.breaker.metrics();
        TrafficSample {
            requests: self.breaker.activity(),
            rejected: metrics.calls.rejected,
            trips: self.trips.load(Ordering::Relaxed),
        }
    }
}

/// A metrics-only breaker on the new config, fed the same outcomes as the
/// live one, counting the trips it would have made.
pub(crate) struct Twin {
    breaker: CircuitBreaker,
    would_trip: Arc<AtomicU64>,
    _subscription: Subscription,
}

impl Twin {
    pub(crate) fn new(
        config: CircuitBreakerConfig,
        clock: SharedClock,
    ) -> Result<Self, ConfigError> {
        let breaker = CircuitBreaker::builder()
            .config(config)
            .clock(clock)
            .build()?;
        breaker.metrics_only();
        let would_trip = Arc::new(AtomicU64::new(0));
        let _subscription = count_into(&breaker, would_trip.clone(), |kind| {
            matches!(kind, EventKind::WouldTrip { .. })
        });
        Ok(Twin {
            breaker,
            would_trip,
            _subscription,
        })
    }

    /// Judges one outcome by the new rules. A metrics-only breaker admits
    /// every call, so the permit is always granted.
    pub(crate) fn observe(&self, outcome: Outcome, elapsed: std::time::Duration) {
        if let Ok(permit) = self.breaker.try_acquire() {
            permit.record(outcome, elapsed);
        }
    }

    pub(crate) fn would_trip(&self) -> u64 {
        self.would_trip.load(Ordering::Relaxed)
    }
}

fn count_into(
    breaker: &CircuitBreaker,
    counter: Arc<AtomicU64>,
    counts: impl Fn(&EventKind) -> bool + Send + Sync + 'static,
) -> Subscription {
    breaker.subscribe(move |event| {
        if counts(&event.kind) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })
}
