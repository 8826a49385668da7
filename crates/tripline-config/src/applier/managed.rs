//! The breakers and registry families an applier owns, and the
//! metrics-only twins that shadow them during a rollout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tripline::clock::SharedClock;
use tripline::registry::{RegistryKey, RegistrySubscription};
use tripline::{
    BreakerRegistry, CircuitBreaker, CircuitBreakerConfig, ConfigError, EventKind, Outcome, State,
    Subscription,
};

use crate::document::OverrideState;
use crate::rollout::TrafficSample;

/// What a document's table configures: one breaker, or a registry family
/// (every breaker of a `BreakerRegistry` that follows its template).
pub(crate) enum Target {
    Breaker(CircuitBreaker),
    Family(Arc<dyn Family>),
}

/// A `BreakerRegistry<K>` with its key type erased.
pub(crate) trait Family: Send + Sync {
    fn config(&self) -> CircuitBreakerConfig;
    fn reconfigure(&self, config: CircuitBreakerConfig) -> Result<(), ConfigError>;
    /// (requests, rejected) summed over the family's live breakers.
    fn traffic(&self) -> (u64, u64);
    /// Holds every breaker, present and future, in an operator state, or
    /// lifts the hold.
    fn hold(&self, state: Option<State>);
    /// The state the family is held in, if any.
    fn held(&self) -> Option<State>;
    /// Since when it is held, on its clock.
    fn held_since(&self) -> Option<tripline::clock::Timestamp>;
}

impl<K: RegistryKey> Family for BreakerRegistry<K> {
    fn config(&self) -> CircuitBreakerConfig {
        self.family_config()
    }

    fn reconfigure(&self, config: CircuitBreakerConfig) -> Result<(), ConfigError> {
        self.reconfigure_family(config).map(drop)
    }

    fn traffic(&self) -> (u64, u64) {
        let (mut requests, mut rejected) = (0, 0);
        self.for_each_breaker(|_, b| {
            requests += b.activity();
            rejected += b.metrics().calls.rejected;
        });
        (requests, rejected)
    }

    fn hold(&self, state: Option<State>) {
        // Only operator states come here (from `OverrideState`), which the
        // registry never refuses.
        if let Err(e) = self.hold_family(state) {
            tracing::error!(family = %self.family(), "tripline-config: family hold refused: {e}");
        }
    }

    fn held(&self) -> Option<State> {
        self.family_hold()
    }

    fn held_since(&self) -> Option<tripline::clock::Timestamp> {
        self.family_held_since()
    }
}

/// Keeps a trip-counting subscription alive.
enum Keep {
    Breaker { _held: Subscription },
    Family { _held: RegistrySubscription },
}

/// One owned target and its trip counter (fed by an event subscription,
/// so counting costs the breakers' hot path nothing).
pub(crate) struct Managed {
    target: Target,
    trips: Arc<AtomicU64>,
    _subscription: Keep,
    /// A local operator override (the admin API's) is in force.
    pub(crate) overridden: bool,
    /// The fleet override this applier put the breaker in, if any.
    pub(crate) fleet: Option<OverrideState>,
    /// The config its owner gave it (the proxy file's, the builder's, or
    /// the library's defaults for one the applier built): what a pushed
    /// table patches. Never a pushed config, so a field a later document
    /// stops naming goes back to the owner's value.
    pub(crate) base: CircuitBreakerConfig,
}

fn is_trip(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Transition(t) if t.to == State::Open)
}

impl Managed {
    pub(crate) fn new(breaker: CircuitBreaker) -> Self {
        let trips = Arc::new(AtomicU64::new(0));
        let keep = Keep::Breaker {
            _held: count_into(&breaker, trips.clone(), is_trip),
        };
        Managed {
            base: breaker.config(),
            target: Target::Breaker(breaker),
            trips,
            _subscription: keep,
            overridden: false,
            fleet: None,
        }
    }

    pub(crate) fn family<K: RegistryKey>(registry: BreakerRegistry<K>) -> Self {
        let trips = Arc::new(AtomicU64::new(0));
        let counter = trips.clone();
        let keep = Keep::Family {
            _held: registry.subscribe(move |_, event| {
                if is_trip(&event.kind) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }),
        };
        Managed {
            base: registry.family_config(),
            target: Target::Family(Arc::new(registry)),
            trips,
            _subscription: keep,
            overridden: false,
            fleet: None,
        }
    }

    /// The breaker, unless this is a family (whose breakers the registry hands out).
    pub(crate) fn breaker(&self) -> Option<&CircuitBreaker> {
        match &self.target {
            Target::Breaker(b) => Some(b),
            Target::Family(_) => None,
        }
    }

    pub(crate) fn config(&self) -> CircuitBreakerConfig {
        match &self.target {
            Target::Breaker(b) => b.config(),
            Target::Family(f) => f.config(),
        }
    }

    /// Live reconfiguration, state kept (a family: every breaker on the
    /// template, present and future).
    pub(crate) fn reconfigure(&self, config: CircuitBreakerConfig) -> Result<(), ConfigError> {
        match &self.target {
            Target::Breaker(b) => b.reconfigure(config).map(drop),
            Target::Family(f) => f.reconfigure(config),
        }
    }

    /// Holds the target in `state`: the breaker, or every breaker of the
    /// family, present and future.
    pub(crate) fn hold(&self, state: OverrideState) {
        match &self.target {
            Target::Breaker(b) => state.apply(b),
            Target::Family(f) => f.hold(Some(state.state())),
        }
    }

    /// Back to automatic operation (a family: the breakers still in the
    /// held state reset).
    pub(crate) fn release(&self) {
        match &self.target {
            Target::Breaker(b) => b.reset(),
            Target::Family(f) => f.hold(None),
        }
    }

    /// A family's hold: its state and since when; `None` for a single
    /// breaker or a family not held.
    pub(crate) fn family_hold(&self) -> Option<(State, tripline::clock::Timestamp)> {
        match &self.target {
            Target::Breaker(_) => None,
            Target::Family(f) => f.held().zip(f.held_since()),
        }
    }

    /// Whether the target is in `state` (a family: held in it).
    pub(crate) fn is_in(&self, state: OverrideState) -> bool {
        match &self.target {
            Target::Breaker(b) => b.state() == state.state(),
            Target::Family(f) => f.held() == Some(state.state()),
        }
    }

    pub(crate) fn sample(&self) -> TrafficSample {
        let (requests, rejected) = match &self.target {
            Target::Breaker(b) => (b.activity(), b.metrics().calls.rejected),
            Target::Family(f) => f.traffic(),
        };
        TrafficSample {
            requests,
            rejected,
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
