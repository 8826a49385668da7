//! The exact contents of a breaker's window, as data.
//!
//! [`Snapshot`](super::Snapshot) keeps a window as four aggregate counts,
//! which is enough to show it but not to continue it: restored, the counts
//! land in the current bucket of a time window (so they age out a whole
//! window late) and a count window loses the order in which its outcomes
//! will be evicted. A process that lives for one call — a CI step, a cron
//! job — rebuilds its breaker on every run, so those errors would
//! accumulate. [`WindowContents`] keeps what the window really holds: each
//! live bucket with its start time on the breaker's clock, or each outcome
//! of a count window in order. Restored into a breaker with the same
//! window shape, on a clock that continues the one it was taken on, the
//! window is the one that was saved.

use super::window::{FAILURE, SLOW, Window};
use crate::clock::Timestamp;

/// One recorded outcome of a count window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WindowOutcome {
    /// The call failed.
    pub failed: bool,
    /// The call was slow.
    pub slow: bool,
}

/// One live bucket of a time window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WindowBucket {
    /// When the bucket starts, in nanoseconds on the breaker's clock.
    pub start_nanos: u64,
    /// Calls recorded in the bucket.
    pub calls: u64,
    /// Failures among them.
    pub failures: u64,
    /// Slow calls among them.
    pub slow: u64,
    /// Calls both slow and failed.
    pub slow_failures: u64,
}

/// What a breaker's window holds, exactly: see the module docs for why the
/// aggregate [`WindowSnapshot`](super::WindowSnapshot) is not enough.
///
/// ```
/// use tripline::breaker::WindowContents;
/// use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};
/// use std::time::Duration;
///
/// let config = CircuitBreakerConfig {
///     name: "deploy".into(),
///     window: WindowConfig::Count { size: 4 },
///     ..Default::default()
/// };
/// let first = CircuitBreaker::builder().config(config.clone()).build().unwrap();
/// first.try_acquire().unwrap().record(Outcome::Failure, Duration::ZERO);
/// let contents = first.window_contents();
///
/// let second = CircuitBreaker::builder()
///     .config(config)
///     .restore_window(contents.clone())
///     .build()
///     .unwrap();
/// assert!(matches!(contents, WindowContents::Count { .. }));
/// assert_eq!(second.window_contents(), contents);
/// assert_eq!(second.window().failures, 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum WindowContents {
    /// A count window's outcomes, oldest first.
    Count {
        /// The outcomes, oldest first.
        outcomes: Vec<WindowOutcome>,
    },
    /// A time window's live buckets, oldest first.
    Time {
        /// The buckets that hold calls, oldest first.
        buckets: Vec<WindowBucket>,
    },
}

impl WindowContents {
    /// Reads `window` at `now`.
    pub(crate) fn of(window: &Window, now: Timestamp) -> Self {
        match window {
            Window::Count(c) => WindowContents::Count {
                outcomes: c
                    .recent(c.size() as usize)
                    .into_iter()
                    .map(|bits| WindowOutcome {
                        failed: bits & FAILURE != 0,
                        slow: bits & SLOW != 0,
                    })
                    .collect(),
            },
            Window::Time(t) => WindowContents::Time {
                buckets: t
                    .live(now)
                    .into_iter()
                    .map(|(start, c)| WindowBucket {
                        start_nanos: start.as_nanos(),
                        calls: c[0],
                        failures: c[1],
                        slow: c[2],
                        slow_failures: c[3],
                    })
                    .collect(),
            },
        }
    }

    /// Fills the empty `window` with these contents at `now`. Contents of
    /// the other window kind fall back to the aggregate preload (the shape
    /// was changed between save and restore); a bucket that has aged out
    /// by `now` is dropped, as the window would have dropped it.
    pub(crate) fn fill(&self, window: &Window, now: Timestamp) {
        match (self, window) {
            (WindowContents::Count { outcomes }, Window::Count(c)) => {
                for o in outcomes {
                    c.record((u8::from(o.failed) * FAILURE) | (u8::from(o.slow) * SLOW));
                }
            }
            (WindowContents::Time { buckets }, Window::Time(t)) => {
                for b in buckets {
                    let counts = [b.calls, b.failures, b.slow, b.slow_failures];
                    t.add_at(Timestamp::from_nanos(b.start_nanos), counts, now);
                }
            }
            _ => window.preload(&self.aggregate(), now),
        }
    }

    /// The four counts these contents add up to.
    fn aggregate(&self) -> super::WindowSnapshot {
        let mut s = super::WindowSnapshot::default();
        match self {
            WindowContents::Count { outcomes } => {
                for o in outcomes {
                    s.calls += 1;
                    s.failures += u64::from(o.failed);
                    s.slow += u64::from(o.slow);
                    s.slow_failures += u64::from(o.failed && o.slow);
                }
            }
            WindowContents::Time { buckets } => {
                for b in buckets {
                    s.calls += b.calls;
                    s.failures += b.failures;
                    s.slow += b.slow;
                    s.slow_failures += b.slow_failures;
                }
            }
        }
        s
    }
}
