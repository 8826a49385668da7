//! The sliding windows behind the trip decision (seed 001 §3.3).
//!
//! Both windows track calls, failures, slow calls and slow failures, are
//! written lock-free on every recorded call, and reset in O(1)/O(buckets)
//! on the transitions that need a clean slate (Closed→Open, HalfOpen→Closed).
//! See [`count`] and [`time`] for each algorithm and its concurrency argument.

pub(crate) mod count;
pub(crate) mod time;

use super::config::WindowConfig;
use crate::clock::Timestamp;

/// Outcome bits as stored in the windows.
pub(crate) const FAILURE: u8 = 1;
/// The call was slow (its duration reached `slow_call_duration`).
pub(crate) const SLOW: u8 = 2;

/// What a window holds at one moment: the input of the trip decision,
/// carried by every transition event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WindowSnapshot {
    /// Calls recorded (successes and failures; ignored calls are not).
    pub calls: u64,
    /// Calls classified as failures.
    pub failures: u64,
    /// Calls at least `slow_call_duration` long, failed or not.
    pub slow: u64,
    /// Calls both slow and failed.
    pub slow_failures: u64,
}

impl WindowSnapshot {
    /// failures / calls, 0 when empty.
    pub fn failure_rate(&self) -> f64 {
        ratio(self.failures, self.calls)
    }

    /// slow / calls, 0 when empty.
    pub fn slow_call_rate(&self) -> f64 {
        ratio(self.slow, self.calls)
    }

    /// Whether anything in the window could contribute to a trip.
    pub fn has_bad_calls(&self) -> bool {
        self.failures > 0 || self.slow > 0
    }

    /// Keeps the counts mutually consistent when concurrent writers were
    /// caught mid-update (a failure counted before its call was).
    pub(crate) fn clamped(mut self) -> Self {
        self.failures = self.failures.min(self.calls);
        self.slow = self.slow.min(self.calls);
        self.slow_failures = self.slow_failures.min(self.failures).min(self.slow);
        self
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Cumulative counts since the breaker was created (never reset), for
/// metrics; derived from the window's own words so the hot path pays no
/// extra write for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
    pub(crate) slow_failures: u64,
}

/// A count or time window.
pub(crate) enum Window {
    Count(count::CountWindow),
    Time(time::TimeWindow),
}

impl Window {
    pub(crate) fn new(config: &WindowConfig, stripes: usize) -> Self {
        match *config {
            WindowConfig::Count { size } => Window::Count(count::CountWindow::new(size)),
            WindowConfig::Time { length, buckets } => {
                Window::Time(time::TimeWindow::new(length, buckets, stripes))
            }
        }
    }

    /// Remembers what the last evaluation saw, so later successes can skip it.
    pub(crate) fn evaluated(&self, now: Timestamp, snapshot: &WindowSnapshot, minimum_calls: u64) {
        if let Window::Time(w) = self {
            w.evaluated(
                now,
                snapshot.has_bad_calls() && snapshot.calls < minimum_calls,
            );
        }
    }

    /// The live contents at `now`.
    pub(crate) fn snapshot(&self, now: Timestamp) -> WindowSnapshot {
        match self {
            Window::Count(w) => w.snapshot(),
            Window::Time(w) => w.snapshot(now),
        }
        .clamped()
    }

    /// Forgets every live outcome (the counts stay in [`Totals`]).
    pub(crate) fn reset(&self) {
        match self {
            Window::Count(w) => w.reset(),
            Window::Time(w) => w.reset(),
        }
    }

    /// Everything ever recorded.
    pub(crate) fn totals(&self) -> Totals {
        match self {
            Window::Count(w) => w.totals(),
            Window::Time(w) => w.totals(),
        }
    }

    /// Bytes owned by the window, for the memory goal.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Window::Count(w) => w.heap_bytes(),
            Window::Time(w) => w.heap_bytes(),
        }
    }
}
