//! Transitions: the CAS protocol on the state word, their side effects, the
//! events they emit, and the operator controls.

use std::time::Duration;

use super::super::event::{Event, EventKind, Reason, Thresholds, Transition};
use super::super::state::{State, Word};
use super::super::window::{Window, WindowSnapshot};
use super::settings::Effective;
use super::{Inner, NEVER};
use crate::clock::{Clock, Timestamp};
use crate::rng::unit_f64;
use crate::sync::{MutexGuard, Ordering, try_lock, yield_now};

/// What an attempt to enter half-open did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Entered, and the caller holds the round's first probe slot of this
    /// generation.
    Admitted(u64),
    /// Entered without taking a probe slot.
    Entered,
    /// Another thread moved the state first.
    Lost,
    /// A reconfiguration is in progress; nothing changed.
    Reconfiguring,
}

/// Where a transition's open deadline comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpenUntil {
    /// The configured open duration for the next backoff round.
    Scheduled,
    /// The next backoff round's duration even when coming from `Open` (a
    /// failed health check counts as a failed probe round).
    NextRound,
    /// An explicit deadline (operator, Retry-After, restored snapshot).
    At(Timestamp),
}

/// What a transition was decided on: the window it judged and the
/// thresholds it judged it by. Taken when the decision is made, before the
/// state word changes, so that the event reports exactly that: an operator
/// action or a reconfiguration landing between the decision and the event
/// (clearing a cooldown, changing a threshold) cannot make a justified trip
/// look unjustified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Evidence {
    pub(crate) window: WindowSnapshot,
    pub(crate) thresholds: Thresholds,
}

impl Inner {
    /// Evidence for a decision made now on `window` by the thresholds in
    /// force (transitions that judge no rates: probes, operators, timeouts).
    pub(crate) fn evidence(&self, window: WindowSnapshot, now: Timestamp) -> Evidence {
        Evidence {
            window,
            thresholds: self.thresholds(now),
        }
    }

    /// Installs the busy word `to` if the state is still `from`.
    fn begin(&self, from: Word, to: Word) -> bool {
        !from.is_busy()
            && self
                .hot
                .state
                .compare_exchange(from.0, to.0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    fn publish(&self, to: Word) {
        self.hot.state.store(to.published().0, Ordering::Release);
        self.cold().transitions.fetch_add(1, Ordering::Relaxed);
    }

    /// Open → HalfOpen by the first call after the deadline (or a passed
    /// health check); with a quota policy the caller takes the round's first
    /// probe slot before anyone else can.
    pub(crate) fn enter_half_open(&self, from: Word, now: Timestamp) -> Entry {
        self.enter_half_open_because(from, now, Reason::OpenDurationElapsed, true)
    }

    /// Enters half-open, serialised with reconfiguration: the round starts
    /// under the half-open rules in force, and a reconfiguration that
    /// changes them after this sees the round and restarts it. Without the
    /// serialisation a round could start under a quota policy just as a
    /// ramp policy is installed, and no ramp round would ever begin. A call
    /// never waits for a reconfiguration: it is refused, and the next call
    /// enters.
    pub(crate) fn enter_half_open_because(
        &self,
        from: Word,
        now: Timestamp,
        reason: Reason,
        take_probe: bool,
    ) -> Entry {
        let Some(serial) = try_lock(&self.cold().reconfiguring) else {
            return Entry::Reconfiguring;
        };
        self.enter_half_open_serialised(from, now, reason, take_probe, Some(serial))
    }

    /// Enters half-open for a caller that already excludes reconfiguration
    /// (`serial`, released before the event is delivered, or `None` when
    /// the caller is the reconfiguration itself).
    pub(crate) fn enter_half_open_serialised(
        &self,
        from: Word,
        now: Timestamp,
        reason: Reason,
        take_probe: bool,
        serial: Option<MutexGuard<'_, ()>>,
    ) -> Entry {
        let evidence = self.evidence(WindowSnapshot::default(), now);
        let to = from.begin(State::HalfOpen);
        if !self.begin(from, to) {
            return Entry::Lost;
        }
        let seq = self.events().reserve();
        let generation = to.generation();
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        self.probe_slow().begin(generation);
        // The round has just begun: its limit cannot have passed.
        let admitted = self.with_half_open(
            |q, _| {
                self.half_open().begin(generation);
                take_probe && self.half_open().try_admit(q, generation)
            },
            |r, _| {
                self.ramp().begin(generation, now);
                take_probe
                    && self.ramp().try_admit(r, generation, now, None)
                        == super::super::half_open::ramp::RampAdmission::Admitted
            },
        );
        self.publish(to);
        drop(serial);
        self.emit_transition(seq, from, to, reason, evidence, None, now);
        if admitted {
            Entry::Admitted(generation)
        } else {
            Entry::Entered
        }
    }

    /// `from` → `Open` or `ForcedOpen`. Returns whether this call made the
    /// transition.
    pub(crate) fn transition_to_open(
        &self,
        from: Word,
        to_state: State,
        reason: Reason,
        evidence: Evidence,
        until: OpenUntil,
        now: Timestamp,
    ) -> bool {
        let to = from.begin(to_state);
        if !self.begin(from, to) {
            return false;
        }
        let seq = self.events().reserve();
        let duration = match until {
            OpenUntil::At(t) => t - now,
            OpenUntil::Scheduled | OpenUntil::NextRound => {
                let next_round = matches!(until, OpenUntil::NextRound)
                    || matches!(from.state(), State::HalfOpen | State::Open);
                let round = if next_round {
                    // Saturating: a restored snapshot may carry any round.
                    self.open_round().saturating_add(1)
                } else {
                    0
                };
                self.cold().open_round.store(round, Ordering::Relaxed);
                let mut rng = self.rng.load(Ordering::Relaxed);
                let u = unit_f64(&mut rng);
                self.rng.store(rng, Ordering::Relaxed);
                self.open_duration(round, u)
            }
        };
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        self.open_until
            .store((now + duration).as_nanos(), Ordering::Relaxed);
        self.publish(to);
        if from.admits_freely() {
            self.with_window(Window::reset);
        }
        let open = (to_state == State::Open).then_some(duration);
        self.emit_transition(seq, from, to, reason, evidence, open, now);
        true
    }

    /// `from` → `Closed`, `Disabled` or `MetricsOnly`.
    pub(crate) fn transition_to_free(
        &self,
        from: Word,
        to_state: State,
        reason: Reason,
        evidence: Evidence,
    ) -> bool {
        // A fresh window when leaving a rejecting state (nothing was sampled
        // there) and on any operator move except switching trips off, which
        // keeps the sample. The window is idle outside the free states, so
        // resetting before the CAS keeps the busy section short.
        if !from.admits_freely() || to_state != State::Disabled {
            self.with_window(Window::reset);
        }
        let to = from.begin(to_state);
        if !self.begin(from, to) {
            return false;
        }
        let seq = self.events().reserve();
        let now = self.clock.now();
        if to_state == State::Closed {
            self.cold().open_round.store(0, Ordering::Relaxed);
        }
        let recovered = if reason == Reason::ProbesSucceeded {
            now.as_nanos()
        } else {
            NEVER
        };
        self.cold().recovered_at.store(recovered, Ordering::Relaxed);
        self.entered_at.store(now.as_nanos(), Ordering::Relaxed);
        self.publish(to);
        self.emit_transition(seq, from, to, reason, evidence, None, now);
        true
    }

    /// Shadow mode crossed a threshold: report it and start a new sample,
    /// as a trip would.
    pub(crate) fn would_trip(
        &self,
        from: Word,
        reason: Reason,
        evidence: Evidence,
        now: Timestamp,
    ) {
        let to = from.begin(State::MetricsOnly);
        if !self.begin(from, to) {
            return;
        }
        let seq = self.events().reserve();
        self.publish(to);
        self.with_window(Window::reset);
        let kind = EventKind::WouldTrip {
            reason,
            window: evidence.window,
            thresholds: evidence.thresholds,
        };
        self.events().publish_with(seq, || self.event(now, kind));
    }

    /// Applies an operator's state change, whatever the current state. An
    /// action that changes nothing emits nothing and keeps the generation,
    /// so a repeated `force_open` does not make the calls in flight late;
    /// `open_until` on an open breaker only moves its deadline, and `reset`
    /// of a closed breaker only discards its sample.
    pub(crate) fn force(&self, to: State, until: Option<Timestamp>) {
        loop {
            let w = self.word();
            if w.is_busy() {
                yield_now();
                continue;
            }
            let now = self.clock.now();
            if w.state() == to {
                match (to, until) {
                    (State::Open, Some(until)) => {
                        if self.move_open_deadline(w, until, now) {
                            return;
                        }
                        continue;
                    }
                    (State::Closed, _) => {
                        let window = self.window_at(now);
                        self.with_window(Window::reset);
                        let seq = self.events().reserve();
                        self.events().publish_with(seq, || {
                            self.event(now, EventKind::WindowReset { window })
                        });
                        return;
                    }
                    _ => return,
                }
            }
            let evidence = self.evidence(self.window_at(now), now);
            let done = match to {
                State::Open | State::ForcedOpen => {
                    let until = until.map_or(OpenUntil::Scheduled, OpenUntil::At);
                    self.transition_to_open(w, to, Reason::Forced, evidence, until, now)
                }
                State::HalfOpen => matches!(
                    self.enter_half_open_because(w, now, Reason::Forced, false),
                    Entry::Entered | Entry::Admitted(_)
                ),
                State::Closed | State::Disabled | State::MetricsOnly => {
                    self.transition_to_free(w, to, Reason::Forced, evidence)
                }
            };
            if done {
                return;
            }
        }
    }

    /// Moves the deadline of the open state `w` to `until`, holding the
    /// state word busy (same state, same generation) so no call enters
    /// half-open against a half-written deadline. Returns false if the state
    /// moved first.
    fn move_open_deadline(&self, w: Word, until: Timestamp, now: Timestamp) -> bool {
        if !self.begin(w, w.held()) {
            return false;
        }
        let previous = Timestamp::from_nanos(self.open_until.load(Ordering::Relaxed));
        self.open_until.store(until.as_nanos(), Ordering::Relaxed);
        // The event's place in the order is taken while busy, as a
        // transition's is, so observers see it between the right ones.
        let seq = (previous != until).then(|| self.events().reserve());
        self.hot.state.store(w.0, Ordering::Release);
        if let Some(seq) = seq {
            let kind = EventKind::OpenDeadlineChanged { previous, until };
            self.events().publish_with(seq, || self.event(now, kind));
        }
        true
    }

    /// The thresholds in force at `now`, for events.
    pub(crate) fn thresholds(&self, now: Timestamp) -> Thresholds {
        self.thresholds_of(self.effective(now))
    }

    /// The event's form of `eff`, the thresholds a decision used, with the
    /// config version and hysteresis in force.
    pub(crate) fn thresholds_of(&self, eff: Effective) -> Thresholds {
        let (version, min_state) = self.settings.with(|s| (s.version, s.min_state_nanos()));
        Thresholds {
            minimum_calls: eff.minimum_calls,
            failure_rate: eff.failure_rate,
            slow_call_rate: eff.slow_rate,
            slow_call_duration: self.slow_call_threshold(),
            trips_allowed: eff.may_trip,
            min_state_duration: (min_state > 0).then(|| Duration::from_nanos(min_state)),
            config_version: version,
        }
    }

    pub(crate) fn event(&self, at: Timestamp, kind: EventKind) -> Event {
        Event {
            breaker: crate::sync::Arc::from(self.name.as_str()),
            at,
            wall: crate::clock::system_time_after(Duration::ZERO),
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
        evidence: Evidence,
        open_duration: Option<Duration>,
        now: Timestamp,
    ) {
        self.events().publish_with(seq, || {
            let t = Transition {
                from: from.state(),
                to: to.state(),
                reason,
                window: evidence.window,
                thresholds: evidence.thresholds,
                open_duration,
                generation: to.generation(),
            };
            self.event(now, EventKind::Transition(t))
        });
    }
}
