//! A bulkhead's limits, its refusal and its counts.

use std::time::Duration;

use crate::error::PolicyConfigError;

/// The limits of a [`Bulkhead`](super::Bulkhead).
///
/// ```
/// use std::time::Duration;
/// use tripline::bulkhead::BulkheadConfig;
///
/// let config = BulkheadConfig { max_concurrent: 10, max_queue: 20, max_wait: Duration::from_millis(50) };
/// assert!(config.validate().is_ok());
/// let bad = BulkheadConfig { max_concurrent: 0, ..Default::default() };
/// assert_eq!(bad.validate().unwrap_err().field, "max_concurrent");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct BulkheadConfig {
    /// Calls in flight at once, ≥ 1.
    pub max_concurrent: u32,
    /// Calls that may wait for a slot; 0 rejects at once when full. Only
    /// asynchronous acquisition waits: synchronous callers never queue (a
    /// parked thread is the resource the bulkhead protects).
    pub max_queue: u32,
    /// Longest wait in the queue (also cut by the request's deadline);
    /// must be positive when `max_queue` > 0.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub max_wait: Duration,
}

impl Default for BulkheadConfig {
    /// 25 concurrent calls, no queue.
    fn default() -> Self {
        BulkheadConfig {
            max_concurrent: 25,
            max_queue: 0,
            max_wait: Duration::ZERO,
        }
    }
}

impl BulkheadConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.max_concurrent == 0 {
            return Err(PolicyConfigError::new(
                "bulkhead",
                "max_concurrent",
                "must be at least 1, got 0",
            ));
        }
        if self.max_queue > 0 && self.max_wait.is_zero() {
            return Err(PolicyConfigError::new(
                "bulkhead",
                "max_wait",
                format!(
                    "must be positive when max_queue = {} (a queue with no wait rejects anyway)",
                    self.max_queue
                ),
            ));
        }
        Ok(())
    }
}

/// Cumulative counts and current occupancy.
///
/// ```
/// use tripline::bulkhead::{Bulkhead, BulkheadConfig};
/// let b = Bulkhead::try_new(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let _slot = b.try_acquire_owned().unwrap();
/// let _ = b.try_acquire();
/// let s = b.stats();
/// assert_eq!((s.in_flight, s.admitted, s.rejected), (1, 1, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BulkheadStats {
    /// Calls holding a slot now.
    pub in_flight: u64,
    /// Calls waiting in the queue now.
    pub waiting: u64,
    /// Slots granted so far.
    pub admitted: u64,
    /// Calls rejected so far.
    pub rejected: u64,
}
