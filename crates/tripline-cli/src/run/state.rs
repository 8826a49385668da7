//! The state file: a checkpoint, the current probe round's log, counters.
//!
//! Versioned JSON (`"version": 1`); a file of another version, or one that
//! does not parse, is treated as corrupt (reported, then replaced by a
//! fresh breaker). All times are wall-clock nanoseconds since the Unix
//! epoch.

use serde::{Deserialize, Serialize};
use tripline::breaker::WindowContents;

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
    /// Probe admissions and outcomes since the Open checkpoint, in order.
    pub(crate) log: Vec<ProbeEvent>,
    /// The next probe lease id.
    pub(crate) next_lease: u64,
    /// Cumulative counts for metrics.
    pub(crate) counters: Counters,
}

impl StateFile {
    /// A closed breaker with an empty window.
    pub(crate) fn fresh() -> Self {
        StateFile {
            version: VERSION,
            epoch: 0,
            checkpoint: Checkpoint::Closed { window: None },
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
    /// back or `expires_at` passes.
    Admit {
        lease: u64,
        at: u64,
        pid: u32,
        expires_at: u64,
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
    /// The lease expired or its process vanished: a failed probe.
    Reclaimed,
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
