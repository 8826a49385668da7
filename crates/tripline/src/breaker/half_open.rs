//! Half-open probe admission and judgement (seed 001 §2.2.3, §2.2.4, §4.1).
//!
//! One word holds the round: `tag:16 | in_flight:16 | successes:16 |
//! failures:16`, where `tag` is the low 16 bits of the half-open state's
//! generation. A word carrying another tag belongs to an earlier round and
//! reads as empty, so entering half-open needs no reset, and a permit from
//! an earlier round can never settle a later one.
//!
//! Every admission is a CAS that checks the quota, and every permit settles
//! exactly once (a recorded outcome, or a neutral release when it is dropped
//! unrecorded), so `in_flight` can neither leak nor exceed the quota.
//!
//! The ramp policy admits a share of traffic instead of a quota; see
//! [`ramp`].

pub(crate) mod ramp;

use super::config::HalfOpenPolicy;
use crate::sync::{AtomicU64, Ordering};

/// How a probe ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Failure,
    /// Cancelled, dropped or ignored: no evidence either way.
    Neutral,
}

/// What the round decided after a probe settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Undecided,
    Close,
    Reopen,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Round {
    pub(crate) in_flight: u64,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

const MASK: u64 = 0xFFFF;

impl Round {
    fn decode(word: u64, tag: u64) -> Round {
        if word >> 48 != tag {
            return Round::default();
        }
        Round {
            in_flight: (word >> 32) & MASK,
            successes: (word >> 16) & MASK,
            failures: word & MASK,
        }
    }

    fn encode(self, tag: u64) -> u64 {
        (tag << 48) | (self.in_flight << 32) | (self.successes << 16) | self.failures
    }
}

/// The rules of a half-open policy, precomputed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    /// A quota of probes per round.
    Quota(QuotaRules),
    /// A rising share of traffic.
    Ramp(ramp::RampRules),
}

impl Rules {
    pub(crate) fn new(policy: &HalfOpenPolicy) -> Rules {
        match policy {
            HalfOpenPolicy::Consecutive { successes } => Rules::Quota(QuotaRules::Consecutive {
                successes: u64::from(*successes),
            }),
            HalfOpenPolicy::Permits {
                calls,
                failure_rate_threshold,
            } => {
                let calls = u64::from(*calls);
                Rules::Quota(QuotaRules::Permits {
                    calls,
                    fail_limit: failures_to_reach(*failure_rate_threshold, calls).max(1),
                })
            }
            HalfOpenPolicy::Ramp {
                steps,
                step_duration,
                failure_rate_threshold,
                minimum_calls_per_step,
            } => Rules::Ramp(ramp::RampRules::new(
                steps,
                *step_duration,
                *failure_rate_threshold,
                *minimum_calls_per_step,
            )),
        }
    }
}

/// The rules of the quota policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QuotaRules {
    /// One probe at a time; any failure reopens; `successes` close.
    Consecutive { successes: u64 },
    /// At most `calls` probes per round; reopen at `fail_limit` failures.
    Permits { calls: u64, fail_limit: u64 },
}

impl QuotaRules {
    fn admits(self, r: Round) -> bool {
        match self {
            QuotaRules::Consecutive { successes } => r.in_flight == 0 && r.successes < successes,
            QuotaRules::Permits { calls, .. } => r.in_flight + r.successes + r.failures < calls,
        }
    }

    fn decide(self, r: Round) -> Decision {
        match self {
            QuotaRules::Consecutive { successes } => {
                if r.failures > 0 {
                    Decision::Reopen
                } else if r.successes >= successes {
                    Decision::Close
                } else {
                    Decision::Undecided
                }
            }
            QuotaRules::Permits { calls, fail_limit } => {
                if r.failures >= fail_limit {
                    Decision::Reopen
                } else if r.successes + r.failures >= calls {
                    Decision::Close
                } else {
                    Decision::Undecided
                }
            }
        }
    }
}

/// The smallest failure count `f` out of `calls` with `f / calls ≥ rate`,
/// in exact integer arithmetic (parts per million), so that "exactly the
/// threshold" behaves the same for every rate.
pub(crate) fn failures_to_reach(rate: f64, calls: u64) -> u64 {
    (super::core::settings::ppm(rate) * calls).div_ceil(1_000_000)
}

pub(crate) struct HalfOpenRound {
    word: AtomicU64,
}

impl HalfOpenRound {
    pub(crate) fn new() -> Self {
        HalfOpenRound {
            word: AtomicU64::new(0),
        }
    }

    fn tag(generation: u64) -> u64 {
        generation & MASK
    }

    /// Takes a probe slot in the round of `generation`, if the quota allows.
    pub(crate) fn try_admit(&self, rules: QuotaRules, generation: u64) -> bool {
        let tag = Self::tag(generation);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            let mut r = Round::decode(word, tag);
            if !rules.admits(r) {
                return false;
            }
            r.in_flight += 1;
            match self.word.compare_exchange_weak(
                word,
                r.encode(tag),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(v) => word = v,
            }
        }
    }

    /// Settles one admitted probe of `generation`; returns the round's
    /// decision, or `Undecided` if the round is already over.
    pub(crate) fn settle(&self, rules: QuotaRules, generation: u64, verdict: Verdict) -> Decision {
        let tag = Self::tag(generation);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if word >> 48 != tag {
                return Decision::Undecided;
            }
            let mut r = Round::decode(word, tag);
            if r.in_flight == 0 {
                return Decision::Undecided;
            }
            let before = rules.decide(r);
            r.in_flight -= 1;
            match verdict {
                Verdict::Success => r.successes += 1,
                Verdict::Failure => r.failures += 1,
                Verdict::Neutral => {}
            }
            match self.word.compare_exchange_weak(
                word,
                r.encode(tag),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // Only the settlement that changes the decision reports it.
                    let after = rules.decide(r);
                    return if after != before {
                        after
                    } else {
                        Decision::Undecided
                    };
                }
                Err(v) => word = v,
            }
        }
    }

    /// The round of `generation` as it stands.
    pub(crate) fn round(&self, generation: u64) -> Round {
        Round::decode(self.word.load(Ordering::Acquire), Self::tag(generation))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn exact_threshold_counts() {
        assert_eq!(failures_to_reach(0.2, 10), 2);
        assert_eq!(failures_to_reach(0.3, 10), 3);
        assert_eq!(failures_to_reach(0.5, 5), 3);
        assert_eq!(failures_to_reach(1.0, 7), 7);
    }

    #[test]
    fn permits_quota_and_early_reopen() {
        let Rules::Quota(rules) = Rules::new(&HalfOpenPolicy::Permits {
            calls: 3,
            failure_rate_threshold: 0.5,
        }) else {
            unreachable!()
        };
        let h = HalfOpenRound::new();
        assert!((0..3).all(|_| h.try_admit(rules, 7)));
        assert!(!h.try_admit(rules, 7), "quota exhausted");
        assert_eq!(h.settle(rules, 7, Verdict::Neutral), Decision::Undecided);
        assert!(h.try_admit(rules, 7), "a neutral release frees the slot");
        assert_eq!(h.settle(rules, 7, Verdict::Success), Decision::Undecided);
        assert_eq!(h.settle(rules, 7, Verdict::Failure), Decision::Undecided);
        assert_eq!(h.settle(rules, 7, Verdict::Failure), Decision::Reopen);
        assert_eq!(
            h.round(8),
            Round::default(),
            "another generation reads empty"
        );
        assert_eq!(h.settle(rules, 6, Verdict::Failure), Decision::Undecided);
    }
}
