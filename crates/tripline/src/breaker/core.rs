//! The state machine: admission, recording, and transitions.
//!
//! Everything here is lock-free on the call path. Admission in a freely
//! admitting state is one load of the state word; recording is the window's
//! few atomic operations; a transition is one CAS on the state word that
//! exactly one thread wins. The winner holds the word's busy bit for a
//! handful of stores while it publishes the new state's data (deadline,
//! start time, probe round), so readers never see a state without its data;
//! nothing else ever waits for it.
//!
//! * [`admit`] — `try_acquire` in every state, half-open probe admission;
//! * [`record`] — outcomes, the trip decision;
//! * [`transition`] — the CAS protocol, events, operator controls;
//! * [`reconfig`] — live reconfiguration and state snapshots;
//! * [`settings`] — the config as the decisions read it.

mod admit;
pub(crate) mod reconfig;
mod record;
pub(crate) mod settings;
mod transition;

use std::sync::OnceLock;

use super::baseline::Baseline;
use super::config::CircuitBreakerConfig;
use super::counters::Counters;
use super::event::EventHub;
use super::half_open::ramp::{RampRound, RampRules};
use super::half_open::{HalfOpenRound, QuotaRules, Rules, SlowProbes};
use super::state::{State, Word};
use super::window::{Totals, Window, WindowCell, WindowSnapshot};
use crate::clock::{Clock, SharedClock, Timestamp, duration_to_nanos};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use settings::{Settings, SettingsCell};
use smol_str::SmolStr;

pub use reconfig::Snapshot;
pub(crate) use transition::{Entry, Evidence, OpenUntil};

/// How a permit was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// In a freely admitting state (Closed, Disabled, MetricsOnly).
    Free,
    /// As a half-open probe of its round.
    Probe,
}

/// "No such time" in the timestamp atomics, and "no slow-call threshold"
/// (even, so that it never carries [`record::LEARN_BIT`]).
const NEVER: u64 = !1;

/// The words every call reads. Read-mostly (written on transitions,
/// reconfigurations and at most once a window by the baseline), so other
/// calls reading them costs no contention; see "Layout" on [`Inner`].
#[repr(C)]
struct HotWords {
    state: AtomicU64,
    /// The slow-call threshold in nanoseconds (`NEVER` when off): fixed, or
    /// learned by the baseline. The closed path's only tunable.
    slow_nanos: AtomicU64,
    /// How many reconfigurations replaced the window. While 0 calls record
    /// into the window cell's inline window without further ado; after a
    /// reshape they go through the cell (see [`WindowCell`]).
    reshapes: AtomicU64,
}

/// Words a bad call's trip evaluation and the half-open paths read:
/// copies of the settings, so that those paths need not load them.
struct RuleWords {
    /// `1 << 63 | minimum_calls` when nothing varies the trip thresholds
    /// with time ([`Settings::plain_rule`]), 0 otherwise: a failure's trip
    /// evaluation then reads three words here instead of loading the
    /// settings.
    plain_rule: AtomicU64,
    /// The failure-rate threshold of the plain rule, as `f64` bits.
    plain_failure_rate: AtomicU64,
    /// The slow-call-rate threshold of the plain rule, as `f64` bits.
    plain_slow_rate: AtomicU64,
    /// The half-open quota rules when they are all the half-open paths
    /// need ([`Settings::plain_quota`]), 0 otherwise: a probe's admission,
    /// settlement and round decision then read this word instead of
    /// loading the settings (a load costs ~50 instructions, several per
    /// probe round).
    plain_quota: AtomicU64,
}

/// The breaker's cold part: what only transitions, half-open probes,
/// operators and some configurations touch, out of line and allocated by
/// the first of them (a breaker's first trip, usually). A million keyed
/// breakers that never trip carry one pointer for it; the calls of a
/// closed breaker never read it.
struct Cold {
    /// Transitions so far; written only by a transition's winner.
    transitions: AtomicU64,
    /// The open duration in nanoseconds when it is the same for every
    /// trip ([`Settings::plain_open_nanos`]: a fixed duration), 0 when it
    /// varies (backoff, jitter): a trip then reads this word instead of
    /// loading the settings (a load is two locked instructions, about a
    /// tenth of a trip's cost).
    plain_open: AtomicU64,
    /// Consecutive failed probe rounds since the breaker last closed.
    open_round: AtomicU64,
    /// When the breaker last closed after probing (cooldown), or `NEVER`.
    recovered_at: AtomicU64,
    /// A half-open decision waiting for `min_state_duration`:
    /// `generation << 2 | 1 (close) or 2 (reopen)`; 0 for none.
    pending: AtomicU64,
    /// While a health prober is attached, business calls do not probe an
    /// open breaker before this time.
    health_gate: AtomicU64,
    half_open: HalfOpenRound,
    ramp: RampRound,
    probe_slow: SlowProbes,
    baseline: OnceLock<Baseline>,
    /// Serialises reconfigurations (never taken on the call path).
    reconfiguring: Mutex<()>,
    /// Event subscribers and the order of delivery.
    events: EventHub,
}

impl Cold {
    fn new() -> Self {
        Cold {
            transitions: AtomicU64::new(0),
            plain_open: AtomicU64::new(0),
            open_round: AtomicU64::new(0),
            recovered_at: AtomicU64::new(NEVER),
            pending: AtomicU64::new(0),
            health_gate: AtomicU64::new(0),
            half_open: HalfOpenRound::new(),
            ramp: RampRound::new(),
            probe_slow: SlowProbes::new(),
            baseline: OnceLock::new(),
            reconfiguring: Mutex::new(()),
            events: EventHub::new(),
        }
    }
}

/// A breaker's state, shared by its handles.
///
/// # Layout
///
/// `repr(C)`, and deliberately not aligned to a cache line: glibc serves
/// an over-aligned allocation from a larger block and trims it (~130 bytes
/// lost a breaker, plus 48 of the `Arc`'s counts padded to a line), which
/// at a million keyed breakers is more than the breaker's own words. The
/// fields are placed so that for any alignment of the allocation (16 bytes
/// at least) the one word every call writes, a count window's cursor,
/// shares no line with a word other calls read:
///
/// 1. bytes 0–39: what every call reads — the clock, the state word, the
///    slow-call threshold, the reshape count;
/// 2. the window: its discriminant (every call reads it) and the count
///    window's aggregate (every record reads it, bad calls write it) at
///    40–55, then the words of bad calls and resets, then the cursor at
///    128: 88 bytes past the end of part 1 and 72 past the end of the
///    aggregate (at least 64 between nearest bytes), so a record's
///    read of the aggregate right after bumping the cursor never finds the
///    line taken by another thread's bump;
/// 3. everything written or read only on bad calls, transitions, probes,
///    rejections and reconfigurations.
///
/// A success through a breaker cold in the cache (one of a million keyed
/// breakers) touches bytes 0–63 (one or two lines) and the cursor's line.
#[repr(C)]
pub(crate) struct Inner {
    pub(crate) clock: SharedClock,
    hot: HotWords,
    windows: WindowCell,
    rules: RuleWords,
    settings: SettingsCell,
    /// Written only by the busy holder of a transition.
    entered_at: AtomicU64,
    open_until: AtomicU64,
    rng: AtomicU64,
    /// When the current warm-up started (creation or reconfiguration).
    warm_start: AtomicU64,
    /// Inline when up to 23 bytes (most keyed breakers' names): no heap
    /// block of its own, ~40 bytes a breaker less at a million of them.
    pub(crate) name: SmolStr,
    /// Allocated by the first transition, probe or operator action.
    cold: OnceLock<Box<Cold>>,
    counters: Counters,
    /// The highest successful-call count reported so far (see
    /// [`Inner::successful_reported`]).
    successful_reported: AtomicU64,
}

impl Inner {
    /// A breaker named `name` running `settings` (possibly shared with
    /// other breakers of a registry family) with `stripes` stripes.
    pub(crate) fn new(
        name: &str,
        settings: Arc<Settings>,
        clock: SharedClock,
        seed: u64,
        stripes: usize,
    ) -> Self {
        let config = &settings.config;
        let now = clock.now().as_nanos();
        let inner = Inner {
            hot: HotWords {
                state: AtomicU64::new(Word::initial(State::Closed).0),
                slow_nanos: AtomicU64::new(NEVER),
                reshapes: AtomicU64::new(0),
            },
            rules: RuleWords {
                plain_rule: AtomicU64::new(0),
                plain_failure_rate: AtomicU64::new(0),
                plain_slow_rate: AtomicU64::new(0),
                plain_quota: AtomicU64::new(0),
            },
            windows: WindowCell::new(Window::new(&config.window, stripes)),
            clock,
            entered_at: AtomicU64::new(now),
            open_until: AtomicU64::new(0),
            rng: AtomicU64::new(seed),
            warm_start: AtomicU64::new(now),
            name: SmolStr::new(name),
            cold: OnceLock::new(),
            counters: Counters::new(stripes),
            settings: SettingsCell::new(settings),
            successful_reported: AtomicU64::new(0),
        };
        inner.apply_settings_words();
        // Loom cannot see the `OnceLock` that publishes the cold part to
        // other threads: its models get it before they start any.
        #[cfg(loom)]
        inner.cold();
        inner
    }

    #[inline]
    pub(crate) fn word(&self) -> Word {
        Word(self.hot.state.load(Ordering::Acquire))
    }

    /// The cold part, allocated now if this is its first use.
    fn cold(&self) -> &Cold {
        self.cold.get_or_init(|| {
            let cold = Cold::new();
            // A reconfiguration takes the cold part before it stores new
            // settings, so a part made here either sees them or is
            // updated by it (`apply_settings_words`).
            let open = self.settings.with(Settings::plain_open_nanos);
            cold.plain_open.store(open, Ordering::Relaxed);
            Box::new(cold)
        })
    }

    /// `read` of the cold part, or `default` while it has not been needed.
    #[inline]
    fn cold_or<R>(&self, default: R, read: impl FnOnce(&Cold) -> R) -> R {
        self.cold.get().map_or(default, |c| read(c))
    }

    /// Event subscribers and the order of delivery (allocated by the
    /// first transition or subscription).
    pub(crate) fn events(&self) -> &EventHub {
        &self.cold().events
    }

    /// The ramp policy's round.
    pub(crate) fn ramp(&self) -> &RampRound {
        &self.cold().ramp
    }

    /// The quota policy's round.
    pub(crate) fn half_open(&self) -> &HalfOpenRound {
        &self.cold().half_open
    }

    /// The slow probes of the current round.
    pub(crate) fn probe_slow(&self) -> &SlowProbes {
        &self.cold().probe_slow
    }

    /// The learned slow-call baseline, if the config learns one.
    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        self.cold.get()?.baseline.get()
    }

    /// Whether a reconfiguration replaced the window the breaker was built
    /// with: one load on the state word's line. If not, calls record into
    /// the cell's inline window directly.
    #[inline(always)]
    fn is_reshaped(&self) -> bool {
        // Acquire pairs with the Release store after a reshape, so the
        // cell's swapped-in window is visible (free on x86).
        self.hot.reshapes.load(Ordering::Acquire) != 0
    }

    /// Runs `f` on the window calls record into. A closure rather than a
    /// reference: a reshaped breaker's window is freed once replaced, so it
    /// is only held for `f`'s duration.
    #[inline(always)]
    pub(crate) fn with_window<R>(&self, f: impl FnOnce(&Window) -> R) -> R {
        if self.is_reshaped() {
            self.windows.with_current(f)
        } else {
            f(self.windows.first())
        }
    }

    /// The live window's contents at `now`.
    pub(crate) fn window_at(&self, now: Timestamp) -> WindowSnapshot {
        self.with_window(|w| w.snapshot(now))
    }

    /// Everything recorded since the breaker was created, across reshapes.
    pub(crate) fn totals(&self) -> Totals {
        self.windows.totals()
    }

    /// Whether call durations matter (slow-call detection is on); when they
    /// do not, `call` skips reading the clock altogether.
    #[inline]
    pub(crate) fn times_calls(&self) -> bool {
        self.hot.slow_nanos.load(Ordering::Relaxed) != NEVER
    }

    /// Copies what the hot paths read of the settings into the hot words:
    /// after construction and after every reconfiguration.
    fn apply_settings_words(&self) {
        self.apply_slow_threshold();
        let rule = self.settings.with(Settings::plain_rule);
        // The rates first, the word that enables them last: an evaluation
        // that sees the word sees rates of this config or a later one.
        self.rules
            .plain_failure_rate
            .store(rule.failure_rate.to_bits(), Ordering::Relaxed);
        self.rules
            .plain_slow_rate
            .store(rule.slow_rate.to_bits(), Ordering::Relaxed);
        self.rules.plain_rule.store(rule.word, Ordering::Release);
        let quota = self.settings.with(Settings::plain_quota);
        self.rules.plain_quota.store(quota, Ordering::Release);
        if let Some(cold) = self.cold.get() {
            let open = self.settings.with(Settings::plain_open_nanos);
            cold.plain_open.store(open, Ordering::Release);
        }
    }

    /// The open duration of a trip in `round`, `u` its jitter draw: from
    /// the plain word when the duration is fixed, else from the settings.
    pub(crate) fn open_duration(&self, round: u64, u: f64) -> std::time::Duration {
        let plain = self.cold().plain_open.load(Ordering::Acquire);
        if plain != 0 {
            return std::time::Duration::from_nanos(plain);
        }
        self.settings.with(|s| {
            let d = s
                .config
                .open_duration
                .for_round(u32::try_from(round).unwrap_or(u32::MAX), u);
            d.max(std::time::Duration::from_nanos(s.min_state_nanos()))
        })
    }

    /// `min_state_duration` in nanoseconds: 0 without loading the
    /// settings when the plain quota word is set (it implies none).
    #[inline]
    pub(crate) fn min_state_nanos(&self) -> u64 {
        if self.rules.plain_quota.load(Ordering::Acquire) != 0 {
            return 0;
        }
        self.settings.with(Settings::min_state_nanos)
    }

    /// Runs `quota` or `ramp` on the half-open policy in force, with the
    /// round's limit (`max_half_open_duration` in nanoseconds): read from
    /// the plain quota word beside the state when it is set (see
    /// [`Settings::plain_quota`]), else from the settings. Every half-open
    /// path reads its policy here.
    #[inline]
    pub(crate) fn with_half_open<R>(
        &self,
        quota: impl FnOnce(QuotaRules, Option<u64>) -> R,
        ramp: impl FnOnce(&RampRules, Option<u64>) -> R,
    ) -> R {
        let word = self.rules.plain_quota.load(Ordering::Acquire);
        if word != 0 {
            let (q, max) = QuotaRules::from_word(word);
            return quota(q, max);
        }
        self.settings.with(|s| {
            let max = s.config.max_half_open_duration.map(duration_to_nanos);
            match &s.rules {
                Rules::Quota(q) => quota(*q, max),
                Rules::Ramp(r) => ramp(r, max),
            }
        })
    }

    /// Sets the slow-call threshold from the config: fixed, the learned
    /// baseline, or its ceiling until it has learned.
    fn apply_slow_threshold(&self) {
        let nanos =
            self.settings.with(
                |s| match (&s.config.slow_call_duration, &s.config.slow_call) {
                    (Some(d), _) => duration_to_nanos(*d).min(NEVER - 2),
                    (None, Some(b)) => {
                        let baseline = self
                            .cold()
                            .baseline
                            .get_or_init(|| Baseline::new(self.clock.now().as_nanos()));
                        let t = baseline
                            .threshold(b)
                            .unwrap_or(duration_to_nanos(b.ceiling));
                        t.min(NEVER - 2) | record::LEARN_BIT
                    }
                    (None, None) => NEVER,
                },
            );
        self.hot.slow_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Business calls do not probe an open breaker before `t` (a health
    /// prober is attached and will probe first).
    pub(crate) fn hold_business_probes_until(&self, t: Timestamp) {
        self.cold()
            .health_gate
            .store(t.as_nanos(), Ordering::Release);
    }

    // --- read-only views -------------------------------------------------

    pub(crate) fn with_settings<R>(&self, f: impl FnOnce(&Settings) -> R) -> R {
        self.settings.with(f)
    }

    /// The config in force, under this breaker's own name (shared family
    /// settings carry the family's).
    pub(crate) fn config(&self) -> CircuitBreakerConfig {
        self.settings.with(|s| self.own(&s.config))
    }

    /// `config` renamed after this breaker.
    pub(crate) fn own(&self, config: &CircuitBreakerConfig) -> CircuitBreakerConfig {
        CircuitBreakerConfig {
            name: self.name.to_string(),
            ..config.clone()
        }
    }

    /// The settings in force, to share with a sibling breaker.
    pub(crate) fn shared_settings(&self) -> Arc<Settings> {
        self.settings.load_arc()
    }

    /// Stripes of the window and counters (see `stripe.rs`).
    pub(crate) fn stripes(&self) -> usize {
        self.counters.stripes()
    }

    /// Every call this breaker has seen, whatever became of it: a cheap,
    /// allocation-free activity count (idle detection).
    pub(crate) fn activity(&self) -> u64 {
        use super::counters::Counter::*;
        let c = &self.counters;
        [
            Rejected,
            Ignored,
            LateSuccess,
            LateFailure,
            ProbeSuccess,
            ProbeFailure,
            Cancelled,
        ]
        .into_iter()
        .map(|k| c.get(k))
        .fold(self.totals().calls, u64::wrapping_add)
    }

    pub(crate) fn window_snapshot(&self) -> WindowSnapshot {
        self.window_at(self.clock.now())
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Successful calls for metrics, given `derived` (calls less failures
    /// plus successful probes and late successes, as just read): never
    /// below an earlier report. Successes are not counted on their own —
    /// the hot path pays only for calls and bad calls — and a reader that
    /// catches a failure counted before its call (the window's order, so
    /// that no failure is ever read as a success) reads one success fewer
    /// than the reader before it may have. Reporting the highest value
    /// read keeps the count monotonic, and never above the truth.
    pub(crate) fn successful_reported(&self, derived: u64) -> u64 {
        self.successful_reported
            .fetch_max(derived, Ordering::Relaxed)
            .max(derived)
    }

    pub(crate) fn transitions(&self) -> u64 {
        self.cold_or(0, |c| c.transitions.load(Ordering::Relaxed))
    }

    pub(crate) fn probes_in_flight(&self, generation: u64) -> u64 {
        self.cold_or(0, |c| c.half_open.round(generation).in_flight)
    }

    /// When the current open state ends, if the breaker is open.
    pub(crate) fn open_until(&self) -> Option<Timestamp> {
        let w = self.word();
        w.is_open_idle()
            .then(|| Timestamp::from_nanos(self.open_until.load(Ordering::Acquire)))
    }

    /// Whether `w` is an open state whose next call would enter half-open:
    /// its deadline has passed and no health check holds business probes.
    pub(crate) fn probe_due(&self, w: Word) -> bool {
        if !w.is_open_idle() {
            return false;
        }
        let now = self.clock.now().as_nanos();
        now >= self.open_until.load(Ordering::Acquire) && now >= self.health_gate()
    }

    pub(crate) fn entered_at(&self) -> Timestamp {
        Timestamp::from_nanos(self.entered_at.load(Ordering::Acquire))
    }

    /// When the current state began, the warm-up began and the breaker
    /// last recovered (see [`StateTimes`](super::StateTimes)).
    pub(crate) fn raw_times(&self) -> (u64, u64, Option<u64>) {
        let recovered = self.recovered_at();
        (
            self.entered_at.load(Ordering::Acquire),
            self.warm_start.load(Ordering::Relaxed),
            (recovered != NEVER).then_some(recovered),
        )
    }

    /// Restores what [`raw_times`](Self::raw_times) read, on a breaker
    /// being built (no call sees it yet).
    pub(crate) fn set_raw_times(&self, entered: u64, warm: u64, recovered: Option<u64>) {
        self.entered_at.store(entered, Ordering::Release);
        self.warm_start.store(warm, Ordering::Relaxed);
        match recovered {
            Some(t) => self.cold().recovered_at.store(t, Ordering::Relaxed),
            // Without a cold part it already reads as never.
            None => {
                if let Some(cold) = self.cold.get() {
                    cold.recovered_at.store(NEVER, Ordering::Relaxed);
                }
            }
        }
    }

    pub(crate) fn open_round(&self) -> u64 {
        self.cold_or(0, |c| c.open_round.load(Ordering::Relaxed))
    }

    /// When business calls may probe again (a health prober holds them
    /// until then), in nanoseconds; 0 when none is attached.
    pub(crate) fn health_gate(&self) -> u64 {
        self.cold_or(0, |c| c.health_gate.load(Ordering::Acquire))
    }

    /// When the breaker last closed after probing, or `NEVER`.
    pub(crate) fn recovered_at(&self) -> u64 {
        self.cold_or(NEVER, |c| c.recovered_at.load(Ordering::Relaxed))
    }

    /// The slow-call threshold in force, if slow detection is on.
    pub(crate) fn slow_call_threshold(&self) -> Option<std::time::Duration> {
        let n = self.hot.slow_nanos.load(Ordering::Relaxed);
        (n != NEVER).then(|| std::time::Duration::from_nanos(n & !record::LEARN_BIT))
    }

    /// Bytes this breaker owns outside `Inner` (windows, stripes, settings,
    /// the cold part once allocated).
    pub(crate) fn heap_bytes(&self) -> usize {
        // Shared settings are counted in full by each sharer: an upper bound.
        let settings = std::mem::size_of::<Settings>() + 16 + self.name.len();
        let cold = self.cold_or(0, |c| std::mem::size_of::<Cold>() + c.events.heap_bytes());
        self.windows.heap_bytes()
            + self.counters.heap_bytes()
            + name_heap_bytes(&self.name)
            + settings
            + cold
    }
}

/// Heap bytes of a breaker's name: its shared block when too long to be
/// inline.
fn name_heap_bytes(name: &SmolStr) -> usize {
    if name.is_heap_allocated() {
        16 + name.len()
    } else {
        0
    }
}

#[cfg(all(test, not(loom), target_pointer_width = "64"))]
mod layout_tests {
    use super::*;
    use crate::breaker::window::count::CountWindow;
    use std::mem::offset_of;

    /// The promises of "Layout" on [`Inner`], for any 16-byte-aligned
    /// allocation: two byte ranges can share a 64-byte line only if less
    /// than 64 bytes separate them.
    #[test]
    fn the_cursor_never_shares_a_line_with_what_every_call_reads() {
        let every_call_reads_end = offset_of!(Inner, hot) + std::mem::size_of::<HotWords>();
        assert_eq!(offset_of!(Inner, clock), 0);
        assert_eq!(every_call_reads_end, 40);
        let window = offset_of!(Inner, windows) + WindowCell::FIRST_OFFSET;
        assert_eq!(window, 40, "the discriminant right after part 1");
        // `Window` is `repr(u8)`: the tag, then the variant at 8.
        let aggregate = window + 8 + CountWindow::AGGREGATE_OFFSET;
        let cursor = window + 8 + CountWindow::CURSOR_OFFSET;
        assert_eq!((aggregate, cursor), (48, 128));
        assert!(cursor - (every_call_reads_end - 1) >= 64);
        assert!(cursor - (aggregate + 7) >= 64);
        assert_eq!(
            std::mem::align_of::<Inner>(),
            8,
            "no over-aligned allocation"
        );
    }
}
