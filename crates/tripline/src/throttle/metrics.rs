//! A throttle's counters, as one snapshot: the live window that drives the
//! rejection probability, and cumulative totals for dashboards. Totals come
//! from the window's own words (counts folded out of expired buckets plus
//! the live ones), so they cost the call path nothing.

use super::AdaptiveThrottle;
use super::window::Sums;
use crate::clock::Clock;

/// Request counts of a throttle.
///
/// ```
/// use tripline::throttle::ThrottleCounts;
///
/// let c = ThrottleCounts { requests: 10, accepts: 6, throttled: 3 };
/// assert_eq!(c.rejected_by_backend(), 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ThrottleCounts {
    /// Requests attempted: sent and settled, plus shed locally.
    pub requests: u64,
    /// Requests the backend accepted.
    pub accepts: u64,
    /// Requests shed locally by the throttle.
    pub throttled: u64,
}

impl ThrottleCounts {
    /// Requests the backend refused as overloaded.
    pub fn rejected_by_backend(&self) -> u64 {
        self.requests
            .saturating_sub(self.accepts)
            .saturating_sub(self.throttled)
    }
}

/// A snapshot of one throttle.
///
/// ```
/// use tripline::throttle::AdaptiveThrottle;
///
/// let throttle = AdaptiveThrottle::try_new(Default::default()).unwrap();
/// throttle.try_acquire().unwrap().rejected_by_backend();
/// let m = throttle.metrics();
/// assert_eq!(m.window.rejected_by_backend(), 1);
/// assert!(!m.active, "1 request in 10 s is below the 1/s minimum");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ThrottleMetrics {
    /// The throttle's name.
    pub name: String,
    /// The probability with which the next request would be shed.
    pub rejection_probability: f64,
    /// Whether the request rate is at or above `minimum_requests_per_second`.
    pub active: bool,
    /// Counts in the live window.
    pub window: ThrottleCounts,
    /// Counts since the throttle was created.
    pub totals: ThrottleCounts,
}

impl AdaptiveThrottle {
    /// Counters of the live window and since creation, for dashboards.
    pub fn metrics(&self) -> ThrottleMetrics {
        let inner = &*self.inner;
        let epoch = inner.window.epoch(inner.clock.now());
        let w = inner.window.sums(epoch);
        let t = inner.window.totals();
        let counts = |s: Sums| ThrottleCounts {
            requests: s.requests,
            accepts: s.accepts,
            throttled: s.throttled,
        };
        ThrottleMetrics {
            name: inner.name.to_string(),
            rejection_probability: inner.probability(w.requests, w.accepts),
            active: w.requests as f64 >= inner.min_requests,
            window: counts(w),
            totals: counts(t),
        }
    }
}
