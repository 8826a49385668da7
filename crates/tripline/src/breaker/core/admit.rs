//! Admission: `try_acquire` in every state.

use std::time::Duration;

use super::super::event::Reason;
use super::super::half_open::Decision;
use super::super::half_open::ramp::RampAdmission;
use super::super::permit::Rejected;
use super::super::state::{State, Word};
use super::{Admission, Entry, Inner, OpenUntil};
use crate::clock::{Clock, Timestamp};
use crate::sync::Ordering;

/// What half-open admission decided.
enum Probe {
    Admitted,
    Refused,
    Decided(Decision),
    /// The round (or the ramp's current step) outlived
    /// `max_half_open_duration`.
    TimedOut,
}

impl Inner {
    /// Admission. The freely admitting states cost one load; an open
    /// breaker rejecting before its deadline costs three loads and a
    /// counter bump, all inline (it rejects at the full call rate).
    #[inline(always)]
    pub(crate) fn try_acquire(&self) -> Result<(Admission, u64), Rejected> {
        let w = self.word();
        if w.admits_freely() {
            return Ok((Admission::Free, w.generation()));
        }
        if w.is_open_idle() {
            let until = self.open_until.load(Ordering::Acquire);
            let now = self.clock.now().as_nanos();
            if now < until {
                self.counters.add_rejected();
                return Err(Rejected::after_nanos(State::Open, until - now));
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
            let now = self.clock.now();
            match w.state() {
                State::Closed | State::Disabled | State::MetricsOnly => {
                    return Ok((Admission::Free, w.generation()));
                }
                State::ForcedOpen => return Err(self.reject(State::ForcedOpen, None)),
                State::Open => {
                    let until = Timestamp::from_nanos(self.open_until.load(Ordering::Acquire));
                    if now < until {
                        return Err(self.reject(State::Open, Some(until - now)));
                    }
                    let gate = Timestamp::from_nanos(self.health_gate());
                    if now < gate {
                        // A health check runs first; business traffic waits.
                        return Err(self.reject(State::Open, Some(gate - now)));
                    }
                    match self.enter_half_open(w, now) {
                        Entry::Admitted(generation) => return Ok((Admission::Probe, generation)),
                        Entry::Reconfiguring => return Err(self.reject(State::Open, None)),
                        Entry::Entered | Entry::Lost => {}
                    }
                }
                State::HalfOpen => {
                    let generation = w.generation();
                    if self.apply_due_pending(w, now) {
                        w = self.word();
                        continue;
                    }
                    if self.is_parked(w) {
                        // The round has decided and waits for
                        // `min_state_duration`: it admits no more probes.
                        return Err(self.reject(State::HalfOpen, None));
                    }
                    match self.admit_probe(generation, now) {
                        Probe::Admitted => return Ok((Admission::Probe, generation)),
                        Probe::Decided(d) => {
                            self.decide_round(w, d, Reason::ProbeFailed, now);
                            let next = self.word();
                            if next == w {
                                // Parked, or another thread is applying it.
                                return Err(self.reject(State::HalfOpen, None));
                            }
                            w = next;
                            continue;
                        }
                        Probe::TimedOut => {
                            self.time_out_half_open(w, now);
                            w = self.word();
                            continue;
                        }
                        Probe::Refused => return Err(self.reject(State::HalfOpen, None)),
                    }
                }
            }
            w = self.word();
        }
    }

    /// Admits a probe into the round of `generation`, unless the round (for
    /// a quota policy) or its current step (for a ramp, whose steps together
    /// are meant to outlast the limit) has run for `max_half_open_duration`:
    /// checked on every admission, so neither a probe that never finishes
    /// nor a round with free slots can keep an expired round alive.
    fn admit_probe(&self, generation: u64, now: Timestamp) -> Probe {
        self.with_half_open(
            |q, max| {
                let age = now.as_nanos().saturating_sub(self.entered_at().as_nanos());
                if max.is_some_and(|max| age >= max) {
                    Probe::TimedOut
                } else if self.half_open().try_admit(q, generation) {
                    Probe::Admitted
                } else {
                    Probe::Refused
                }
            },
            |r, max| match self.ramp().try_admit(r, generation, now, max) {
                RampAdmission::Admitted => Probe::Admitted,
                RampAdmission::NotThisTime => Probe::Refused,
                RampAdmission::Decided(d) => Probe::Decided(d),
                RampAdmission::TimedOut => Probe::TimedOut,
            },
        )
    }

    #[inline]
    pub(crate) fn reject(&self, state: State, retry_after: Option<Duration>) -> Rejected {
        self.counters.add_rejected();
        Rejected::new(state, retry_after)
    }

    fn time_out_half_open(&self, w: Word, now: Timestamp) {
        let evidence = self.evidence(self.round_snapshot(w.generation()), now);
        self.transition_to_open(
            w,
            State::Open,
            Reason::HalfOpenTimeout,
            evidence,
            OpenUntil::Scheduled,
            now,
        );
    }
}
