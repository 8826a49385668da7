//! Half-open probe admission and judgement.
//!
//! One word holds the round: `tag:22 | in_flight:14 | successes:14 |
//! failures:14` (probe quotas are at most [`HalfOpenPolicy::MAX_PROBES`],
//! below 2¹⁴), where `tag` is the low 22 bits of the half-open state's
//! generation. A round is told apart from every other by its full
//! generation, not by the tag alone:
//!
//! * the transition into half-open writes an empty word with its tag while
//!   it holds the state word busy, so a round never starts with another
//!   round's probes in it, however many transitions came between;
//! * a probe settles into the round only while the state word still carries
//!   the probe's full generation (see `settle_probe`), so a permit kept
//!   across any number of later rounds is late, never a member of them.
//!
//! The tag is then only a guard against a settlement that read the state
//! word just before its round ended and the new round's word just after:
//! for it to hit a later round, 2²² transitions would have to happen
//! between two adjacent instructions of one thread.
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
    /// Succeeded, but slower than half-open tolerates: judged as a failure,
    /// reported as slow.
    Slow,
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

/// Width of each count in the round word.
const FIELD_BITS: u32 = 14;
const MASK: u64 = (1 << FIELD_BITS) - 1;
const TAG_SHIFT: u32 = 3 * FIELD_BITS;
const TAG_MASK: u64 = (1 << (64 - TAG_SHIFT)) - 1;

const _: () = assert!(HalfOpenPolicy::MAX_PROBES as u64 <= MASK);

impl Round {
    fn decode(word: u64, tag: u64) -> Round {
        if word >> TAG_SHIFT != tag {
            return Round::default();
        }
        Round {
            in_flight: (word >> (2 * FIELD_BITS)) & MASK,
            successes: (word >> FIELD_BITS) & MASK,
            failures: word & MASK,
        }
    }

    fn encode(self, tag: u64) -> u64 {
        (tag << TAG_SHIFT)
            | (self.in_flight.min(MASK) << (2 * FIELD_BITS))
            | (self.successes.min(MASK) << FIELD_BITS)
            | self.failures.min(MASK)
    }
}

/// The rules of a half-open policy, precomputed.
#[derive(Clone, Debug, PartialEq)]
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

/// A packed [`QuotaRules`] is never 0 (bit 63 is set), so 0 can mean "none".
const QUOTA_SET: u64 = 1 << 63;
const QUOTA_PERMITS: u64 = 1 << 62;
/// Each count gets 16 bits; a policy with a larger count is not packed.
const QUOTA_FIELD: u64 = 0xFFFF;
/// `max_half_open_duration` in whole milliseconds plus one (0: none), in
/// the 30 bits above the counts.
const QUOTA_MAX_SHIFT: u32 = 32;
const QUOTA_MAX_FIELD: u64 = (1 << 30) - 1;

impl QuotaRules {
    /// The rules and the round's time limit (`max_half_open_nanos`) in one
    /// word for a breaker's hot words (never 0), or `None` when a count
    /// does not fit in 16 bits or the limit is not whole milliseconds under
    /// ~12 days.
    pub(crate) fn to_word(self, max_half_open_nanos: Option<u64>) -> Option<u64> {
        let (kind, a, b) = match self {
            QuotaRules::Consecutive { successes } => (0, successes, 0),
            QuotaRules::Permits { calls, fail_limit } => (QUOTA_PERMITS, calls, fail_limit),
        };
        let max = match max_half_open_nanos {
            None => 0,
            Some(n) if n % 1_000_000 == 0 && n / 1_000_000 < QUOTA_MAX_FIELD => n / 1_000_000 + 1,
            Some(_) => return None,
        };
        (a <= QUOTA_FIELD && b <= QUOTA_FIELD)
            .then_some(QUOTA_SET | kind | max << QUOTA_MAX_SHIFT | b << 16 | a)
    }

    /// The rules and time limit of a word from [`QuotaRules::to_word`].
    #[inline]
    pub(crate) fn from_word(word: u64) -> (QuotaRules, Option<u64>) {
        let a = word & QUOTA_FIELD;
        let rules = if word & QUOTA_PERMITS == 0 {
            QuotaRules::Consecutive { successes: a }
        } else {
            QuotaRules::Permits {
                calls: a,
                fail_limit: (word >> 16) & QUOTA_FIELD,
            }
        };
        let max = (word >> QUOTA_MAX_SHIFT) & QUOTA_MAX_FIELD;
        (rules, max.checked_sub(1).map(|ms| ms * 1_000_000))
    }

    /// Whether the round admits another probe: never once it has decided
    /// (a decision parked by `min_state_duration` must not keep probing).
    fn admits(self, r: Round) -> bool {
        if self.decide(r) != Decision::Undecided {
            return false;
        }
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

/// The smallest failure count `f` out of `calls` with
/// `f as f64 / calls as f64 >= rate`: exactly the comparison the closed
/// state makes, so a threshold of `2.0 / 3.0` reopens on 2 failures in 3.
/// `rate · calls` rounded up is at most one off in floating point; the two
/// loops settle it on the predicate itself.
pub(crate) fn failures_to_reach(rate: f64, calls: u64) -> u64 {
    let reaches = |f: u64| super::core::settings::reaches(f, calls, rate);
    let mut f = ((rate * calls as f64).ceil().max(0.0) as u64).min(calls);
    while f > 0 && reaches(f - 1) {
        f -= 1;
    }
    while f < calls && !reaches(f) {
        f += 1;
    }
    f
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
        generation & TAG_MASK
    }

    /// Starts the round of `generation` empty; called by the transition
    /// into half-open while it holds the state word busy.
    pub(crate) fn begin(&self, generation: u64) {
        self.word.store(
            Round::default().encode(Self::tag(generation)),
            Ordering::Release,
        );
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
            if word >> TAG_SHIFT != tag {
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
                Verdict::Failure | Verdict::Slow => r.failures += 1,
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

/// How many probes of the current round (or ramp step) succeeded too
/// slowly: judged as failures, reported as slow. Only events read it, so
/// it lives apart from the round word, whose bits all count admissions.
/// Layout: `generation:40 | step:8 | count:16`; a word of another round or
/// step reads as zero.
pub(crate) struct SlowProbes {
    word: AtomicU64,
}

const SLOW_GEN_SHIFT: u32 = 24;
const SLOW_STEP_SHIFT: u32 = 16;

impl SlowProbes {
    pub(crate) fn new() -> Self {
        SlowProbes {
            word: AtomicU64::new(0),
        }
    }

    fn key(generation: u64, step: u64) -> u64 {
        ((generation & ((1 << 40) - 1)) << SLOW_GEN_SHIFT) | ((step & 0xFF) << SLOW_STEP_SHIFT)
    }

    /// Starts the count of the round of `generation` at zero.
    pub(crate) fn begin(&self, generation: u64) {
        self.word.store(Self::key(generation, 0), Ordering::Release);
    }

    /// Counts one slow probe of `generation` in its `step`.
    pub(crate) fn add(&self, generation: u64, step: u64) {
        let key = Self::key(generation, step);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            let count = if word & !0xFFFF == key {
                word & 0xFFFF
            } else {
                0
            };
            let next = key | (count + 1).min(0xFFFF);
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(v) => word = v,
            }
        }
    }

    /// Slow probes of `generation` in its `step`.
    pub(crate) fn count(&self, generation: u64, step: u64) -> u64 {
        let word = self.word.load(Ordering::Acquire);
        if word & !0xFFFF == Self::key(generation, step) {
            word & 0xFFFF
        } else {
            0
        }
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
