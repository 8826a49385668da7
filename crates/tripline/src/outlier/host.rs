//! One endpoint's outlier state: lock-free counters written on the call
//! path, and ejection bookkeeping touched only by the (locked) analysis.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::Detector;
use crate::endpoint::EndpointOutcome;

/// Consecutive-error streak counters, by detector.
pub(crate) const STREAK_FAILURES: usize = 0;
pub(crate) const STREAK_GATEWAY: usize = 1;
pub(crate) const STREAK_LOCAL: usize = 2;

/// The streak thresholds in force, copied into the detector so the call
/// path reads plain integers (0: the detector is off).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Thresholds {
    pub(crate) streak: [u32; 3],
    pub(crate) split: bool,
}

/// Which interval counter a request lands in.
pub(crate) const EXT_TOTAL: usize = 0;
pub(crate) const EXT_FAIL: usize = 1;
pub(crate) const LOCAL_TOTAL: usize = 2;
pub(crate) const LOCAL_FAIL: usize = 3;

/// What outlier detection has counted for one endpoint (all zero without
/// outlier detection, which then records nothing).
///
/// ```
/// use tripline::outlier::OutlierCounts;
/// assert_eq!(OutlierCounts::default().requests, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutlierCounts {
    /// Requests answered or failed upstream (all requests, unsplit).
    pub requests: u64,
    /// Of which failures.
    pub failures: u64,
    /// Requests counted for local-origin detection (split mode).
    pub local_origin_requests: u64,
    /// Of which local-origin failures.
    pub local_origin_failures: u64,
    /// `requests` in the interval the last analysis pass judged.
    pub last_interval_requests: u64,
    /// `failures` in that interval.
    pub last_interval_failures: u64,
    /// The current streak of failures.
    pub consecutive_failures: u32,
    /// The current streak of gateway failures.
    pub consecutive_gateway_failures: u32,
    /// The current streak of local-origin failures.
    pub consecutive_local_origin_failures: u32,
}

/// Per-endpoint outlier state.
#[derive(Debug, Default)]
pub(crate) struct HostOutlier {
    /// Consecutive errors, by `STREAK_*`.
    streak: [AtomicU32; 3],
    /// Cumulative requests and failures, by `EXT_*` / `LOCAL_*`.
    counts: [AtomicU64; 4],
    // --- analysis-only (written under the cluster's health lock) ---
    /// `counts` as the previous analysis pass saw them.
    pub(crate) seen: [AtomicU64; 4],
    /// Interval counts of the last pass (for reports), by `EXT_*` / `LOCAL_*`.
    pub(crate) interval: [AtomicU64; 4],
    /// When the current ejection ends (nanoseconds), if ejected.
    pub(crate) ejected_until: AtomicU64,
    /// When the current ejection began (nanoseconds).
    pub(crate) ejected_at: AtomicU64,
    /// Ejections in a row: the ejection-time multiplier.
    pub(crate) multiplier: AtomicU32,
    /// Ejections since the endpoint joined.
    pub(crate) ejections: AtomicU64,
}

impl HostOutlier {
    /// Records one outcome; returns the streak detector whose threshold
    /// this outcome reached (exactly, so one caller acts on it).
    #[inline]
    pub(crate) fn record(&self, outcome: EndpointOutcome, t: &Thresholds) -> Option<Detector> {
        let add = |i: usize, fail: bool| {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
            if fail {
                self.counts[i + 1].fetch_add(1, Ordering::Relaxed);
            }
        };
        match outcome {
            EndpointOutcome::Success | EndpointOutcome::Ignored => {
                add(EXT_TOTAL, false);
                if t.split {
                    add(LOCAL_TOTAL, false);
                }
                for s in &self.streak {
                    if s.load(Ordering::Relaxed) != 0 {
                        s.store(0, Ordering::Relaxed);
                    }
                }
                None
            }
            EndpointOutcome::UpstreamFailure => {
                add(EXT_TOTAL, true);
                if t.split {
                    add(LOCAL_TOTAL, false);
                    self.reset(STREAK_LOCAL);
                }
                self.reset(STREAK_GATEWAY);
                self.bump(STREAK_FAILURES, t)
            }
            EndpointOutcome::ConnectFailure | EndpointOutcome::LocalOriginFailure if t.split => {
                add(LOCAL_TOTAL, true);
                self.bump(STREAK_LOCAL, t)
            }
            // Gateway errors, and unsplit local-origin errors (Envoy maps
            // a failed connection to a 503).
            _ => {
                add(EXT_TOTAL, true);
                if t.split {
                    add(LOCAL_TOTAL, false);
                    self.reset(STREAK_LOCAL);
                }
                let a = self.bump(STREAK_FAILURES, t);
                let b = self.bump(STREAK_GATEWAY, t);
                a.or(b)
            }
        }
    }

    #[inline]
    fn reset(&self, i: usize) {
        if self.streak[i].load(Ordering::Relaxed) != 0 {
            self.streak[i].store(0, Ordering::Relaxed);
        }
    }

    #[inline]
    fn bump(&self, i: usize, t: &Thresholds) -> Option<Detector> {
        let n = self.streak[i]
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        let threshold = t.streak[i];
        (threshold != 0 && n == threshold).then_some(match i {
            STREAK_FAILURES => Detector::ConsecutiveFailures,
            STREAK_GATEWAY => Detector::ConsecutiveGatewayFailures,
            _ => Detector::ConsecutiveLocalOriginFailures,
        })
    }

    /// The current streak of `i`.
    pub(crate) fn streak(&self, i: usize) -> u32 {
        self.streak[i].load(Ordering::Relaxed)
    }

    /// Restarts every streak (after an ejection decision, so a detector
    /// re-arms only after a fresh run of errors).
    pub(crate) fn reset_streaks(&self) {
        for s in &self.streak {
            s.store(0, Ordering::Relaxed);
        }
    }

    /// Moves the interval window: the counts since the previous pass, by
    /// `EXT_*` / `LOCAL_*`.
    pub(crate) fn take_interval(&self) -> [u64; 4] {
        let mut out = [0; 4];
        for (i, o) in out.iter_mut().enumerate() {
            let now = self.counts[i].load(Ordering::Relaxed);
            let before = self.seen[i].swap(now, Ordering::Relaxed);
            *o = now.wrapping_sub(before);
            self.interval[i].store(*o, Ordering::Relaxed);
        }
        out
    }

    /// Cumulative counts and the last interval's, for reports.
    pub(crate) fn counts(&self) -> OutlierCounts {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        let l = |i: usize| self.interval[i].load(Ordering::Relaxed);
        OutlierCounts {
            requests: c(EXT_TOTAL),
            failures: c(EXT_FAIL),
            local_origin_requests: c(LOCAL_TOTAL),
            local_origin_failures: c(LOCAL_FAIL),
            last_interval_requests: l(EXT_TOTAL),
            last_interval_failures: l(EXT_FAIL),
            consecutive_failures: self.streak(STREAK_FAILURES),
            consecutive_gateway_failures: self.streak(STREAK_GATEWAY),
            consecutive_local_origin_failures: self.streak(STREAK_LOCAL),
        }
    }
}
