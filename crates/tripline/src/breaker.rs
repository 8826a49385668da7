//! The circuit breaker.
//!
//! A breaker samples the outcomes of calls to one dependency and, when the
//! dependency is failing or slow, rejects calls locally for a while so that
//! callers' threads, connections and retries stop piling up on it.
//! It is a lock-free state machine:
//!
//! ```text
//!            failure or slow-call rate ≥ threshold
//!   Closed ───────────────────────────────────────▶ Open
//!     ▲                                              │ open duration elapsed
//!     │ probes succeeded                             ▼ (first call probes)
//!     └────────────────────────────────────────── HalfOpen
//!                 probe failed / half-open timeout ──▶ Open
//! ```
//!
//! plus the operator states `ForcedOpen`, `Disabled` and `MetricsOnly`.
//!
//! Three entry points share one core: [`CircuitBreaker::call`] for
//! synchronous code, [`CircuitBreaker::call_async`] for any async runtime,
//! and the manual [`CircuitBreaker::try_acquire`] / [`Permit::record`] pair.

mod backoff;
mod baseline;
mod call_async;
pub(crate) mod config;
mod contents;
pub(crate) mod core;
mod counters;
mod event;
mod half_open;
mod health;
mod metrics;
mod permit;
mod state;
pub(crate) mod stripe;
mod tally;
mod thread_slot;
mod times;
mod window;

use std::fmt;
use std::future::Future;
use std::time::Duration;

pub use self::core::Snapshot;
pub use backoff::{Backoff, Jitter, OpenDuration};
pub use call_async::CallAsync;
pub use config::{
    CircuitBreakerConfig, ConfigError, ConfigWarning, Cooldown, HalfOpenPolicy, InvalidUtf8,
    SlowCallBaseline, WarmUp, WarmUpMode, WindowConfig, utf8_text,
};
#[cfg(feature = "config-files")]
pub use config::{ConfigFileError, ConfigFormat};
pub use contents::{WindowBucket, WindowContents, WindowOutcome};
pub use event::{Event, EventKind, Reason, Subscription, Thresholds, Transition};
pub use health::{HealthProbe, HealthProber};
pub use metrics::{CallCounts, Metrics};
pub(crate) use permit::DetachedPermit;
pub use permit::{CallError, OwnedPermit, Permit, Rejected};
pub use state::State;
pub use tally::{TransitionCount, TransitionLookup, TransitionTally};
pub use times::StateTimes;
pub use window::WindowSnapshot;

use self::core::Inner;
use crate::classify::{Classifier, DefaultClassifier};
use crate::clock::{Clock, SharedClock, Timestamp};
use crate::rng;
use crate::setters::setters;
use crate::sync::Arc;

/// A circuit breaker: a cheap, cloneable handle; clones share one state.
///
/// ```
/// use tripline::{CircuitBreaker, CircuitBreakerConfig, State, WindowConfig};
///
/// let breaker = CircuitBreaker::try_new(CircuitBreakerConfig {
///     name: "inventory".into(),
///     window: WindowConfig::Count { size: 10 },
///     minimum_calls: 4,
///     ..Default::default()
/// })
/// .unwrap();
///
/// for _ in 0..4 {
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// assert!(breaker.call(|| Ok::<_, ()>(1)).unwrap_err().is_rejected());
/// ```
#[derive(Clone)]
pub struct CircuitBreaker {
    inner: Arc<Inner>,
}

/// Builds a [`CircuitBreaker`] with a non-default clock or jitter seed.
#[derive(Debug, Default)]
pub struct CircuitBreakerBuilder {
    config: CircuitBreakerConfig,
    clock: Option<SharedClock>,
    seed: Option<u64>,
    instance: Option<u64>,
    restore: Option<Snapshot>,
    restore_window: Option<WindowContents>,
    restore_times: Option<StateTimes>,
    stripes: Option<usize>,
    /// Settings shared with a sibling (a registry family), if any.
    shared: Option<(String, Arc<core::settings::Settings>)>,
}

impl CircuitBreakerBuilder {
    setters! {
        /// Uses `config` (validated by [`build`](Self::build)).
        config: CircuitBreakerConfig,

        /// Uses `clock` instead of the production [`MonotonicClock`](crate::clock::MonotonicClock).
        clock: Some(impl Into<SharedClock>),

        /// Seeds the jitter of the open duration, for reproducible runs. Mixed
        /// with the instance id, so replicas built with one seed still diverge.
        seed: Some(u64),
    }

    /// Sets the instance id mixed into the seed (default: a per-process
    /// counter). Give replicas distinct ids.
    pub fn instance_id(mut self, id: u64) -> Self {
        self.instance = Some(id);
        self
    }

    /// Starts the breaker in the state of `snapshot` (taken by
    /// [`CircuitBreaker::snapshot`] in an earlier process): a breaker that
    /// was open stays open until its original deadline.
    pub fn restore(mut self, snapshot: Snapshot) -> Self {
        self.restore = Some(snapshot);
        self
    }

    /// Fills the new breaker's window with `contents` (taken by
    /// [`CircuitBreaker::window_contents`] in an earlier process), after
    /// any [`restore`](Self::restore): the exact window, buckets at their
    /// times, where a snapshot's aggregate counts would land in the current
    /// bucket. Pair it with a snapshot whose window is empty.
    pub fn restore_window(mut self, contents: WindowContents) -> Self {
        self.restore_window = Some(contents);
        self
    }

    /// Starts the breaker with the moments its time-dependent settings
    /// count from (taken by [`CircuitBreaker::state_times`] in an earlier
    /// process), after any [`restore`](Self::restore): the state's start
    /// for `min_state_duration`, the warm-up's start for `warm_up`, the last
    /// recovery for `cooldown`. Without it a rebuilt breaker starts all
    /// three at its creation, so a breaker rebuilt in every short-lived
    /// process would never finish warming up, always hold its state and
    /// forget its cooldown. Times after the clock's "now" are taken as now.
    pub fn restore_times(mut self, times: StateTimes) -> Self {
        self.restore_times = Some(times);
        self
    }

    setters! {
        /// Sets how many stripes spread the breaker's hot counters across cache
        /// lines (a power of two, 1–64; default: the core count, at most 2).
        /// More stripes let more threads record at once without contending;
        /// fewer save memory — each stripe costs a time window's buckets again
        /// (~400 B for 10 buckets). The default keeps two threads side by side
        /// and a breaker within 2 KiB; raise it for a breaker that many cores
        /// call at once (4 stripes for 4 busy threads, say).
        stripes: Some(usize),
    }

    /// Builds the breaker `name` on the settings `sibling` runs with, shared
    /// rather than copied (a registry family: thousands of breakers, one
    /// config in memory). The settings were validated when the sibling got
    /// them; a later [`CircuitBreaker::reconfigure`] of either gives that one
    /// its own.
    pub(crate) fn share_settings_of(mut self, name: String, sibling: &CircuitBreaker) -> Self {
        self.shared = Some((name, sibling.inner.shared_settings()));
        self
    }

    /// Validates the config and builds the breaker.
    pub fn build(self) -> Result<CircuitBreaker, ConfigError> {
        self.build_with_warnings().map(|(b, _)| b)
    }

    /// Like [`build`](Self::build), also returning the config's warnings.
    pub fn build_with_warnings(self) -> Result<(CircuitBreaker, Vec<ConfigWarning>), ConfigError> {
        let stripes = match self.stripes {
            None => stripe::breaker_default(),
            Some(n) if n.is_power_of_two() && n <= 64 => n,
            Some(n) => {
                return Err(ConfigError::new(
                    "stripes",
                    format!("must be a power of two from 1 to 64, got {n}"),
                ));
            }
        };
        let (name, settings, mut warnings) = match self.shared {
            Some((name, settings)) => (name, settings, Vec::new()),
            None => {
                let warnings = self.config.validate()?;
                for w in &warnings {
                    tracing::warn!(target: "tripline::breaker", breaker = %self.config.name, "{w}");
                }
                let name = self.config.name.clone();
                (
                    name,
                    Arc::new(core::settings::Settings::new(self.config, 0)),
                    warnings,
                )
            }
        };
        if name.is_empty() {
            return Err(ConfigError::new("name", "must not be empty"));
        }
        let instance = self.instance.unwrap_or_else(rng::next_instance_id);
        let seed = rng::mix_seed(self.seed.unwrap_or_else(rng::random_seed), instance);
        let clock = self.clock.unwrap_or_default();
        if let Some(snapshot) = &self.restore {
            warnings.extend(restore_warnings(snapshot, &settings.config.window));
        }
        let inner = Arc::new(Inner::new(&name, settings, clock, seed, stripes));
        if let Some(snapshot) = &self.restore {
            inner.restore(snapshot);
        }
        if let Some(contents) = &self.restore_window {
            let now = inner.clock.now();
            inner.with_window(|w| contents.fill(w, now));
        }
        if let Some(times) = &self.restore_times {
            times.restore(&inner);
        }
        Ok((CircuitBreaker { inner }, warnings))
    }
}

impl CircuitBreaker {
    /// A breaker with `config` on the production clock.
    pub fn try_new(config: CircuitBreakerConfig) -> Result<Self, ConfigError> {
        Self::builder().config(config).build()
    }

    /// A builder, for a custom clock or seed.
    pub fn builder() -> CircuitBreakerBuilder {
        CircuitBreakerBuilder::default()
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The config the breaker runs with (a copy: it may be replaced by
    /// [`reconfigure`](Self::reconfigure) at any time).
    pub fn config(&self) -> CircuitBreakerConfig {
        self.inner.config()
    }

    /// The version of the config in force: 0 at creation, +1 per
    /// successful [`reconfigure`](Self::reconfigure).
    pub fn config_version(&self) -> u64 {
        self.inner.config_version()
    }

    /// Replaces the config without losing state: thresholds, policies and
    /// durations change at once; a window of another shape takes over what
    /// still fits of the old one, which is freed once no call is recording
    /// into it (so reshaping costs no memory however often it happens), and
    /// the cumulative counts of [`metrics`](Self::metrics) carry on from
    /// where they were; warm-up restarts (the quiet period after a change).
    /// An invalid config is refused and changes nothing. Emits
    /// [`EventKind::ConfigChanged`] with the old and new values.
    pub fn reconfigure(
        &self,
        config: CircuitBreakerConfig,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.inner.reconfigure(config)
    }

    /// The breaker's state as data, to restore in a later process with
    /// [`CircuitBreakerBuilder::restore`] (short-lived processes keep their
    /// protection across restarts).
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// The window's exact contents — each live bucket at its start time,
    /// or each outcome in order — to carry into a later process with
    /// [`CircuitBreakerBuilder::restore_window`].
    pub fn window_contents(&self) -> WindowContents {
        let now = self.inner.clock.now();
        self.inner.with_window(|w| WindowContents::of(w, now))
    }

    /// When the breaker entered its current state, when its warm-up began
    /// and when it last recovered: what `min_state_duration`, `warm_up` and
    /// `cooldown` count from, to carry into a later process with
    /// [`CircuitBreakerBuilder::restore_times`] (see [`StateTimes`]).
    pub fn state_times(&self) -> StateTimes {
        StateTimes::of(&self.inner)
    }

    /// Applies a state `snapshot` to this (fresh) breaker: what
    /// [`CircuitBreakerBuilder::restore`] does at build time, for breakers
    /// made elsewhere (a registry).
    pub(crate) fn restore_from(&self, snapshot: &Snapshot) {
        self.inner.restore(snapshot);
    }

    /// The slow-call threshold in force — fixed, or learned from the
    /// baseline — if slow-call detection is on.
    pub fn slow_call_threshold(&self) -> Option<Duration> {
        self.inner.slow_call_threshold()
    }

    /// The breaker's clock.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The current state. An `Open` breaker whose duration has elapsed still
    /// reads `Open` until the next call makes it half-open (transitions are
    /// lazy: an idle breaker costs nothing).
    pub fn state(&self) -> State {
        self.inner.word().state()
    }

    /// Asks to make one call: a [`Permit`] to record the outcome on, or the
    /// reason the call is refused.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        let (admission, generation) = self.inner.try_acquire()?;
        Ok(Permit::new(&self.inner, admission, generation))
    }

    /// Like [`try_acquire`](Self::try_acquire), returning a permit that owns
    /// a handle to the breaker.
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        let (admission, generation) = self.inner.try_acquire()?;
        Ok(OwnedPermit::new(self.inner.clone(), admission, generation))
    }

    /// Admits a call like [`try_acquire`](Self::try_acquire), with a
    /// permit that the caller settles against this breaker (see
    /// [`DetachedPermit`](permit::DetachedPermit)).
    #[inline]
    pub(crate) fn try_acquire_detached(&self) -> Result<DetachedPermit, Rejected> {
        let (admission, generation) = self.inner.try_acquire()?;
        Ok(DetachedPermit::new(admission, generation))
    }

    /// Runs `f` through the breaker: `Err` is a failure, `Ok` a success.
    #[inline]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.call_with(&DefaultClassifier, f)
    }

    /// Runs `f` through the breaker, classifying its result with `classifier`.
    // Always inline: in a caller's loop the admitted path's register saves
    // are then paid once per loop rather than per call, and a refusal by an
    // open breaker returns from the inline admission before any of them.
    #[inline(always)]
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        C: Classifier<T, E> + ?Sized,
    {
        let (admission, generation) = self.inner.try_acquire().map_err(CallError::Rejected)?;
        if admission == self::core::Admission::Free {
            // A free admission holds no probe slot: all an unwinding `f`
            // must not lose is the cancelled count. A one-word guard instead
            // of the permit keeps the generation in a register across `f`.
            let guard = permit::CancelOnUnwind(&self.inner);
            let start = self.start_timing();
            let result = f();
            self.settle_free(guard, generation, classifier, &result, start);
            return result.map_err(CallError::Inner);
        }
        let mut permit = Permit::new(&self.inner, admission, generation);
        let start = self.start_timing();
        let result = f();
        permit.record_in_place(classifier.classify(&result), self.elapsed_nanos(start));
        result.map_err(CallError::Inner)
    }

    /// Awaits `fut` through the breaker. Needs no particular runtime; if the
    /// returned future is dropped before `fut` completes, the call counts as
    /// cancelled (neutral). The future is a named type, [`CallAsync`], so
    /// it can be stored or returned without boxing.
    #[inline]
    pub fn call_async<T, E, F>(&self, fut: F) -> CallAsync<'_, F, DefaultClassifier>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallAsync::new(self, &DefaultClassifier, fut)
    }

    /// Awaits `fut` through the breaker, classifying with `classifier`.
    #[inline]
    pub fn call_async_with<'a, T, E, C, F>(
        &'a self,
        classifier: &'a C,
        fut: F,
    ) -> CallAsync<'a, F, C>
    where
        C: Classifier<T, E> + ?Sized,
        F: Future<Output = Result<T, E>>,
    {
        CallAsync::new(self, classifier, fut)
    }

    /// Records the result of a freely admitted call, defusing its guard.
    #[inline(always)]
    fn settle_free<T, E, C>(
        &self,
        guard: permit::CancelOnUnwind<'_>,
        generation: u64,
        classifier: &C,
        result: &Result<T, E>,
        start: Timestamp,
    ) where
        C: Classifier<T, E> + ?Sized,
    {
        std::mem::forget(guard);
        self.inner.record(
            self::core::Admission::Free,
            generation,
            classifier.classify(result),
            self.elapsed_nanos(start),
        );
    }

    /// The clock reading a timed call starts from; no read at all when
    /// slow-call detection is off.
    #[inline]
    fn start_timing(&self) -> Timestamp {
        if self.inner.times_calls() {
            self.inner.clock.now()
        } else {
            Timestamp::ZERO
        }
    }

    #[inline]
    fn elapsed_nanos(&self, start: Timestamp) -> u64 {
        if self.inner.times_calls() {
            self.inner
                .clock
                .now()
                .as_nanos()
                .saturating_sub(start.as_nanos())
        } else {
            0
        }
    }

    // --- operator controls -----------------------------

    /// Rejects every call until an operator says otherwise.
    pub fn force_open(&self) {
        self.inner.force(State::ForcedOpen, None);
    }

    /// Lets every call through and never trips, still recording.
    pub fn disable(&self) {
        self.inner.force(State::Disabled, None);
    }

    /// Shadow mode: lets every call through, records, and emits
    /// [`EventKind::WouldTrip`] where it would have tripped.
    pub fn metrics_only(&self) {
        self.inner.force(State::MetricsOnly, None);
    }

    /// Back to automatic operation: Closed, with an empty window and the
    /// backoff reset.
    pub fn reset(&self) {
        self.inner.force(State::Closed, None);
    }

    /// Opens for `duration`, then probes as usual — to honour a server's
    /// `Retry-After`.
    pub fn open_for(&self, duration: Duration) {
        let until = self.inner.clock.now() + duration;
        self.inner.force(State::Open, Some(until));
    }

    /// Opens until `until` on the breaker's clock, then probes as usual.
    pub fn open_until(&self, until: Timestamp) {
        let until = until.max(self.inner.clock.now());
        self.inner.force(State::Open, Some(until));
    }

    // --- observation ------------------------------------------------------

    /// Calls `f` with every event of this breaker, in order, until the
    /// returned [`Subscription`] is dropped.
    pub fn subscribe(&self, f: impl Fn(&Event) + Send + Sync + 'static) -> Subscription {
        let id = self.inner.events().subscribe(Arc::new(f));
        Subscription {
            hub: Arc::downgrade(&self.inner),
            id,
        }
    }

    /// The live window.
    pub fn window(&self) -> WindowSnapshot {
        self.inner.window_snapshot()
    }

    /// Counters and state for dashboards and Prometheus.
    pub fn metrics(&self) -> Metrics {
        metrics::collect(&self.inner)
    }

    /// When the current open state ends, if the breaker is `Open`.
    pub fn open_until_time(&self) -> Option<Timestamp> {
        self.inner.open_until()
    }

    /// Approximate heap and inline bytes of this breaker, for capacity
    /// planning of keyed breakers. A breaker whose window was reshaped by
    /// [`reconfigure`](Self::reconfigure) holds two windows: the one it was
    /// built with and the current one.
    pub fn memory_footprint(&self) -> usize {
        // The Arc's two counts, then the breaker and what it owns.
        16 + std::mem::size_of::<Inner>() + self.inner.heap_bytes()
    }

    /// Every call this breaker has been asked for, whatever became of it
    /// (admitted, rejected, cancelled): a cheap, allocation-free count to
    /// tell an idle breaker from a busy one.
    pub fn activity(&self) -> u64 {
        self.inner.activity()
    }

    /// Whether two handles share one breaker.
    pub fn ptr_eq(&self, other: &CircuitBreaker) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Adopts the settings `sibling` runs with (validated when it got them),
    /// keeping this breaker's state: how a registry family reconfigures
    /// thousands of breakers onto one shared config.
    pub(crate) fn adopt_settings_of(&self, sibling: &CircuitBreaker, warnings: &[ConfigWarning]) {
        self.inner
            .install(sibling.inner.shared_settings(), warnings);
    }

    /// Subscribes `f` as the breaker's one forwarder (a registry's), unless
    /// one is installed already; returns whether this call installed it.
    pub(crate) fn subscribe_forwarder_once(
        &self,
        f: impl Fn(&Event) + Send + Sync + 'static,
    ) -> bool {
        self.inner.events().subscribe_forwarder_once(Arc::new(f))
    }

    /// Drops every subscriber (used when a registry removes the breaker).
    pub fn unsubscribe_all(&self) {
        self.inner.events().unsubscribe_all();
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.inner.name)
            .field("state", &self.inner.word())
            .field("window", &self.window())
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<CircuitBreaker>();
    check::<Permit<'static>>();
    check::<OwnedPermit>();
}

/// What a restore cannot keep of `snapshot`, said rather than done
/// silently: counts that contradict each other are clamped, and a count
/// window keeps only as many calls as it holds.
fn restore_warnings(snapshot: &Snapshot, window: &WindowConfig) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    let w = &snapshot.window;
    let kept = w.clamped();
    if kept != *w {
        warnings.push(ConfigWarning {
            field: "restore.window".into(),
            message: format!(
                "the snapshot's counts contradict each other ({} calls, {} failures, {} slow, \
                 {} slow failures); restored as {} calls, {} failures, {} slow, {} slow failures",
                w.calls,
                w.failures,
                w.slow,
                w.slow_failures,
                kept.calls,
                kept.failures,
                kept.slow,
                kept.slow_failures
            ),
        });
    }
    if let WindowConfig::Count { size } = window
        && kept.calls > u64::from(*size)
    {
        warnings.push(ConfigWarning {
            field: "restore.window.calls".into(),
            message: format!(
                "{} calls do not fit a count window of {size}: {} are dropped (failures first \
                 kept, as the order of the snapshot's outcomes is unknown)",
                kept.calls,
                kept.calls - u64::from(*size)
            ),
        });
    }
    for w in &warnings {
        tracing::warn!(target: "tripline::breaker", breaker = %snapshot.name, "{w}");
    }
    warnings
}
