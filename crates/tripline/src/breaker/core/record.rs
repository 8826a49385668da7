//! Recording outcomes and the trip decision.

use super::super::baseline::Period;
use super::super::counters::Counter;
use super::super::event::Reason;
use super::super::half_open::{Decision, Verdict};
use super::super::state::{State, Word};
use super::super::window::{FAILURE, SLOW, Window, WindowSnapshot};
use super::settings::{Effective, reaches};
use super::{Admission, Evidence, Inner, NEVER, OpenUntil};
use crate::classify::Outcome;
use crate::clock::{Clock, Timestamp};
use crate::sync::Ordering;

/// Set in `slow_nanos` while a baseline is learning: successes feed it.
pub(crate) const LEARN_BIT: u64 = 1;

const PENDING_CLOSE: u64 = 1;
const PENDING_REOPEN: u64 = 2;
const PENDING_REOPEN_SLOW: u64 = 3;

impl Inner {
    /// Records a finished call admitted as `admission` in `generation`.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        admission: Admission,
        generation: u64,
        outcome: Outcome,
        elapsed_nanos: u64,
    ) {
        let slow_word = self.hot.slow_nanos.load(Ordering::Relaxed);
        let slow = if elapsed_nanos >= slow_word { SLOW } else { 0 };
        match (admission, outcome) {
            (Admission::Free, Outcome::Success) => {
                if slow_word & LEARN_BIT != 0 && slow == 0 {
                    self.learn(generation, elapsed_nanos);
                }
                self.record_free(generation, slow)
            }
            (Admission::Free, Outcome::Failure) => self.record_free(generation, FAILURE | slow),
            _ => self.record_other(admission, generation, outcome, elapsed_nanos, slow_word),
        }
    }

    #[cold]
    fn record_other(
        &self,
        admission: Admission,
        generation: u64,
        outcome: Outcome,
        elapsed_nanos: u64,
        slow_word: u64,
    ) {
        // Half-open relaxes the slow threshold by `slow_probe_factor`: a
        // recovering dependency is often slow before it is fast again, but a
        // probe far slower than that fails the round (reported as slow).
        let slow_probe = slow_word != NEVER
            && (elapsed_nanos as f64)
                >= (slow_word & !LEARN_BIT) as f64
                    * self.with_settings(|s| s.config.slow_probe_factor);
        let verdict = match outcome {
            Outcome::Ignored => {
                self.counters.add(Counter::Ignored, 1);
                Verdict::Neutral
            }
            Outcome::Success if slow_probe && admission == Admission::Probe => {
                self.counters.add(Counter::ProbeFailure, 1);
                Verdict::Slow
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
        if self.is_reshaped() {
            // `move`: a closure that borrowed `w` and `bits` would keep
            // them on the stack on the closed path too.
            return self
                .windows
                .with_current(move |window| self.record_into(window, w, bits));
        }
        // Called directly rather than through `with_window`'s closure: a
        // closure that two branches share is not inlined, and this is the
        // closed path.
        self.record_into(self.windows.first(), w, bits)
    }

    /// Records `bits` into `window` (the current one) under the state
    /// word `w`, evaluating when the outcome may trip.
    #[inline(always)]
    fn record_into(&self, window: &Window, w: Word, bits: u8) {
        match window {
            Window::Count(c) => {
                if c.record(bits) {
                    self.evaluate(window, w, self.clock.now());
                }
            }
            Window::Time(t) => {
                let now = self.clock.now();
                let epoch = t.current_epoch(now);
                t.record(bits, epoch);
                if bits != 0 || t.success_may_trip(epoch) {
                    self.evaluate(window, w, now);
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

    /// Feeds a healthy latency to the baseline and, once per window,
    /// lets it move the slow-call threshold.
    #[cold]
    fn learn(&self, generation: u64, nanos: u64) {
        let w = self.word();
        if w.state() != State::Closed || w.generation() != generation {
            return;
        }
        let Some(baseline) = self.baseline() else {
            return;
        };
        let samples = baseline.sample(nanos);
        let period = self.with_window(|window| match window {
            Window::Count(c) => Some(Period::Samples(c.size())),
            // Reading the clock only every 64 samples keeps learning cheap.
            Window::Time(t) if samples % 64 == 0 => Some(Period::Time(t.length_nanos())),
            Window::Time(_) => None,
        });
        let Some(period) = period else {
            return;
        };
        let now = self.clock.now();
        if !baseline.period_over(now.as_nanos(), samples, period) {
            return;
        }
        let snap = self.window_at(now);
        let eff = self.effective(now);
        // Healthy: both rates below half their thresholds.
        let calls = snap.calls.max(1);
        let healthy = !reaches(snap.failures, calls, eff.failure_rate / 2.0)
            && !reaches(snap.slow, calls, eff.slow_rate / 2.0);
        let Some(config) = self.with_settings(|s| s.config.slow_call) else {
            return;
        };
        if let Some(next) = baseline.update(&config, healthy, now.as_nanos()) {
            self.hot
                .slow_nanos
                .store(next | LEARN_BIT, Ordering::Relaxed);
        }
    }

    /// The thresholds in force at `now`.
    pub(crate) fn effective(&self, now: Timestamp) -> Effective {
        self.effective_and_min_state(now).0
    }

    /// The thresholds in force at `now` and `min_state_duration` in
    /// nanoseconds, from one load of the settings (a load costs about as
    /// much as the rest of an evaluation).
    fn effective_and_min_state(&self, now: Timestamp) -> (Effective, u64) {
        let plain = self.rules.plain_rule.load(Ordering::Acquire);
        if plain != 0 {
            let rate = |w: &crate::sync::AtomicU64| f64::from_bits(w.load(Ordering::Relaxed));
            let eff = Effective::from_plain(
                plain,
                rate(&self.rules.plain_failure_rate),
                rate(&self.rules.plain_slow_rate),
            );
            return (eff, 0);
        }
        let recovered = self.recovered_at();
        let warm = self.warm_start.load(Ordering::Relaxed);
        self.settings.with(|s| {
            let eff = s.effective(
                now.as_nanos(),
                warm,
                (recovered != NEVER).then_some(recovered),
            );
            (eff, s.min_state_nanos())
        })
    }

    /// The trip decision on `window` (the one the call just recorded
    /// into): `calls ≥ minimum_calls` and either rate at or above its
    /// threshold, compared exactly as the user's floats mean; suppressed
    /// during a `no_trip` warm-up and before `min_state_duration` has passed.
    #[cold]
    fn evaluate(&self, window: &Window, w: Word, now: Timestamp) {
        if w.state() == State::Disabled {
            return;
        }
        let snap = window.snapshot(now);
        let (eff, min_state) = self.effective_and_min_state(now);
        let slow_on = self.times_calls();
        let reason = trip_reason(&snap, &eff, slow_on);
        let held = !eff.may_trip || (now - self.entered_at()).as_nanos() < u128::from(min_state);
        // Keep re-evaluating on successes while a trip is held back or the
        // sample is still filling with bad calls in it.
        let pending =
            (reason.is_some() && held) || (snap.has_bad_calls() && snap.calls < eff.minimum_calls);
        window.evaluated(now, pending);
        let Some(reason) = reason else {
            return;
        };
        if held {
            return;
        }
        // The event carries the thresholds judged by here, not those in
        // force when it is built (see `Evidence`).
        let evidence = Evidence {
            window: snap,
            thresholds: self.thresholds_of(eff),
        };
        match w.state() {
            State::Closed => {
                self.transition_to_open(
                    w,
                    State::Open,
                    reason,
                    evidence,
                    OpenUntil::Scheduled,
                    now,
                );
            }
            State::MetricsOnly => self.would_trip(w, reason, evidence, now),
            _ => {}
        }
    }

    /// Settles a probe of the round of `generation`. Only a probe of the
    /// round in progress settles into it: once the state word carries
    /// another generation the round is over, and its probes are late
    /// however many rounds later they finish (the next round starts from an
    /// empty word, see `HalfOpenRound`).
    pub(crate) fn settle_probe(&self, generation: u64, verdict: Verdict) {
        let w = self.word();
        if w.generation() != generation || w.state() != State::HalfOpen {
            return;
        }
        let decision = self.with_half_open(
            |q, _| {
                if verdict == Verdict::Slow {
                    self.probe_slow().add(generation, 0);
                }
                self.half_open().settle(q, generation, verdict)
            },
            |r, _| {
                if verdict == Verdict::Slow {
                    self.probe_slow()
                        .add(generation, self.ramp().step(generation).index);
                }
                self.ramp().settle(r, generation, verdict)
            },
        );
        if decision == Decision::Undecided {
            return;
        }
        let w = self.word();
        if w.state() == State::HalfOpen && w.generation() == generation && !w.is_busy() {
            let reason = if verdict == Verdict::Slow {
                Reason::ProbeSlow
            } else {
                Reason::ProbeFailed
            };
            self.decide_round(w, decision, reason, self.clock.now());
        }
    }

    /// Applies a half-open round's decision (`reopen_reason` says why, if
    /// it reopens), or parks it until `min_state_duration` has passed.
    pub(crate) fn decide_round(
        &self,
        w: Word,
        decision: Decision,
        reopen_reason: Reason,
        now: Timestamp,
    ) {
        let min_state = self.min_state_nanos();
        if (now - self.entered_at()).as_nanos() < u128::from(min_state) {
            let code = match (decision, reopen_reason) {
                (Decision::Close, _) => PENDING_CLOSE,
                (_, Reason::ProbeSlow) => PENDING_REOPEN_SLOW,
                _ => PENDING_REOPEN,
            };
            self.cold()
                .pending
                .store((w.generation() << 2) | code, Ordering::Release);
            return;
        }
        let evidence = self.evidence(self.round_snapshot(w.generation()), now);
        match decision {
            Decision::Close => {
                self.transition_to_free(w, State::Closed, Reason::ProbesSucceeded, evidence);
            }
            Decision::Reopen => {
                self.transition_to_open(
                    w,
                    State::Open,
                    reopen_reason,
                    evidence,
                    OpenUntil::Scheduled,
                    now,
                );
            }
            Decision::Undecided => {}
        }
    }

    /// Whether the half-open round of `w` has decided and waits for
    /// `min_state_duration`.
    pub(crate) fn is_parked(&self, w: Word) -> bool {
        let p = self.cold_or(0, |c| c.pending.load(Ordering::Acquire));
        p != 0 && p >> 2 == w.generation()
    }

    /// Applies a parked decision of this half-open round once its time has
    /// come; returns whether it did.
    pub(crate) fn apply_due_pending(&self, w: Word, now: Timestamp) -> bool {
        let p = self.cold_or(0, |c| c.pending.load(Ordering::Acquire));
        if p == 0 || p >> 2 != w.generation() {
            return false;
        }
        let min_state = self.min_state_nanos();
        if (now - self.entered_at()).as_nanos() < u128::from(min_state) {
            return false;
        }
        let (decision, reason) = match p & 3 {
            PENDING_CLOSE => (Decision::Close, Reason::ProbesSucceeded),
            PENDING_REOPEN_SLOW => (Decision::Reopen, Reason::ProbeSlow),
            _ => (Decision::Reopen, Reason::ProbeFailed),
        };
        self.decide_round(w, decision, reason, now);
        true
    }

    /// The probe round as a window snapshot, for events.
    /// Probes that succeeded too slowly count among the round's failures
    /// for its decision; here they are reported as slow, not failed.
    pub(crate) fn round_snapshot(&self, generation: u64) -> WindowSnapshot {
        let (successes, failures, step) = self.with_half_open(
            |_, _| {
                let r = self.half_open().round(generation);
                (r.successes, r.failures, 0)
            },
            |_, _| {
                let step = self.ramp().step(generation);
                (step.successes, step.failures, step.index)
            },
        );
        let slow = self.probe_slow().count(generation, step).min(failures);
        WindowSnapshot {
            calls: successes + failures,
            failures: failures - slow,
            slow,
            slow_failures: 0,
        }
    }
}

/// Why `snap` trips under `eff`, if it does.
pub(crate) fn trip_reason(snap: &WindowSnapshot, eff: &Effective, slow_on: bool) -> Option<Reason> {
    if snap.calls == 0 || snap.calls < eff.minimum_calls {
        return None;
    }
    if reaches(snap.failures, snap.calls, eff.failure_rate) {
        Some(Reason::FailureRate)
    } else if slow_on && reaches(snap.slow, snap.calls, eff.slow_rate) {
        Some(Reason::SlowCallRate)
    } else {
        None
    }
}
