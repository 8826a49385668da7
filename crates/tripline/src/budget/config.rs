//! The shape of a retry budget, and its counts.

use std::time::Duration;

use crate::error::PolicyConfigError;

/// The shape of a [`RetryBudget`](super::RetryBudget).
///
/// ```
/// use std::time::Duration;
/// use tripline::budget::RetryBudgetConfig;
///
/// let config = RetryBudgetConfig { ratio: 0.1, ..Default::default() };
/// assert!(config.validate().is_ok());
/// let bad = RetryBudgetConfig { ratio: f64::NAN, ..Default::default() };
/// assert_eq!(bad.validate().unwrap_err().field, "ratio");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RetryBudgetConfig {
    /// How long a request or a retry counts against the budget, 1 s ..= 1 h.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub window: Duration,
    /// Slices the window slides by, 1..=100.
    pub buckets: u32,
    /// Retries allowed per request in the window, a fraction in [0, 10]
    /// (0.1: one retry per ten requests).
    pub ratio: f64,
    /// Retries always allowed per second of window, on top of the ratio, so a
    /// quiet client can still retry: 0 ..= 1 000 000.
    pub min_retries_per_second: f64,
}

impl Default for RetryBudgetConfig {
    /// 20% of requests over 10 s, plus 10 retries per second (Finagle's and
    /// linkerd's defaults).
    fn default() -> Self {
        RetryBudgetConfig {
            window: Duration::from_secs(10),
            buckets: 10,
            ratio: 0.2,
            min_retries_per_second: 10.0,
        }
    }
}

impl RetryBudgetConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let err = |field, c: String| Err(PolicyConfigError::new("retry_budget", field, c));
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(3600) {
            return err(
                "window",
                format!(
                    "must be between 1s and 1h, got {}",
                    humantime::format_duration(self.window)
                ),
            );
        }
        if !(1..=100).contains(&self.buckets) {
            return err(
                "buckets",
                format!("must be between 1 and 100, got {}", self.buckets),
            );
        }
        if !(self.ratio.is_finite() && (0.0..=10.0).contains(&self.ratio)) {
            return err(
                "ratio",
                format!("must be a number in [0, 10], got {}", self.ratio),
            );
        }
        // A million retries a second is no budget at all; the bound also
        // keeps the budget's fixed-point sums far from overflow.
        if !(self.min_retries_per_second.is_finite()
            && (0.0..=1e6).contains(&self.min_retries_per_second))
        {
            return err(
                "min_retries_per_second",
                format!(
                    "must be a number in [0, 1000000], got {}",
                    self.min_retries_per_second
                ),
            );
        }
        Ok(())
    }
}

/// Cumulative counts of one budget, for dashboards.
///
/// ```
/// use tripline::budget::{RetryBudget, RetryBudgetConfig};
/// let b = RetryBudget::try_new(RetryBudgetConfig { ratio: 0.0, min_retries_per_second: 0.0, ..Default::default() }).unwrap();
/// b.deposit();
/// assert!(!b.try_withdraw());
/// let s = b.stats();
/// assert_eq!((s.deposits, s.withdrawals, s.refused), (1, 0, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Requests deposited.
    pub deposits: u64,
    /// Retries (and hedges) granted.
    pub withdrawals: u64,
    /// Retries (and hedges) refused because the budget was spent.
    pub refused: u64,
}
