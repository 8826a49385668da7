//! The state machine: admission, recording, and transitions.
//!
//! Everything here is lock-free. Admission in a freely admitting state is
//! one load of the state word; recording is the window's few atomic adds;
//! a transition is one CAS on the state word that exactly one thread wins.
//! The winner holds the word's busy bit for a handful of stores while it
//! publishes the new state's data (deadline, start time), so readers never
//! see a state without its data; nothing else ever waits for it.

use std::time::Duration;

use super::backoff::unit_f64;
use super::config::CircuitBreakerConfig;
use super::event::{Event, EventHub, EventKind, Reason, Thresholds, Transition};
use super::half_open::{Decision, HalfOpenRound, Rules, Verdict};
use super::permit::Rejected;
use super::state::{State, Word};
use super::stripe::{self, Counter, Counters, Padded};
use super::window::{FAILURE, SLOW, Window, WindowSnapshot};
use crate::classify::Outcome;
use crate::clock::{Clock, SharedClock, Timestamp, duration_to_nanos};
use crate::sync::{Arc, AtomicU64, Ordering, yield_now};

/// How a permit was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// In a freely admitting state (Closed, Disabled, MetricsOnly).
    Free,
    /// As a half-open probe holding a slot of its round.
    Probe,
}

/// Where a transition's open deadline comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpenUntil {
    /// The configured open duration for the next backoff round.
    Scheduled,
    /// An explicit deadline (operator, Retry-After).
    At(Timestamp),
}

pub(crate) struct Inner {
    state: Padded<AtomicU64>,
    pub(crate) name: Arc<str>,
    pub(crate) clock: SharedClock,
    pub(crate) config: CircuitBreakerConfig,
    /// `slow_call_duration` in nanoseconds, `u64::MAX` when off.
    slow_nanos: u64,
    minimum_calls: u64,
    failure_ppm: u64,
    slow_ppm: u64,
    rules: Rules,
    window: Window,
    half_open: HalfOpenRound,
    /// Written only by the busy holder of a transition.
    entered_at: AtomicU64,
    open_until: AtomicU64,
    /// Consecutive failed probe rounds since the breaker last closed.
    open_round: AtomicU64,
    rng: AtomicU64,
    counters: Counters,
    pub(crate) events: EventHub,
}

fn ppm(rate: f64) -> u64 {
    (rate * 1e6).round() as u64
}

impl Inner {
    pub(crate) fn new(config: CircuitBreakerConfig, clock: SharedClock, seed: u64) -> Self {
        let stripes = stripe::stripes();
        let now = clock.now();
        Inner {
            state: Padded(AtomicU64::new(Word::initial(State::Closed).0)),
            name: Arc::from(config.name.as_str()),
            slow_nanos: config
                .slow_call_duration
                .map_or(u64::MAX, duration_to_nanos),
            minimum_calls: u64::from(config.minimum_calls),
            failure_ppm: ppm(config.failure_rate_threshold),
            slow_ppm: ppm(config.slow_call_rate_threshold),
            rules: Rules::new(&config.half_open),
            window: Window::new(&config.window, stripes),
            half_open: HalfOpenRound::new(),
            entered_at: AtomicU64::new(now.as_nanos()),
            open_until: AtomicU64::new(0),
            open_round: AtomicU64::new(0),
            rng: AtomicU64::new(seed),
            counters: Counters::new(stripes),
            events: EventHub::new(),
            clock,
            config,
        }
    }

    #[inline]
    pub(crate) fn word(&self) -> Word {
        Word(self.state.load(Ordering::Acquire))
    }

    /// Admission. The freely admitting states cost one load.
    #[inline(always)]
    pub(crate) fn try_acquire(&self) -> Result<(Admission, u64), Rejected> {
        let w = self.word();
        if w.admits_freely() {
            return Ok((Admission::Free, w.generation()));
        }
        self.acquire_not_free(w)
    }

    /// Admission in the other states; the open-and-waiting case first and
    /// small, so the rejected path stays cheap without bloating the closed
    /// path it is not inlined into.
    #[inline(never)]
    fn acquire_not_free(&self, w: Word) -> Result<(Admission, u64), Rejected> {
        if w.is_open_idle() {
            // The rejected path, inline: an open breaker rejects at full call
            // rate, so it must cost as little as the closed one.
            let until = self.open_until.load(Ordering::Acquire);
            let now = self.clock.now().as_nanos();
            if now < until {
                self.counters.add(Counter::Rejected, 1);
                return Err(Rejected {
                    state: State::Open,
                    retry_after: Some(Duration::from_nanos(until - now)),
                });
            }
        }
        self.acquire_slow(w)
    }

    #[cold]
    fn acquire_slow(&self, mut w: Word) -> Result<(Admission, u64), Rejected> {
        loop {
            if w.is_busy() {
                return Err(self.reject(w.state(), None));
            }
            match w.state() {
                State::Closed | State::Disabled | State::MetricsOnly => {
                    return Ok((Admission::Free, w.generation()));
                }
                State::ForcedOpen => return Err(self.reject(State::ForcedOpen, None)),
                State::Open => {
                    let until = Timestamp::from_nanos(self.open_until.load(Ordering::Acquire));
                    let now = self.clock.now();
                    if now < until {
                        return Err(self.reject(State::Open, Some(until - now)));
                    }
                    if let Some(generation) = self.enter_half_open(w, now) {
                        return Ok((Admission::Probe, generation));
                    }
                }
                State::HalfOpen => {
                    if self.half_open.try_admit(self.rules, w.generation()) {
                        return Ok((Admission::Probe, w.generation()));
                    }
                    self.check_half_open_timeout(w);
                    return Err(self.reject(State::HalfOpen, None));
                }
            }
            w = self.word();
        }
    }

    #[inline]
    fn reject(&self, state: State, retry_after: Option<Duration>) -> Rejected {
        self.counters.add(Counter::Rejected, 1);
        Rejected { state, retry_after }
    }

    /// Open → HalfOpen by the first call after the deadline; the winner
    /// takes the round's first probe slot before anyone else can.
    fn enter_half_open(&self, from: Word, now: Timestamp) -> Option<u64> {
        let to = from.begin(State::HalfOpen);
        self.begin(from, to)?;
        let seq = self.events.reserve();
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        let admitted = self.half_open.try_admit(self.rules, to.generation());
        debug_assert!(admitted, "a fresh round admits its first probe");
        self.publish(to);
        self.emit_transition(
            seq,
            from,
            to,
            Reason::OpenDurationElapsed,
            WindowSnapshot::default(),
            None,
            now,
        );
        admitted.then_some(to.generation())
    }

    fn check_half_open_timeout(&self, w: Word) {
        let Some(max) = self.config.max_half_open_duration else {
            return;
        };
        let entered = Timestamp::from_nanos(self.entered_at.load(Ordering::Acquire));
        let now = self.clock.now();
        if now - entered >= max {
            let round = self.half_open.round(w.generation());
            let snap = WindowSnapshot {
                calls: round.successes + round.failures,
                failures: round.failures,
                ..WindowSnapshot::default()
            };
            self.open(w, Reason::HalfOpenTimeout, snap, OpenUntil::Scheduled, now);
        }
    }

    /// Whether call durations matter (slow-call detection is on); when they
    /// do not, `call` skips reading the clock altogether.
    #[inline]
    pub(crate) fn times_calls(&self) -> bool {
        self.slow_nanos != u64::MAX
    }

    /// Records a finished call admitted as `admission` in `generation`.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        admission: Admission,
        generation: u64,
        outcome: Outcome,
        elapsed_nanos: u64,
    ) {
        let slow = if elapsed_nanos >= self.slow_nanos {
            SLOW
        } else {
            0
        };
        match (admission, outcome) {
            (Admission::Free, Outcome::Success) => self.record_free(generation, slow),
            (Admission::Free, Outcome::Failure) => self.record_free(generation, FAILURE | slow),
            _ => self.record_other(admission, generation, outcome, slow),
        }
    }

    #[cold]
    fn record_other(&self, admission: Admission, generation: u64, outcome: Outcome, slow: u8) {
        let verdict = match outcome {
            Outcome::Ignored => {
                self.counters.add(Counter::Ignored, 1);
                Verdict::Neutral
            }
            Outcome::Success => {
                self.counters.add(Counter::ProbeSuccess, 1);
                Verdict::Success
            }
            Outcome::Failure => {
                self.counters.add(Counter::ProbeFailure, 1);
                Verdict::Failure
            }
        };
        let _ = slow; // half-open judges failures only (seed 001 §4.3.1)
        if admission == Admission::Probe {
            self.settle_probe(generation, verdict);
        }
    }

    #[inline(always)]
    fn record_free(&self, generation: u64, bits: u8) {
        let w = self.word();
        if w.generation() != generation {
            return self.record_late(bits);
        }
        match &self.window {
            Window::Count(c) => {
                c.record(bits);
                if bits != 0 || c.has_bad_calls() {
                    self.evaluate(w, self.clock.now());
                }
            }
            Window::Time(t) => {
                let now = self.clock.now();
                let epoch = t.current_epoch(now);
                t.record(bits, epoch);
                if bits != 0 || t.success_may_trip(epoch) {
                    self.evaluate(w, now);
                }
            }
        }
    }

    /// An outcome admitted under a state that no longer holds: counted,
    /// but it must not move the new state.
    #[cold]
    fn record_late(&self, bits: u8) {
        let late = if bits & FAILURE != 0 {
            Counter::LateFailure
        } else {
            Counter::LateSuccess
        };
        self.counters.add(late, 1);
    }

    /// The trip decision: `calls ≥ minimum_calls` and either rate at or
    /// above its threshold, in exact integer arithmetic.
    #[cold]
    fn evaluate(&self, w: Word, now: Timestamp) {
        if w.state() == State::Disabled {
            return;
        }
        let snap = self.window.snapshot(now);
        self.window.evaluated(now, &snap, self.minimum_calls);
        let Some(reason) = self.trip_reason(&snap) else {
            return;
        };
        match w.state() {
            State::Closed => {
                self.open(w, reason, snap, OpenUntil::Scheduled, now);
            }
            State::MetricsOnly => self.would_trip(w, reason, snap, now),
            _ => {}
        }
    }

    pub(crate) fn trip_reason(&self, s: &WindowSnapshot) -> Option<Reason> {
        if s.calls < self.minimum_calls || s.calls == 0 {
            return None;
        }
        if s.failures >= failures_to_reach_ppm(self.failure_ppm, s.calls) {
            Some(Reason::FailureRate)
        } else if self.times_calls() && s.slow >= failures_to_reach_ppm(self.slow_ppm, s.calls) {
            Some(Reason::SlowCallRate)
        } else {
            None
        }
    }

    pub(crate) fn settle_probe(&self, generation: u64, verdict: Verdict) {
        match self.half_open.settle(self.rules, generation, verdict) {
            Decision::Undecided => {}
            Decision::Close => {
                let w = self.word();
                if w.state() == State::HalfOpen && w.generation() == generation && !w.is_busy() {
                    let snap = self.round_snapshot(generation);
                    self.close(w, Reason::ProbesSucceeded, snap);
                }
            }
            Decision::Reopen => {
                let w = self.word();
                if w.state() == State::HalfOpen && w.generation() == generation && !w.is_busy() {
                    let snap = self.round_snapshot(generation);
                    self.open(
                        w,
                        Reason::ProbeFailed,
                        snap,
                        OpenUntil::Scheduled,
                        self.clock.now(),
                    );
                }
            }
        }
    }

    fn round_snapshot(&self, generation: u64) -> WindowSnapshot {
        let r = self.half_open.round(generation);
        WindowSnapshot {
            calls: r.successes + r.failures,
            failures: r.failures,
            ..WindowSnapshot::default()
        }
    }

    /// Installs the busy word `to` if the state is still `from`.
    fn begin(&self, from: Word, to: Word) -> Option<()> {
        if from.is_busy() {
            return None;
        }
        self.state
            .compare_exchange(from.0, to.0, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| ())
    }

    fn publish(&self, to: Word) {
        self.state.store(to.published().0, Ordering::Release);
        self.counters.add(Counter::Transitions, 1);
    }

    /// `from` → Open. Returns whether this call made the transition.
    pub(crate) fn open(
        &self,
        from: Word,
        reason: Reason,
        snap: WindowSnapshot,
        until: OpenUntil,
        now: Timestamp,
    ) -> bool {
        self.transition_to_open(from, State::Open, reason, snap, until, now)
    }

    pub(crate) fn transition_to_open(
        &self,
        from: Word,
        to_state: State,
        reason: Reason,
        snap: WindowSnapshot,
        until: OpenUntil,
        now: Timestamp,
    ) -> bool {
        let to = from.begin(to_state);
        if self.begin(from, to).is_none() {
            return false;
        }
        let seq = self.events.reserve();
        let duration = match until {
            OpenUntil::At(t) => t - now,
            OpenUntil::Scheduled => {
                let round = match from.state() {
                    State::HalfOpen => self.open_round.load(Ordering::Relaxed) + 1,
                    _ => 0,
                };
                self.open_round.store(round, Ordering::Relaxed);
                let mut rng = self.rng.load(Ordering::Relaxed);
                let u = unit_f64(&mut rng);
                self.rng.store(rng, Ordering::Relaxed);
                self.config.open_duration.for_round(round as u32, u)
            }
        };
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        self.open_until
            .store((now + duration).as_nanos(), Ordering::Relaxed);
        self.publish(to);
        if from.admits_freely() {
            self.window.reset();
        }
        let open = (to_state == State::Open).then_some(duration);
        self.emit_transition(seq, from, to, reason, snap, open, now);
        true
    }

    /// `from` → Closed (or another freely admitting state), with a fresh window.
    pub(crate) fn close(&self, from: Word, reason: Reason, snap: WindowSnapshot) -> bool {
        self.transition_to_free(from, State::Closed, reason, snap)
    }

    pub(crate) fn transition_to_free(
        &self,
        from: Word,
        to_state: State,
        reason: Reason,
        snap: WindowSnapshot,
    ) -> bool {
        // A fresh window when leaving a rejecting state (nothing was sampled
        // there) and on any operator move except switching trips off, which
        // keeps the sample. The window is idle outside the free states, so
        // resetting before the CAS keeps the busy section short.
        let fresh = !from.admits_freely() || to_state != State::Disabled;
        if fresh {
            self.window.reset();
        }
        let to = from.begin(to_state);
        if self.begin(from, to).is_none() {
            return false;
        }
        let seq = self.events.reserve();
        let now = self.clock.now();
        if to_state == State::Closed {
            self.open_round.store(0, Ordering::Relaxed);
        }
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        self.publish(to);
        self.emit_transition(seq, from, to, reason, snap, None, now);
        true
    }

    fn would_trip(&self, from: Word, reason: Reason, window: WindowSnapshot, now: Timestamp) {
        let to = from.begin(State::MetricsOnly);
        if self.begin(from, to).is_none() {
            return;
        }
        let seq = self.events.reserve();
        self.publish(to);
        self.window.reset();
        let kind = EventKind::WouldTrip {
            reason,
            window,
            thresholds: self.thresholds(),
        };
        self.events.publish(seq, self.event(now, kind));
    }

    /// Applies an operator's state change, whatever the current state.
    pub(crate) fn force(&self, to: State, until: Option<Timestamp>) {
        loop {
            let w = self.word();
            if w.is_busy() {
                yield_now();
                continue;
            }
            let now = self.clock.now();
            let done = match to {
                State::Open | State::ForcedOpen => {
                    let until = until.map_or(OpenUntil::Scheduled, OpenUntil::At);
                    let snap = self.window.snapshot(now);
                    self.transition_to_open(w, to, Reason::Forced, snap, until, now)
                }
                State::HalfOpen => {
                    // Probing now: an open state whose deadline has passed.
                    self.transition_to_open(
                        w,
                        State::Open,
                        Reason::Forced,
                        WindowSnapshot::default(),
                        OpenUntil::At(now),
                        now,
                    )
                }
                State::Closed | State::Disabled | State::MetricsOnly => {
                    let snap = self.window.snapshot(now);
                    self.transition_to_free(w, to, Reason::Forced, snap)
                }
            };
            if done {
                return;
            }
        }
    }

    pub(crate) fn thresholds(&self) -> Thresholds {
        Thresholds {
            minimum_calls: self.minimum_calls,
            failure_rate: self.config.failure_rate_threshold,
            slow_call_rate: self.config.slow_call_rate_threshold,
            slow_call_duration: self.config.slow_call_duration,
        }
    }

    fn event(&self, at: Timestamp, kind: EventKind) -> Event {
        Event {
            breaker: self.name.clone(),
            at,
            kind,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_transition(
        &self,
        seq: u64,
        from: Word,
        to: Word,
        reason: Reason,
        window: WindowSnapshot,
        open_duration: Option<Duration>,
        now: Timestamp,
    ) {
        let t = Transition {
            from: from.state(),
            to: to.state(),
            reason,
            window,
            thresholds: self.thresholds(),
            open_duration,
            generation: to.generation(),
        };
        self.events
            .publish(seq, self.event(now, EventKind::Transition(t)));
    }

    // --- read-only views -------------------------------------------------

    pub(crate) fn window_snapshot(&self) -> WindowSnapshot {
        self.window.snapshot(self.clock.now())
    }

    pub(crate) fn window(&self) -> &Window {
        &self.window
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn half_open_round(&self, generation: u64) -> super::half_open::Round {
        self.half_open.round(generation)
    }

    /// When the current open state ends, if the breaker is open.
    pub(crate) fn open_until(&self) -> Option<Timestamp> {
        let w = self.word();
        (w.state() == State::Open && !w.is_busy())
            .then(|| Timestamp::from_nanos(self.open_until.load(Ordering::Acquire)))
    }

    pub(crate) fn entered_at(&self) -> Timestamp {
        Timestamp::from_nanos(self.entered_at.load(Ordering::Acquire))
    }

    pub(crate) fn open_round(&self) -> u64 {
        self.open_round.load(Ordering::Relaxed)
    }
}

/// `failures_to_reach` for a rate already in parts per million.
#[inline]
fn failures_to_reach_ppm(ppm: u64, calls: u64) -> u64 {
    (ppm * calls).div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ppm_thresholds_match_the_rate_helper() {
        for calls in 1..50 {
            for rate in [0.1, 0.2, 0.3, 0.5, 0.7, 1.0] {
                assert_eq!(
                    super::failures_to_reach_ppm(super::ppm(rate), calls),
                    super::super::half_open::failures_to_reach(rate, calls)
                );
            }
        }
    }
}
