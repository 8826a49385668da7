//! How long to wait before the next attempt.
//!
//! Retrying at once is the worst choice: a fault needs time to clear, and
//! three attempts squeezed into a few milliseconds hit the dependency harder
//! than normal traffic. Three shapes:
//!
//! * `Constant` — the same pause every time;
//! * `Exponential` — `initial × multiplierⁿ`, capped at `max`;
//! * `DecorrelatedJitter` — AWS's "decorrelated jitter":
//!   `next = min(max, uniform(base, 3 × previous))`, which spreads clients
//!   that failed together so they do not retry in lock-step. Randomness comes
//!   from a seeded generator owned by the policy, so runs are reproducible.

use std::time::Duration;

use crate::error::PolicyConfigError;
use crate::rng::unit_f64;

/// The wait between attempts.
///
/// ```
/// use std::time::Duration;
/// use tripline::retry::RetryBackoff;
///
/// let b = RetryBackoff::Exponential {
///     initial: Duration::from_millis(100),
///     multiplier: 2.0,
///     max: Duration::from_secs(1),
/// };
/// let mut rng = 1;
/// assert_eq!(b.delay(0, Duration::ZERO, &mut rng), Duration::from_millis(100));
/// assert_eq!(b.delay(3, Duration::ZERO, &mut rng), Duration::from_millis(800));
/// assert_eq!(b.delay(9, Duration::ZERO, &mut rng), Duration::from_secs(1));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum RetryBackoff {
    /// No wait (only sensible for hedging-like uses; refused by nothing, but
    /// a retry storm's best friend).
    None,
    /// The same wait before every retry.
    Constant {
        /// The wait.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        delay: Duration,
    },
    /// `initial × multiplier^retry`, capped at `max`.
    Exponential {
        /// Wait before the first retry.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        initial: Duration,
        /// Growth per retry, ≥ 1.
        multiplier: f64,
        /// Longest wait.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        max: Duration,
    },
    /// `min(max, uniform(base, 3 × previous wait))`.
    DecorrelatedJitter {
        /// Shortest wait, and the first wait's lower bound.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        base: Duration,
        /// Longest wait.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        max: Duration,
    },
}

impl Default for RetryBackoff {
    /// Decorrelated jitter from 50 ms to 2 s.
    fn default() -> Self {
        RetryBackoff::DecorrelatedJitter {
            base: Duration::from_millis(50),
            max: Duration::from_secs(2),
        }
    }
}

impl RetryBackoff {
    /// The wait before retry number `retry` (0 for the first retry), given
    /// the previous wait, drawing randomness from `rng` (a splitmix state).
    pub fn delay(&self, retry: u32, previous: Duration, rng: &mut u64) -> Duration {
        match *self {
            RetryBackoff::None => Duration::ZERO,
            RetryBackoff::Constant { delay } => delay,
            RetryBackoff::Exponential {
                initial,
                multiplier,
                max,
            } => {
                let factor = multiplier.powi(retry.min(1024) as i32);
                let secs = initial.as_secs_f64() * factor;
                Duration::try_from_secs_f64(secs).unwrap_or(max).min(max)
            }
            RetryBackoff::DecorrelatedJitter { base, max } => {
                let hi = previous.max(base).saturating_mul(3).min(max).max(base);
                let span = hi.saturating_sub(base).as_secs_f64();
                let wait = base.as_secs_f64() + span * unit_f64(rng);
                Duration::try_from_secs_f64(wait).unwrap_or(max).min(max)
            }
        }
    }

    pub(crate) fn validate(&self, field: &'static str) -> Result<(), PolicyConfigError> {
        let err = |c: String| Err(PolicyConfigError::new("retry", field, c));
        match *self {
            RetryBackoff::None | RetryBackoff::Constant { .. } => Ok(()),
            RetryBackoff::Exponential {
                initial,
                multiplier,
                max,
            } => {
                if !(multiplier.is_finite() && multiplier >= 1.0) {
                    return err(format!(
                        "exponential `multiplier` must be a finite number ≥ 1, got {multiplier}"
                    ));
                }
                if initial > max {
                    return err("exponential `initial` must not exceed `max`".into());
                }
                Ok(())
            }
            RetryBackoff::DecorrelatedJitter { base, max } => {
                if base.is_zero() || base > max {
                    return err("decorrelated jitter needs 0 < `base` ≤ `max`".into());
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decorrelated_jitter_stays_in_bounds_and_is_seeded() {
        let b = RetryBackoff::DecorrelatedJitter {
            base: Duration::from_millis(10),
            max: Duration::from_millis(500),
        };
        let run = |seed: u64| {
            let mut rng = seed;
            let mut prev = Duration::ZERO;
            (0..50)
                .map(|i| {
                    prev = b.delay(i, prev, &mut rng);
                    prev
                })
                .collect::<Vec<_>>()
        };
        let a = run(42);
        assert_eq!(a, run(42), "same seed, same waits");
        assert_ne!(a, run(43), "another seed, other waits");
        let mut prev = Duration::ZERO;
        for w in a {
            assert!(w >= Duration::from_millis(10) && w <= Duration::from_millis(500));
            assert!(w <= prev.max(Duration::from_millis(10)) * 3);
            prev = w;
        }
    }
}
