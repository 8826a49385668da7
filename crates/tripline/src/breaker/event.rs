//! Events: every decision a breaker takes, explained.
//!
//! A transition event carries what an on-call engineer needs to judge it
//! without another system: from, to, when, why, the window that caused it,
//! the thresholds in force and the next open duration. Events go to
//! subscribers (callbacks) and to `tracing`. Rejections are counted in the
//! metrics, never logged: an open breaker rejects at full call rate.
//!
//! Delivery is ordered and lock-free for the breaker: each event gets a
//! sequence number at the moment it happens (transitions allocate it while
//! they hold the state word), and whichever thread finds the next number in
//! the queue delivers it, outside any lock. A subscriber may therefore call
//! back into the breaker (force it open, say) without deadlocking.

mod display;

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use super::State;
use super::window::WindowSnapshot;
use crate::clock::Timestamp;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, lock};

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Reason {
    /// The failure rate reached its threshold with enough calls.
    FailureRate,
    /// The slow-call rate reached its threshold with enough calls.
    SlowCallRate,
    /// The open duration elapsed; the next call probes.
    OpenDurationElapsed,
    /// A half-open probe round failed.
    ProbeFailed,
    /// A half-open probe round failed because a probe succeeded, but more
    /// slowly than half-open tolerates (`slow_call_duration` ×
    /// `slow_probe_factor`): the dependency answers, but is not yet healthy.
    ProbeSlow,
    /// A half-open probe round succeeded.
    ProbesSucceeded,
    /// The half-open state outlived `max_half_open_duration`.
    HalfOpenTimeout,
    /// An operator (or a server's Retry-After, or a restored snapshot, or a
    /// reconfiguration) set the state.
    Forced,
    /// A health check succeeded while open: probe with business traffic.
    HealthCheckPassed,
    /// A health check failed or timed out while open: stay open longer.
    HealthCheckFailed,
}

impl Reason {
    /// The snake_case name used in events and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::OpenDurationElapsed => "open_duration_elapsed",
            Reason::ProbeFailed => "probe_failed",
            Reason::ProbeSlow => "probe_slow",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::HalfOpenTimeout => "half_open_timeout",
            Reason::Forced => "forced",
            Reason::HealthCheckPassed => "health_check_passed",
            Reason::HealthCheckFailed => "health_check_failed",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The thresholds in force when a decision was taken.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Thresholds {
    /// Calls needed before rates count.
    pub minimum_calls: u64,
    /// Failure rate that trips.
    pub failure_rate: f64,
    /// Slow-call rate that trips.
    pub slow_call_rate: f64,
    /// Duration from which a call is slow, if slow detection is on (fixed
    /// or learned).
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub slow_call_duration: Option<Duration>,
    /// False during a `no_trip` warm-up.
    pub trips_allowed: bool,
    /// Hysteresis in force, if any.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub min_state_duration: Option<Duration>,
    /// The config version these thresholds come from.
    pub config_version: u64,
}

/// One state change.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Transition {
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// The window (or, leaving half-open, the probe round as calls and
    /// failures) the decision was taken on.
    pub window: WindowSnapshot,
    /// Thresholds in force.
    pub thresholds: Thresholds,
    /// How long the breaker will stay open, when `to` is `Open`.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub open_duration: Option<Duration>,
    /// The state generation this transition created.
    pub generation: u64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "type", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EventKind {
    /// The state changed.
    Transition(Transition),
    /// In `MetricsOnly` (shadow) mode, the breaker would have tripped; the
    /// window is reset as a trip would, so the report repeats only when the
    /// condition recurs.
    WouldTrip {
        /// Which threshold was crossed.
        reason: Reason,
        /// The window that crossed it.
        window: WindowSnapshot,
        /// Thresholds in force.
        thresholds: Thresholds,
    },
    /// An operator (or a server's `Retry-After`) moved the deadline of an
    /// open breaker: not a transition, so the generation is kept and calls
    /// in flight stay current.
    OpenDeadlineChanged {
        /// The deadline before.
        previous: Timestamp,
        /// The deadline now.
        until: Timestamp,
    },
    /// An operator reset a closed breaker: the sample was discarded, the
    /// state and its generation kept.
    WindowReset {
        /// The sample that was discarded.
        window: WindowSnapshot,
    },
    /// The breaker was reconfigured; its state was kept.
    ConfigChanged {
        /// The new config version.
        version: u64,
        /// The config before.
        old: Box<super::config::CircuitBreakerConfig>,
        /// The config after.
        new: Box<super::config::CircuitBreakerConfig>,
        /// Validation warnings of the new config.
        warnings: Vec<String>,
    },
}

/// An event from one breaker. Its `Display` is one line a person can read:
/// `payments: closed → open (failure rate 62% ≥ 50% over 20 calls; open for 5.0s)`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Event {
    /// The breaker's name.
    pub breaker: Arc<str>,
    /// When, on the breaker's clock: what durations between events are
    /// measured on (monotonic; a [`ManualClock`](crate::ManualClock)'s
    /// virtual time in tests and simulations).
    pub at: Timestamp,
    /// When, on the wall clock (RFC 3339 in serde): what a person
    /// correlates with logs and dashboards. Read when the event is built,
    /// so only for events someone listens to.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::rfc3339"))]
    pub wall: SystemTime,
    /// What.
    pub kind: EventKind,
}

#[cfg(feature = "serde")]
mod serde_timestamp {
    use crate::clock::Timestamp;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Timestamps serialise as seconds (float) since the clock's epoch.
    impl Serialize for Timestamp {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_f64(self.as_secs_f64())
        }
    }

    impl<'de> Deserialize<'de> for Timestamp {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let secs = f64::deserialize(d)?;
            std::time::Duration::try_from_secs_f64(secs)
                .map(Timestamp::from_duration)
                .map_err(serde::de::Error::custom)
        }
    }
}

type Callback = Arc<dyn Fn(&Event) + Send + Sync>;

#[derive(Default)]
struct Queue {
    next: u64,
    delivering: bool,
    /// Whether the one-per-breaker forwarder (a registry's) is installed.
    forwarder: bool,
    /// Subscribers and queued events: allocated by the first subscription
    /// or the first event that must wait, so a breaker nobody listens to
    /// (most of a million keyed ones) carries one pointer for them.
    heard: Option<Box<Heard>>,
}

#[derive(Default)]
struct Heard {
    pending: BTreeMap<u64, Event>,
    next_id: u64,
    subscribers: Vec<(u64, Callback)>,
}

impl Queue {
    /// When nobody listens and nothing is queued before event `seq`, lets
    /// it take its place in the order without being queued (a breaker that
    /// keeps tripping pays no map insertion and removal per transition).
    fn pass_unheard(&mut self, seq: u64) -> bool {
        let unheard = self
            .heard
            .as_ref()
            .is_none_or(|h| h.subscribers.is_empty() && h.pending.is_empty())
            && !self.delivering
            && self.next == seq;
        if unheard {
            self.next += 1;
        }
        unheard
    }

    fn heard(&mut self) -> &mut Heard {
        self.heard.get_or_insert_default()
    }

    /// Adds `f`, returning its id.
    fn add(&mut self, f: Callback) -> u64 {
        let heard = self.heard();
        let id = heard.next_id;
        heard.next_id += 1;
        heard.subscribers.push((id, f));
        id
    }
}

/// Subscribers and the ordered delivery queue of one breaker.
pub(crate) struct EventHub {
    seq: AtomicU64,
    /// 1 once anything subscribed (it stays 1). Until then events take no
    /// place in the order and skip the queue's lock: a breaker nobody ever
    /// listened to pays one load per event, not a locked add and a lock
    /// round trip (three locked instructions per transition).
    listened: AtomicU64,
    queue: Mutex<Queue>,
}

/// The place of an event nobody can hear: no subscriber had ever
/// subscribed when it happened.
pub(crate) const UNHEARD: u64 = u64::MAX;

impl EventHub {
    pub(crate) fn new() -> Self {
        EventHub {
            seq: AtomicU64::new(0),
            listened: AtomicU64::new(0),
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Reserves the delivery position of an event happening now
    /// ([`UNHEARD`] while nothing ever subscribed).
    ///
    /// Called after the transition's state-word CAS, so the flag is read in
    /// state order: a transition that saw it set happens before any later
    /// transition's read, which sees it set too. Events are therefore
    /// delivered without gaps from the first one that reserved a place; one
    /// racing with the first subscription may go unheard, as if it had
    /// happened just before it.
    pub(crate) fn reserve(&self) -> u64 {
        if self.listened.load(Ordering::Acquire) == 0 {
            return UNHEARD;
        }
        self.seq.fetch_add(1, Ordering::AcqRel)
    }

    /// Marks the hub listened to, under the queue's lock: the order starts
    /// at the next reserved place (nothing reserved one before).
    fn listen(&self, q: &mut Queue) {
        if self.listened.load(Ordering::Relaxed) == 0 {
            q.next = self.seq.load(Ordering::Acquire);
            self.listened.store(1, Ordering::Release);
        }
    }

    /// Bytes of the subscribers' part, once a subscription or a waiting
    /// event allocated it (the subscribers themselves are the caller's).
    pub(crate) fn heap_bytes(&self) -> usize {
        lock(&self.queue).heard.as_ref().map_or(0, |h| {
            std::mem::size_of::<Heard>()
                + h.subscribers.capacity() * std::mem::size_of::<(u64, Callback)>()
        })
    }

    pub(crate) fn subscribe(&self, f: Callback) -> u64 {
        let mut q = lock(&self.queue);
        self.listen(&mut q);
        q.add(f)
    }

    /// Subscribes `f` unless a forwarder was subscribed before: the check
    /// and the insertion happen under one lock, so racing installers (a
    /// registry's first subscription and a concurrent creation) install it
    /// exactly once.
    pub(crate) fn subscribe_forwarder_once(&self, f: Callback) -> bool {
        let mut q = lock(&self.queue);
        if q.forwarder {
            return false;
        }
        q.forwarder = true;
        self.listen(&mut q);
        q.add(f);
        true
    }

    pub(crate) fn unsubscribe(&self, id: u64) {
        if let Some(h) = &mut lock(&self.queue).heard {
            h.subscribers.retain(|(i, _)| *i != id);
        }
    }

    pub(crate) fn unsubscribe_all(&self) {
        let mut q = lock(&self.queue);
        if let Some(h) = &mut q.heard {
            h.subscribers.clear();
        }
        q.forwarder = false;
    }

    /// Like [`publish`](Self::publish), building the event only if somebody
    /// will see it: a subscriber, an event queued before it, or a `tracing`
    /// subscriber that wants the breaker's INFO events. A breaker that trips
    /// all the time with nobody listening pays only its place in the order,
    /// not a window snapshot, a settings load and a name clone per event.
    pub(crate) fn publish_with(&self, seq: u64, build: impl FnOnce() -> Event) {
        let traced = tracing::enabled!(target: "tripline::breaker", tracing::Level::INFO);
        if seq == UNHEARD {
            if traced {
                trace(&build());
            }
            return;
        }
        if !traced && lock(&self.queue).pass_unheard(seq) {
            return;
        }
        self.publish(seq, build());
    }

    /// Queues the event reserved as `seq` and delivers every event that is
    /// next in line, unless another thread is already delivering.
    fn publish(&self, seq: u64, event: Event) {
        trace(&event);
        if seq == UNHEARD {
            return;
        }
        let mut q = lock(&self.queue);
        if q.pass_unheard(seq) {
            return;
        }
        q.heard().pending.insert(seq, event);
        if q.delivering {
            return;
        }
        q.delivering = true;
        loop {
            let next = q.next;
            let Some(event) = q.heard().pending.remove(&next) else {
                q.delivering = false;
                return;
            };
            q.next += 1;
            let subscribers: Vec<Callback> = q
                .heard()
                .subscribers
                .iter()
                .map(|(_, f)| f.clone())
                .collect();
            drop(q);
            for f in subscribers {
                // A panicking subscriber must not stop delivery to the others
                // nor leave the queue marked as delivering.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&event)));
            }
            q = lock(&self.queue);
        }
    }
}

fn trace(event: &Event) {
    match &event.kind {
        EventKind::Transition(t) => tracing::info!(
            target: "tripline::breaker",
            breaker = %event.breaker,
            at = ?event.at,
            from = %t.from,
            to = %t.to,
            reason = %t.reason,
            calls = t.window.calls,
            failures = t.window.failures,
            slow = t.window.slow,
            failure_rate = t.window.failure_rate(),
            slow_call_rate = t.window.slow_call_rate(),
            failure_rate_threshold = t.thresholds.failure_rate,
            slow_call_rate_threshold = t.thresholds.slow_call_rate,
            minimum_calls = t.thresholds.minimum_calls,
            open_duration = ?t.open_duration,
            generation = t.generation,
            "circuit breaker transition"
        ),
        EventKind::ConfigChanged {
            version, warnings, ..
        } => tracing::info!(
            target: "tripline::breaker",
            breaker = %event.breaker,
            version,
            warnings = ?warnings,
            "circuit breaker reconfigured"
        ),
        EventKind::OpenDeadlineChanged { previous, until } => tracing::info!(
            target: "tripline::breaker",
            breaker = %event.breaker,
            previous = ?previous,
            until = ?until,
            "circuit breaker open deadline changed"
        ),
        EventKind::WindowReset { window } => tracing::info!(
            target: "tripline::breaker",
            breaker = %event.breaker,
            calls = window.calls,
            failures = window.failures,
            slow = window.slow,
            "circuit breaker window reset"
        ),
        EventKind::WouldTrip { reason, window, .. } => tracing::warn!(
            target: "tripline::breaker",
            breaker = %event.breaker,
            reason = %reason,
            calls = window.calls,
            failures = window.failures,
            slow = window.slow,
            "circuit breaker would trip (metrics-only mode)"
        ),
    }
}

/// Keeps a subscription alive; dropping it unsubscribes.
#[must_use = "dropping a Subscription unsubscribes at once"]
pub struct Subscription {
    pub(crate) hub: std::sync::Weak<super::core::Inner>,
    pub(crate) id: u64,
}

impl Subscription {
    /// Keeps the callback subscribed for the breaker's whole life.
    pub fn detach(mut self) {
        self.hub = std::sync::Weak::new();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(inner) = self.hub.upgrade() {
            inner.events().unsubscribe(self.id);
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish()
    }
}
