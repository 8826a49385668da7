//! A breaker's counters, as one snapshot.
//!
//! Rejections are counted apart from failures: mixing them makes a
//! dependency that recovered long ago look like it is still failing.
//! Totals are cumulative since the breaker was created and derived from the
//! window's own words, so collecting them costs the hot path nothing; a
//! reconfiguration that replaces the window carries them over (the window
//! cell adds up every window the breaker has had), so they never decrease.

use super::State;
use super::core::Inner;
use super::counters::Counter;
use super::window::WindowSnapshot;
use crate::clock::Timestamp;

/// Cumulative call counts by outcome: since the breaker was created, across
/// every reconfiguration (a new window shape re-samples only the live
/// [`Metrics::window`]), resets and time-bucket rollovers, so no count ever
/// decreases from one read to the next, whichever threads are recording,
/// resetting or reconfiguring meanwhile. Read while calls are being
/// recorded, a count may lag by the calls in flight (a failure seen before
/// its call is, so one success fewer for a moment), never lead: a failure
/// is never read as a success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CallCounts {
    /// Calls that succeeded (closed, probe or late).
    pub successful: u64,
    /// Calls that failed (closed, probe or late).
    pub failed: u64,
    /// Closed-state calls that were slow (failed or not).
    pub slow: u64,
    /// Closed-state calls both slow and failed.
    pub slow_failed: u64,
    /// Calls whose outcome was classified as not evidence.
    pub ignored: u64,
    /// Calls the breaker refused: exact, even when many threads reject at
    /// once (counted per thread without an atomic read-modify-write on the
    /// common path, and nothing lost).
    pub rejected: u64,
    /// Permits dropped without an outcome (cancelled, panicked).
    pub cancelled: u64,
    /// Outcomes recorded after the state they were admitted under ended:
    /// counted here, never applied to the new state.
    pub late: u64,
    /// Half-open probes that succeeded.
    pub probes_succeeded: u64,
    /// Half-open probes that failed.
    pub probes_failed: u64,
}

/// A snapshot of one breaker.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Metrics {
    /// The breaker's name.
    pub name: String,
    /// Current state.
    pub state: State,
    /// Current state generation (transitions so far).
    pub generation: u64,
    /// When the current state was entered.
    pub state_since: Timestamp,
    /// When an `Open` state ends.
    pub open_until: Option<Timestamp>,
    /// The breaker is `Open`, its open duration has passed, and the next
    /// call will probe. An open breaker moves to `HalfOpen` lazily, on that
    /// call, so `state` says `Open` until traffic arrives; a dashboard or
    /// exporter shows this as "probe due" rather than as rejecting.
    pub probe_due: bool,
    /// Consecutive failed probe rounds (the backoff step).
    pub backoff_round: u64,
    /// The live window.
    pub window: WindowSnapshot,
    /// Cumulative counts.
    pub calls: CallCounts,
    /// Transitions so far.
    pub transitions: u64,
    /// Half-open probes admitted and not yet finished (0 unless half-open).
    pub probes_in_flight: u64,
    /// The config version in force.
    pub config_version: u64,
    /// The slow-call threshold in force (fixed or learned).
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub slow_call_threshold: Option<std::time::Duration>,
}

pub(crate) fn collect(inner: &Inner) -> Metrics {
    let c = inner.counters();
    let t = inner.totals();
    let w = inner.word();
    let probes_succeeded = c.get(Counter::ProbeSuccess);
    let probes_failed = c.get(Counter::ProbeFailure);
    let late_success = c.get(Counter::LateSuccess);
    let late_failure = c.get(Counter::LateFailure);
    Metrics {
        name: inner.name.to_string(),
        state: w.state(),
        generation: w.generation(),
        state_since: inner.entered_at(),
        open_until: inner.open_until(),
        probe_due: inner.probe_due(w),
        backoff_round: inner.open_round(),
        window: inner.window_snapshot(),
        calls: CallCounts {
            successful: inner.successful_reported(
                t.calls.saturating_sub(t.failures) + probes_succeeded + late_success,
            ),
            failed: t.failures + probes_failed + late_failure,
            slow: t.slow,
            slow_failed: t.slow_failures,
            ignored: c.get(Counter::Ignored),
            rejected: c.get(Counter::Rejected),
            cancelled: c.get(Counter::Cancelled),
            late: late_success + late_failure,
            probes_succeeded,
            probes_failed,
        },
        transitions: inner.transitions(),
        probes_in_flight: if w.state() == State::HalfOpen {
            inner.probes_in_flight(w.generation())
        } else {
            0
        },
        config_version: inner.config_version(),
        slow_call_threshold: inner.slow_call_threshold(),
    }
}
