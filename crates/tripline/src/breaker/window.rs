//! The sliding windows behind the trip decision.
//!
//! Both windows track calls, failures, slow calls and slow failures, are
//! written lock-free on every recorded call, and reset in O(1)/O(buckets)
//! on the transitions that need a clean slate (Closed→Open, HalfOpen→Closed).
//! See [`count`] and [`time`] for each algorithm and its concurrency argument.

mod cell;
pub(crate) mod count;
pub(crate) mod time;

pub(crate) use cell::WindowCell;

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
        // Failures and slow calls overlap in at least what does not fit
        // beside each other in `calls` (a hand-edited snapshot may claim
        // 10 calls, 10 failures and 5 slow calls, none of them both).
        let overlap = self
            .failures
            .saturating_add(self.slow)
            .saturating_sub(self.calls);
        self.slow_failures = self
            .slow_failures
            .max(overlap)
            .min(self.failures)
            .min(self.slow);
        self
    }
}

/// Outcome bits that reproduce `s`'s counts: slow failures, failures,
/// slow successes, then successes.
fn synthesize(s: &WindowSnapshot) -> impl Iterator<Item = u8> {
    let slow_failures = s.slow_failures;
    // `s` is clamped: none of these can go below zero.
    let failures = s.failures.saturating_sub(slow_failures);
    let slow = s.slow.saturating_sub(slow_failures);
    let successes = s.calls.saturating_sub(s.failures).saturating_sub(slow);
    std::iter::repeat_n(FAILURE | SLOW, slow_failures as usize)
        .chain(std::iter::repeat_n(FAILURE, failures as usize))
        .chain(std::iter::repeat_n(SLOW, slow as usize))
        .chain(std::iter::repeat_n(0, successes as usize))
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Cumulative counts since the window was created (never reset), for
/// metrics; derived from the window's own words so the hot path pays no
/// extra write for them. A breaker's totals add up those of every window
/// it has had (see [`WindowCell::totals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
    pub(crate) slow: u64,
    pub(crate) slow_failures: u64,
}

impl Totals {
    /// Field by field `self + other`, wrapping: partial sums of the
    /// window cell's ledger may wrap below zero, full ones never do.
    pub(crate) fn wrapping_add(self, other: Totals) -> Totals {
        self.zip(other, u64::wrapping_add)
    }

    /// Field by field `self - other`, wrapping (see [`Self::wrapping_add`]).
    pub(crate) fn wrapping_sub(self, other: Totals) -> Totals {
        self.zip(other, u64::wrapping_sub)
    }

    /// `f` applied field by field, so the four counts cannot be mixed up.
    fn zip(self, other: Totals, f: impl Fn(u64, u64) -> u64) -> Totals {
        Totals {
            calls: f(self.calls, other.calls),
            failures: f(self.failures, other.failures),
            slow: f(self.slow, other.slow),
            slow_failures: f(self.slow_failures, other.slow_failures),
        }
    }
}

/// A count or time window. `repr(u8)` fixes the layout (the tag first, then
/// the variant) that the breaker's hand-made layout relies on.
#[repr(u8)]
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

    /// Remembers what the last evaluation saw, so later successes can skip
    /// it unless `pending` (a trip may still come from a success).
    pub(crate) fn evaluated(&self, now: Timestamp, pending: bool) {
        if let Window::Time(w) = self {
            w.evaluated(now, pending);
        }
    }

    /// The live contents at `now`.
    #[inline]
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

    /// Takes over what still fits of `old`'s live contents (a
    /// reconfiguration changed the window's shape): the newest outcomes of
    /// a count window, the live buckets of a time window at their times.
    /// Across kinds, counts go to the newest slots / the current bucket.
    pub(crate) fn absorb(&self, old: &Window, now: Timestamp) {
        match (old, self) {
            (Window::Count(o), Window::Count(n)) => {
                for bits in o.recent(n.size() as usize) {
                    n.record(bits);
                }
            }
            (Window::Time(o), Window::Time(n)) => {
                for (start, counts) in o.live(now) {
                    n.add_at(start, counts, now);
                }
            }
            (old, _) => self.preload(&old.snapshot(now), now),
        }
    }

    /// Fills an empty window with the counts of `snap` (a restored
    /// snapshot, or a change of window kind): the order of outcomes is not
    /// known, so a count window receives failures first and a time window
    /// everything in the current bucket.
    pub(crate) fn preload(&self, snap: &WindowSnapshot, now: Timestamp) {
        let snap = snap.clamped();
        match self {
            Window::Count(c) => {
                let keep = snap.calls.min(c.size());
                for bits in synthesize(&snap).take(keep as usize) {
                    c.record(bits);
                }
            }
            Window::Time(t) => t.add_at(
                now,
                [snap.calls, snap.failures, snap.slow, snap.slow_failures],
                now,
            ),
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
