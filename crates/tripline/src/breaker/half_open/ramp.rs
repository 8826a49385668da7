//! Ramp-up probing: admit a rising share of traffic, judging each step on
//! its own sample.
//!
//! # Admission without locks or randomness
//!
//! Within a step admitting share `p`, the k-th call that asks (from 0) is
//! admitted iff `⌈(k+1)·p⌉ > ⌈k·p⌉`: exactly `⌈n·p⌉` of the first `n`
//! callers get through, evenly spread, the very first one included (so a
//! recovering dependency is probed at once), and the decision is one
//! `fetch_add` on a step counter. No RNG means no shared generator to contend on and a
//! reproducible simulator.
//!
//! # State
//!
//! `outcomes` = `tag:16 | step:8 | successes:20 | failures:20`, `asks` =
//! `tag:16 | step:8 | count:40`, plus the step's start time. `tag` is the
//! low 16 bits of the half-open generation: the transition into half-open
//! initialises all three while it holds the state word busy, so every
//! caller sees a consistent start. Advancing a step is a CAS on `outcomes`
//! (exactly one caller wins), after which the winner resets `asks` and the
//! start time; a probe settling during the switch is credited to the new
//! step, which can only make the new step's judgement more cautious.

use std::time::Duration;

use super::Decision;
use super::Verdict;
use crate::clock::{Timestamp, duration_to_nanos};
use crate::sync::{AtomicU64, Ordering};

/// Precomputed ramp rules.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RampRules {
    /// Share of each step in parts per million: the resolution of the
    /// admission share, which is a traffic fraction, not a judgement.
    steps_ppm: Vec<u64>,
    step_nanos: u64,
    /// A step fails when failures / calls reaches this, compared exactly
    /// as the closed state compares its rates.
    fail_rate: f64,
    min_calls: u64,
}

impl RampRules {
    pub(crate) fn new(steps: &[f64], step: Duration, failure_rate: f64, min_calls: u32) -> Self {
        RampRules {
            steps_ppm: steps.iter().map(|s| (s * 1e6).round() as u64).collect(),
            step_nanos: duration_to_nanos(step).max(1),
            fail_rate: failure_rate,
            min_calls: u64::from(min_calls.max(1)),
        }
    }

    fn last_step(&self) -> u64 {
        self.steps_ppm.len().saturating_sub(1) as u64
    }

    fn share_ppm(&self, step: u64) -> u64 {
        self.steps_ppm
            .get(step as usize)
            .copied()
            .unwrap_or(1_000_000)
    }

    /// Whether `failures` out of `calls` fails a step.
    fn fails(&self, calls: u64, failures: u64) -> bool {
        calls >= self.min_calls
            && crate::breaker::core::settings::reaches(failures, calls, self.fail_rate)
    }
}

const TAG_SHIFT: u32 = 48;
const STEP_SHIFT: u32 = 40;
const FIELD: u64 = (1 << 20) - 1;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) index: u64,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

impl Step {
    fn decode(word: u64) -> (u64, Step) {
        (
            word >> TAG_SHIFT,
            Step {
                index: (word >> STEP_SHIFT) & 0xFF,
                successes: (word >> 20) & FIELD,
                failures: word & FIELD,
            },
        )
    }

    fn encode(self, tag: u64) -> u64 {
        (tag << TAG_SHIFT)
            | (self.index << STEP_SHIFT)
            | (self.successes.min(FIELD) << 20)
            | self.failures.min(FIELD)
    }
}

/// What a call in ramp half-open gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RampAdmission {
    Admitted,
    NotThisTime,
    /// The current step is over and judged: apply this decision.
    Decided(Decision),
    /// The current step has run for `max_half_open_duration` without
    /// being judged (too few outcomes, or probes that never finish).
    TimedOut,
}

/// The state of one ramp round.
pub(crate) struct RampRound {
    outcomes: AtomicU64,
    asks: AtomicU64,
    step_started: AtomicU64,
}

fn tag(generation: u64) -> u64 {
    generation & 0xFFFF
}

impl RampRound {
    pub(crate) fn new() -> Self {
        RampRound {
            outcomes: AtomicU64::new(0),
            asks: AtomicU64::new(0),
            step_started: AtomicU64::new(0),
        }
    }

    /// Starts the round of `generation` at `now`; called by the transition
    /// into half-open while it holds the state word.
    pub(crate) fn begin(&self, generation: u64, now: Timestamp) {
        let tag = tag(generation);
        self.step_started.store(now.as_nanos(), Ordering::Relaxed);
        self.asks.store(tag << TAG_SHIFT, Ordering::Relaxed);
        self.outcomes
            .store(Step::default().encode(tag), Ordering::Release);
    }

    /// Asks for admission at `now` in the round of `generation`. A step
    /// that is due is judged first, so a step with enough healthy outcomes
    /// advances even when the next call comes after `max_nanos` (the
    /// half-open limit, which bounds each step); only a step that cannot be
    /// judged times out.
    pub(crate) fn try_admit(
        &self,
        rules: &RampRules,
        generation: u64,
        now: Timestamp,
        max_nanos: Option<u64>,
    ) -> RampAdmission {
        let tag = tag(generation);
        loop {
            let word = self.outcomes.load(Ordering::Acquire);
            let (t, step) = Step::decode(word);
            if t != tag {
                return RampAdmission::NotThisTime;
            }
            let started = self.step_started.load(Ordering::Acquire);
            if now.as_nanos().saturating_sub(started) >= rules.step_nanos {
                let calls = step.successes + step.failures;
                if rules.fails(calls, step.failures) {
                    return RampAdmission::Decided(Decision::Reopen);
                }
                if calls >= rules.min_calls {
                    if step.index >= rules.last_step() {
                        return RampAdmission::Decided(Decision::Close);
                    }
                    let next = Step {
                        index: step.index + 1,
                        ..Step::default()
                    };
                    if self
                        .outcomes
                        .compare_exchange(
                            word,
                            next.encode(tag),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        self.asks.store(
                            (tag << TAG_SHIFT) | (next.index << STEP_SHIFT),
                            Ordering::Release,
                        );
                        self.step_started.store(now.as_nanos(), Ordering::Release);
                    }
                    continue;
                }
                // Too few outcomes to judge: the step runs on.
            }
            if max_nanos.is_some_and(|max| now.as_nanos().saturating_sub(started) >= max) {
                return RampAdmission::TimedOut;
            }
            let k = self.asks.fetch_add(1, Ordering::AcqRel) & ((1 << STEP_SHIFT) - 1);
            let ppm = rules.share_ppm(step.index);
            let admitted = ((k + 1) * ppm).div_ceil(1_000_000) > (k * ppm).div_ceil(1_000_000);
            return if admitted {
                RampAdmission::Admitted
            } else {
                RampAdmission::NotThisTime
            };
        }
    }

    /// Credits a probe's verdict to the current step; reports `Reopen` once,
    /// when the step's failures first reach the threshold.
    pub(crate) fn settle(&self, rules: &RampRules, generation: u64, verdict: Verdict) -> Decision {
        let tag = tag(generation);
        let mut word = self.outcomes.load(Ordering::Acquire);
        loop {
            let (t, step) = Step::decode(word);
            if t != tag || verdict == Verdict::Neutral {
                return Decision::Undecided;
            }
            let before = rules.fails(step.successes + step.failures, step.failures);
            let mut next = step;
            match verdict {
                Verdict::Success => next.successes += 1,
                Verdict::Failure | Verdict::Slow | Verdict::Neutral => next.failures += 1,
            }
            match self.outcomes.compare_exchange_weak(
                word,
                next.encode(tag),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let after = rules.fails(next.successes + next.failures, next.failures);
                    return if after && !before {
                        Decision::Reopen
                    } else {
                        Decision::Undecided
                    };
                }
                Err(v) => word = v,
            }
        }
    }

    /// The current step of the round of `generation`.
    pub(crate) fn step(&self, generation: u64) -> Step {
        let (t, step) = Step::decode(self.outcomes.load(Ordering::Acquire));
        if t == tag(generation) {
            step
        } else {
            Step::default()
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn rules() -> RampRules {
        RampRules::new(&[0.1, 0.5, 1.0], Duration::from_secs(1), 0.5, 2)
    }

    #[test]
    fn admits_exactly_the_share_of_askers() {
        let r = RampRound::new();
        r.begin(3, Timestamp::ZERO);
        let admitted = (0..1000)
            .filter(|_| r.try_admit(&rules(), 3, Timestamp::ZERO, None) == RampAdmission::Admitted)
            .count();
        assert_eq!(admitted, 100);
    }

    #[test]
    fn steps_advance_on_time_with_a_passing_sample_then_close() {
        let rules = rules();
        let r = RampRound::new();
        r.begin(3, Timestamp::ZERO);
        let at = |s: u64| Timestamp::from_nanos(s * 1_000_000_000);
        assert_eq!(r.settle(&rules, 3, Verdict::Success), Decision::Undecided);
        // One outcome is below minimum_calls_per_step: the step runs on.
        r.try_admit(&rules, 3, at(1), None);
        assert_eq!(r.step(3).index, 0);
        r.settle(&rules, 3, Verdict::Success);
        r.try_admit(&rules, 3, at(2), None);
        assert_eq!(r.step(3).index, 1, "advanced");
        r.settle(&rules, 3, Verdict::Success);
        r.settle(&rules, 3, Verdict::Success);
        r.try_admit(&rules, 3, at(3), None);
        assert_eq!(r.step(3).index, 2);
        r.settle(&rules, 3, Verdict::Success);
        r.settle(&rules, 3, Verdict::Failure);
        assert_eq!(r.settle(&rules, 3, Verdict::Success), Decision::Undecided);
        assert_eq!(
            r.try_admit(&rules, 3, at(4), None),
            RampAdmission::Decided(Decision::Close)
        );
    }

    #[test]
    fn a_failing_step_reopens_at_once() {
        let rules = rules();
        let r = RampRound::new();
        r.begin(9, Timestamp::ZERO);
        assert_eq!(
            r.settle(&rules, 9, Verdict::Failure),
            Decision::Undecided,
            "1 call < minimum"
        );
        assert_eq!(r.settle(&rules, 9, Verdict::Failure), Decision::Reopen);
        assert_eq!(
            r.settle(&rules, 9, Verdict::Failure),
            Decision::Undecided,
            "reported once"
        );
        assert_eq!(
            r.settle(&rules, 8, Verdict::Failure),
            Decision::Undecided,
            "stale round"
        );
    }
}
