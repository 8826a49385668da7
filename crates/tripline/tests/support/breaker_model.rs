//! A plain, sequential model of the documented breaker state machine, for
//! the reference-model property test. It is written from the docs, not
//! from the implementation: a `VecDeque` for the count window, float rates
//! compared as `count / calls >= threshold`, a struct for the probe round.
//! It covers count windows (and their reshapes), the three half-open
//! policies, `max_half_open_duration` (per round, per ramp step),
//! `min_state_duration` (held trips, parked decisions), late outcomes,
//! operator actions, and cumulative counts.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use tripline::{HalfOpenPolicy, State};

pub const OPEN: Duration = Duration::from_secs(5);
pub const SLOW: Duration = Duration::from_millis(100);
pub const SLOW_PROBE: Duration = Duration::from_millis(150); // SLOW × 1.5

/// What the model needs of a config.
#[derive(Clone, Debug)]
pub struct Params {
    pub size: usize,
    pub minimum_calls: u64,
    pub failure_rate: f64,
    pub slow_rate: f64,
    pub half_open: HalfOpenPolicy,
    pub max_half_open: Option<Duration>,
    pub min_state: Option<Duration>,
}

/// One recorded outcome in the window: (failed, slow).
type Slot = (bool, bool);

/// The probe round.
#[derive(Clone, Debug, Default)]
struct Round {
    in_flight: u64,
    successes: u64,
    failures: u64,
    // Ramp only: the step, its start, asks in it.
    step: usize,
    step_started: Duration,
    asks: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Close,
    Reopen,
}

/// Cumulative counts, as `Metrics::calls` documents them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub successful: u64,
    pub failed: u64,
    pub ignored: u64,
    pub rejected: u64,
    pub cancelled: u64,
    pub late: u64,
    pub probes_succeeded: u64,
    pub probes_failed: u64,
}

/// A permit the model handed out: (probe?, generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub probe: bool,
    pub generation: u64,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub p: Params,
    pub state: State,
    pub generation: u64,
    pub entered_at: Duration,
    pub open_until: Duration,
    window: VecDeque<Slot>,
    round: Round,
    parked: Option<Decision>,
    pub counts: Counts,
}

fn reaches(count: u64, calls: u64, rate: f64) -> bool {
    count as f64 / calls as f64 >= rate
}

impl Model {
    pub fn new(p: Params) -> Self {
        Model {
            p,
            state: State::Closed,
            generation: 0,
            entered_at: Duration::ZERO,
            open_until: Duration::ZERO,
            window: VecDeque::new(),
            round: Round::default(),
            parked: None,
            counts: Counts::default(),
        }
    }

    /// (calls, failures, slow) of the live window.
    pub fn window(&self) -> (u64, u64, u64) {
        let calls = self.window.len() as u64;
        let failures = self.window.iter().filter(|s| s.0).count() as u64;
        let slow = self.window.iter().filter(|s| s.1).count() as u64;
        (calls, failures, slow)
    }

    pub fn probe_due(&self, now: Duration) -> bool {
        self.state == State::Open && now >= self.open_until
    }

    fn min_state(&self) -> Duration {
        self.p.min_state.unwrap_or(Duration::ZERO)
    }

    fn transition(&mut self, to: State, now: Duration) {
        if self.state.admits_freely() && !to.admits_freely()
            || (to.admits_freely() && (!self.state.admits_freely() || to != State::Disabled))
        {
            self.window.clear();
        }
        self.state = to;
        self.generation += 1;
        self.entered_at = now;
        self.parked = None;
    }

    fn open(&mut self, now: Duration, until: Option<Duration>, to: State) {
        self.transition(to, now);
        self.open_until = until.unwrap_or(now + OPEN.max(self.min_state()));
    }

    fn enter_half_open(&mut self, now: Duration) {
        self.transition(State::HalfOpen, now);
        self.round = Round {
            step_started: now,
            ..Round::default()
        };
    }

    /// `try_acquire`: a ticket, or a rejection.
    pub fn acquire(&mut self, now: Duration) -> Option<Ticket> {
        loop {
            match self.state {
                State::Closed | State::Disabled | State::MetricsOnly => {
                    return Some(Ticket {
                        probe: false,
                        generation: self.generation,
                    });
                }
                State::ForcedOpen => return self.reject(),
                State::Open if now < self.open_until => return self.reject(),
                State::Open => {
                    self.enter_half_open(now);
                    // The entering call is the round's first probe.
                    if self.is_ramp() {
                        self.round.asks = 1;
                    }
                    self.round.in_flight = 1;
                    return Some(Ticket {
                        probe: true,
                        generation: self.generation,
                    });
                }
                State::HalfOpen => {
                    if let Some(d) = self.parked {
                        if now - self.entered_at < self.min_state() {
                            return self.reject();
                        }
                        self.apply(d, now);
                        continue;
                    }
                    match self.admit(now) {
                        Admit::Probe => {
                            return Some(Ticket {
                                probe: true,
                                generation: self.generation,
                            });
                        }
                        Admit::No => return self.reject(),
                        Admit::Decided(d) => {
                            self.decide(d, now);
                            if self.parked.is_some() {
                                return self.reject();
                            }
                        }
                        Admit::TimedOut => self.open(now, None, State::Open),
                    }
                }
            }
        }
    }

    fn reject(&mut self) -> Option<Ticket> {
        self.counts.rejected += 1;
        None
    }

    fn is_ramp(&self) -> bool {
        matches!(self.p.half_open, HalfOpenPolicy::Ramp { .. })
    }

    /// The round's verdict as it stands.
    fn verdict(&self) -> Option<Decision> {
        let r = &self.round;
        match &self.p.half_open {
            HalfOpenPolicy::Consecutive { successes } => {
                if r.failures > 0 {
                    Some(Decision::Reopen)
                } else if r.successes >= u64::from(*successes) {
                    Some(Decision::Close)
                } else {
                    None
                }
            }
            HalfOpenPolicy::Permits {
                calls,
                failure_rate_threshold,
            } => {
                let calls = u64::from(*calls);
                if r.failures > 0 && reaches(r.failures, calls, *failure_rate_threshold) {
                    Some(Decision::Reopen)
                } else if r.successes + r.failures >= calls {
                    Some(Decision::Close)
                } else {
                    None
                }
            }
            HalfOpenPolicy::Ramp {
                failure_rate_threshold,
                minimum_calls_per_step,
                ..
            } => {
                let calls = r.successes + r.failures;
                (calls >= u64::from(*minimum_calls_per_step)
                    && reaches(r.failures, calls, *failure_rate_threshold))
                .then_some(Decision::Reopen)
            }
        }
    }

    fn admit(&mut self, now: Duration) -> Admit {
        let max = self.p.max_half_open;
        match self.p.half_open.clone() {
            HalfOpenPolicy::Ramp {
                steps,
                step_duration,
                minimum_calls_per_step,
                ..
            } => {
                loop {
                    if now - self.round.step_started >= step_duration {
                        if let Some(d) = self.verdict() {
                            return Admit::Decided(d);
                        }
                        let calls = self.round.successes + self.round.failures;
                        if calls >= u64::from(minimum_calls_per_step) {
                            if self.round.step + 1 >= steps.len() {
                                return Admit::Decided(Decision::Close);
                            }
                            self.round = Round {
                                step: self.round.step + 1,
                                step_started: now,
                                in_flight: self.round.in_flight,
                                ..Round::default()
                            };
                            continue;
                        }
                    }
                    break;
                }
                if max.is_some_and(|m| now - self.round.step_started >= m) {
                    return Admit::TimedOut;
                }
                let share = (steps[self.round.step] * 1e6).round() as u64;
                let k = self.round.asks;
                self.round.asks += 1;
                if ((k + 1) * share).div_ceil(1_000_000) > (k * share).div_ceil(1_000_000) {
                    self.round.in_flight += 1;
                    Admit::Probe
                } else {
                    Admit::No
                }
            }
            policy => {
                if max.is_some_and(|m| now - self.entered_at >= m) {
                    return Admit::TimedOut;
                }
                let r = &self.round;
                let free = match policy {
                    HalfOpenPolicy::Consecutive { successes } => {
                        r.in_flight == 0 && r.successes < u64::from(successes)
                    }
                    HalfOpenPolicy::Permits { calls, .. } => {
                        r.in_flight + r.successes + r.failures < u64::from(calls)
                    }
                    HalfOpenPolicy::Ramp { .. } => unreachable!(),
                };
                if free && self.verdict().is_none() {
                    self.round.in_flight += 1;
                    Admit::Probe
                } else {
                    Admit::No
                }
            }
        }
    }

    /// Applies a round's decision, or parks it until `min_state_duration`.
    fn decide(&mut self, d: Decision, now: Duration) {
        if now - self.entered_at < self.min_state() {
            self.parked = Some(d);
            return;
        }
        self.apply(d, now);
    }

    fn apply(&mut self, d: Decision, now: Duration) {
        match d {
            Decision::Close => self.transition(State::Closed, now),
            Decision::Reopen => self.open(now, None, State::Open),
        }
    }

    /// Records `outcome` (`Some(failed)`, or `None` for ignored) of a call
    /// that took `elapsed`, admitted with `t`.
    pub fn record(&mut self, t: Ticket, outcome: Option<bool>, elapsed: Duration, now: Duration) {
        let Some(failed) = outcome else {
            self.counts.ignored += 1;
            if t.probe {
                self.settle(t, None, now);
            }
            return;
        };
        if t.probe {
            let failed = failed || elapsed >= SLOW_PROBE;
            if failed {
                self.counts.probes_failed += 1;
                self.counts.failed += 1;
            } else {
                self.counts.probes_succeeded += 1;
                self.counts.successful += 1;
            }
            self.settle(t, Some(failed), now);
            return;
        }
        if failed {
            self.counts.failed += 1;
        } else {
            self.counts.successful += 1;
        }
        if t.generation != self.generation {
            self.counts.late += 1;
            return;
        }
        self.window.push_back((failed, elapsed >= SLOW));
        while self.window.len() > self.p.size {
            self.window.pop_front();
        }
        self.evaluate(now);
    }

    fn evaluate(&mut self, now: Duration) {
        if self.state == State::Disabled || now - self.entered_at < self.min_state() {
            return;
        }
        let (calls, failures, slow) = self.window();
        let trips = calls > 0
            && calls >= self.p.minimum_calls
            && (reaches(failures, calls, self.p.failure_rate)
                || reaches(slow, calls, self.p.slow_rate));
        if !trips {
            return;
        }
        match self.state {
            State::Closed => self.open(now, None, State::Open),
            State::MetricsOnly => {
                // Reported, and a new sample starts, as a trip would; the
                // state (and when it was entered) stays.
                self.window.clear();
                self.generation += 1;
            }
            _ => {}
        }
    }

    /// A probe of `t` settles: `Some(failed)`, or `None` for no evidence.
    fn settle(&mut self, t: Ticket, failed: Option<bool>, now: Duration) {
        if t.generation != self.generation || self.state != State::HalfOpen {
            return;
        }
        let before = self.verdict();
        if !self.is_ramp() {
            self.round.in_flight = self.round.in_flight.saturating_sub(1);
        }
        match failed {
            Some(true) => self.round.failures += 1,
            Some(false) => self.round.successes += 1,
            None => {}
        }
        let after = self.verdict();
        if let (None, Some(d)) = (before, after)
            && self.parked.is_none()
        {
            self.decide(d, now);
        }
    }

    /// A permit dropped unrecorded.
    pub fn cancel(&mut self, t: Ticket, now: Duration) {
        if t.probe {
            self.settle(t, None, now);
        }
        self.counts.cancelled += 1;
    }

    /// An operator moves the breaker to `to` (with an open deadline).
    pub fn force(&mut self, to: State, until: Option<Duration>, now: Duration) {
        if self.state == to {
            match (to, until) {
                (State::Open, Some(u)) => self.open_until = u,
                (State::Closed, _) => self.window.clear(),
                _ => {}
            }
            return;
        }
        match to {
            State::Open | State::ForcedOpen => self.open(now, until, to),
            _ => self.transition(to, now),
        }
    }

    /// A live reconfiguration to `p`: the window keeps what still fits,
    /// and a round under another half-open policy starts afresh.
    pub fn reconfigure(&mut self, p: Params, now: Duration) {
        while self.window.len() > p.size {
            self.window.pop_front();
        }
        let restart = std::mem::discriminant(&p.half_open)
            != std::mem::discriminant(&self.p.half_open)
            || p.half_open != self.p.half_open;
        self.p = p;
        if restart && self.state == State::HalfOpen {
            self.enter_half_open(now);
        }
    }
}

enum Admit {
    Probe,
    No,
    Decided(Decision),
    TimedOut,
}
