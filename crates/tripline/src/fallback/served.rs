//! Served values and the marker on substitutes.

use crate::clock::Timestamp;
use crate::pipeline::PolicyError;

/// Why a value is a substitute.
///
/// ```
/// use std::time::Duration;
/// use tripline::fallback::DegradedReason;
/// use tripline::pipeline::PolicyError;
/// use tripline::timeout::Timeout;
///
/// let e: PolicyError<()> = PolicyError::Timeout(Timeout { after: Duration::from_secs(1) });
/// assert_eq!(DegradedReason::of(&e), DegradedReason::TimedOut);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum DegradedReason {
    /// A local policy refused the call (breaker open, bulkhead full,
    /// deadline floor, retry budget spent).
    Rejected,
    /// The dependency failed.
    Failed,
    /// The call timed out.
    TimedOut,
}

impl DegradedReason {
    /// The cause of `error`.
    pub fn of<E>(error: &PolicyError<E>) -> DegradedReason {
        match error {
            PolicyError::CircuitOpen(_)
            | PolicyError::BulkheadFull(_)
            | PolicyError::DeadlineExceeded(_) => DegradedReason::Rejected,
            PolicyError::BudgetExhausted { last, .. } => DegradedReason::of(last),
            PolicyError::Timeout(_) => DegradedReason::TimedOut,
            PolicyError::Inner(_) => DegradedReason::Failed,
        }
    }
}

/// Where a substitute came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FallbackSource {
    /// A configured constant.
    Static,
    /// A function computed it.
    Function,
    /// The last good value, from cache.
    Cache,
}

/// The marker on a substitute value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Degraded {
    /// Why the real value is missing.
    pub reason: DegradedReason,
    /// Where the substitute came from.
    pub source: FallbackSource,
    /// When the data was real: the cached value's fetch time; `None` for
    /// static and computed values, which were never real data.
    pub as_of: Option<Timestamp>,
}

/// A value and whether it is the real thing.
///
/// ```
/// use tripline::fallback::Served;
/// let s = Served::fresh(3);
/// assert!(!s.is_degraded());
/// assert_eq!(s.into_value(), 3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served<T> {
    /// The value.
    pub value: T,
    /// `Some` when the value is a fallback.
    pub degraded: Option<Degraded>,
}

impl<T> Served<T> {
    /// A real value.
    pub fn fresh(value: T) -> Self {
        Served {
            value,
            degraded: None,
        }
    }

    /// Whether the value is a fallback.
    pub fn is_degraded(&self) -> bool {
        self.degraded.is_some()
    }

    /// The value, marker dropped (only once you have looked at it).
    pub fn into_value(self) -> T {
        self.value
    }
}
