//! Admission: `try_acquire` in every state.

use std::time::Duration;

use super::super::half_open::ramp::RampAdmission;
use super::super::half_open::{Decision, Rules};
use super::super::permit::Rejected;
use super::super::state::{State, Word};
use super::{Admission, Inner, OpenUntil};
use crate::clock::{Clock, Timestamp};
use crate::sync::Ordering;

/// What half-open admission decided.
enum Probe {
    Admitted,
    Refused,
    Decided(Decision),
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
                    let gate = Timestamp::from_nanos(self.health_gate.load(Ordering::Acquire));
                    if now < gate {
                        // A health check runs first; business traffic waits.
                        return Err(self.reject(State::Open, Some(gate - now)));
                    }
                    if let Some(generation) = self.enter_half_open(w, now) {
                        return Ok((Admission::Probe, generation));
                    }
                }
                State::HalfOpen => {
                    let generation = w.generation();
                    if self.apply_due_pending(w, now) {
                        w = self.word();
                        continue;
                    }
                    match self.admit_probe(generation, now) {
                        Probe::Admitted => return Ok((Admission::Probe, generation)),
                        Probe::Decided(d) => {
                            self.decide_round(w, d, now);
                            let next = self.word();
                            if next == w {
                                // The decision waits for `min_state_duration`
                                // (parked); the round admits no more probes
                                // meanwhile, and asking again would decide the
                                // same thing forever.
                                return Err(self.reject(State::HalfOpen, None));
                            }
                            w = next;
                            continue;
                        }
                        Probe::Refused => {
                            self.check_half_open_timeout(w, now);
                            return Err(self.reject(State::HalfOpen, None));
                        }
                    }
                }
            }
            w = self.word();
        }
    }

    fn admit_probe(&self, generation: u64, now: Timestamp) -> Probe {
        self.settings.with(|s| match &s.rules {
            Rules::Quota(q) => {
                if self.half_open.try_admit(*q, generation) {
                    Probe::Admitted
                } else {
                    Probe::Refused
                }
            }
            Rules::Ramp(r) => match self.ramp.try_admit(r, generation, now) {
                RampAdmission::Admitted => Probe::Admitted,
                RampAdmission::NotThisTime => Probe::Refused,
                RampAdmission::Decided(d) => Probe::Decided(d),
            },
        })
    }

    #[inline]
    pub(crate) fn reject(&self, state: State, retry_after: Option<Duration>) -> Rejected {
        self.counters.add_rejected();
        Rejected::new(state, retry_after)
    }

    fn check_half_open_timeout(&self, w: Word, now: Timestamp) {
        let Some(max) = self.settings.with(|s| s.config.max_half_open_duration) else {
            return;
        };
        if now - self.entered_at() >= max {
            let snap = self.round_snapshot(w.generation());
            self.transition_to_open(
                w,
                State::Open,
                super::super::Reason::HalfOpenTimeout,
                snap,
                OpenUntil::Scheduled,
                now,
            );
        }
    }
}
