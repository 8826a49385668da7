//! The state file: a checkpoint, the current probe round's log, counters.
//!
//! Versioned JSON (`"version": 1`); a file of another version, or one that
//! does not parse, is treated as corrupt (reported, then replaced by a
//! fresh breaker). All times are wall-clock nanoseconds since the Unix
//! epoch.

use serde::{Deserialize, Serialize};
use tripline::breaker::{StateTimes, WindowContents};

use super::owner::Owner;

/// The state file format's version.
pub(crate) const VERSION: u32 = 1;

/// Everything one breaker keeps between runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateFile {
    pub(crate) version: u32,
    /// Bumped on every checkpoint change of state (see the module docs of
    /// `run`): an outcome admitted in an older epoch does not move the
    /// breaker.
    pub(crate) epoch: u64,
    pub(crate) checkpoint: Checkpoint,
    /// When the breaker entered its state, began its warm-up and last
    /// recovered: what `min_state_duration`, `warm_up` and `cooldown` count
    /// from. Absent in files written before it existed (the breaker then
    /// counts from the run that reads it, and saves the times from then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) times: Option<StateTimes>,
    /// Probe admissions and outcomes since the Open checkpoint, in order.
    pub(crate) log: Vec<ProbeEvent>,
    /// The next probe lease id.
    pub(crate) next_lease: u64,
    /// Cumulative counts for metrics.
    pub(crate) counters: Counters,
}

impl StateFile {
    /// Whether going from `self` to `next` changed a decision other runs
    /// act on — the breaker's state (every change bumps the epoch) or a
    /// probe lease (the log) — rather than only the evidence (the window,
    /// the times, the counters). Only such writes are fsynced (see
    /// `Store::write`).
    pub(crate) fn decision_differs(&self, next: &StateFile) -> bool {
        self.epoch != next.epoch || self.log != next.log || self.next_lease != next.next_lease
    }

    /// A closed breaker with an empty window.
    pub(crate) fn fresh() -> Self {
        StateFile {
            version: VERSION,
            epoch: 0,
            checkpoint: Checkpoint::Closed { window: None },
            times: None,
            log: Vec::new(),
            next_lease: 1,
            counters: Counters::default(),
        }
    }
}

/// A state that is exact without replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Checkpoint {
    /// Closed, with the window's exact contents (`None`: empty).
    Closed { window: Option<WindowContents> },
    /// Open until `until`; probing starts after it.
    Open {
        opened_at: u64,
        until: u64,
        backoff_round: u64,
        /// Why it opened, for the message while open.
        reason: String,
    },
    /// Held open by an operator until `--reset`.
    ForcedOpen { since: u64 },
}

/// One step of a probe round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum ProbeEvent {
    /// A probe was admitted: a lease held by process `pid` until it reports
    /// back, `expires_at` passes, or `owner` shows the process dead (see
    /// `owner`; absent in older files and where `/proc` cannot say).
    Admit {
        lease: u64,
        at: u64,
        pid: u32,
        expires_at: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<Owner>,
    },
    /// The probe of `lease` finished.
    Finish {
        lease: u64,
        at: u64,
        verdict: Verdict,
        elapsed_nanos: u64,
    },
}

/// How a run is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Success,
    Failure,
    /// Not evidence either way (an exit code not listed as a failure).
    Ignored,
    /// Interrupted by an operator's signal, or never started: released.
    Cancelled,
    /// The lease expired: a failed probe (one that never reported back in
    /// time is no evidence of recovery).
    Reclaimed,
    /// The lease's process died before reporting (killed): its slot is
    /// released at once, as no evidence either way.
    Abandoned,
}

/// Cumulative counts since the state file was created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Counters {
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    pub(crate) ignored: u64,
    pub(crate) cancelled: u64,
    pub(crate) rejected: u64,
    /// Outcomes of runs admitted before the breaker moved on (counted,
    /// never applied).
    pub(crate) stale: u64,
    pub(crate) reclaimed: u64,
    /// Probe leases freed because their process died.
    pub(crate) abandoned: u64,
    pub(crate) transitions: u64,
}

impl Counters {
    pub(crate) fn count(&mut self, v: Verdict) {
        let c = match v {
            Verdict::Success => &mut self.succeeded,
            Verdict::Failure => &mut self.failed,
            Verdict::Ignored => &mut self.ignored,
            Verdict::Cancelled => &mut self.cancelled,
            Verdict::Reclaimed => &mut self.reclaimed,
            Verdict::Abandoned => &mut self.abandoned,
        };
        *c += 1;
    }
}

/// Operator actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operator {
    Reset,
    ForceOpen,
}
