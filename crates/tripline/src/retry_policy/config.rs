//! The retry policy's config and counters.

use std::fmt;

use super::RetryBackoff;
use crate::error::PolicyConfigError;

/// How a [`Retry`](crate::retry::Retry) behaves.
///
/// ```
/// use tripline::retry::RetryConfig;
/// let config = RetryConfig { max_attempts: 3, idempotent: false, ..Default::default() };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RetryConfig {
    /// Attempts in all, the first included: 1 (no retry) ..= 100.
    pub max_attempts: u32,
    /// The wait between attempts.
    pub backoff: RetryBackoff,
    /// Whether the operation may safely run twice. `false` (writes,
    /// payments) allows a retry only for a call carrying an idempotency key.
    pub idempotent: bool,
    /// Whether an attempt that hit the per-attempt timeout is retried.
    pub retry_on_timeout: bool,
}

impl Default for RetryConfig {
    /// 3 attempts, decorrelated jitter 50 ms – 2 s, idempotent, timeouts retried.
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::default(),
            idempotent: true,
            retry_on_timeout: true,
        }
    }
}

impl RetryConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.max_attempts == 0 || self.max_attempts > 100 {
            let what = if self.max_attempts == 0 {
                "must be at least 1"
            } else {
                "must be at most 100"
            };
            return Err(PolicyConfigError::new(
                "retry",
                "max_attempts",
                format!("{what}, got {}", self.max_attempts),
            ));
        }
        self.backoff.validate("backoff")
    }
}

/// Why a wanted retry was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryRefusal {
    /// `max_attempts` reached.
    MaxAttempts,
    /// The retry budget is spent.
    Budget,
    /// The deadline cannot fit the backoff plus another attempt.
    Deadline,
    /// The circuit breaker is open: the retry would be rejected locally.
    CircuitOpen,
    /// The operation is not idempotent and the call has no idempotency key.
    NonIdempotent,
    /// The server asked not to be retried.
    Pushback,
}

impl RetryRefusal {
    /// Every reason, in code order.
    pub const ALL: [RetryRefusal; 6] = [
        RetryRefusal::MaxAttempts,
        RetryRefusal::Budget,
        RetryRefusal::Deadline,
        RetryRefusal::CircuitOpen,
        RetryRefusal::NonIdempotent,
        RetryRefusal::Pushback,
    ];

    /// The snake_case metrics label.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryRefusal::MaxAttempts => "max_attempts",
            RetryRefusal::Budget => "budget",
            RetryRefusal::Deadline => "deadline",
            RetryRefusal::CircuitOpen => "circuit_open",
            RetryRefusal::NonIdempotent => "non_idempotent",
            RetryRefusal::Pushback => "pushback",
        }
    }
}

impl fmt::Display for RetryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Cumulative counts of one retry policy (shared by its clones).
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::retry::{Retry, RetryBackoff, RetryConfig, RetryRefusal};
///
/// let retry = Retry::builder()
///     .config(RetryConfig { max_attempts: 2, backoff: RetryBackoff::None, ..Default::default() })
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let _ = retry.call(|_| Err::<(), _>("down"));
/// let stats = retry.stats();
/// assert_eq!((stats.attempts, stats.retries), (2, 1));
/// assert_eq!(stats.refused(RetryRefusal::MaxAttempts), 1);
/// assert_eq!(RetryRefusal::Budget.as_str(), "budget");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Attempts made, first attempts included.
    pub attempts: u64,
    /// Retries made (attempts after the first).
    pub retries: u64,
    /// Wanted retries refused, by [`RetryRefusal`] in code order.
    pub refused: [u64; 6],
}

impl RetryStats {
    /// Refusals for `reason`.
    pub fn refused(&self, reason: RetryRefusal) -> u64 {
        self.refused[reason as usize]
    }
}
