//! The ranking score: what a breaker config cost on a scenario, in seconds.
//!
//! Parameters should be chosen by measured trade-offs: a breaker
//! that trips early also trips on blips and rejects healthy calls, one that
//! waits lets a real outage hit callers longer, one that probes too often
//! or in lock-step with its replicas keeps hammering a dependency that is
//! down. The score puts these costs on one scale, *seconds of harm*, lower
//! is better:
//!
//! ```text
//! score = detection + 5 × false_trips + collateral + load + lockstep
//! detection  = Σ over faults with expect_trip = true of its detection delay,
//!              or, if no trip was attributed to it, how long it acted
//!              (end − start; for an `at` list, its instants ÷ rate)
//! collateral = collateral_rejected ÷ (rate × replicas): seconds of healthy
//!              traffic turned away
//! load       = Σ over those faults of the calls still sent to the failing
//!              dependency after the first trip ÷ (rate × replicas):
//!              seconds of full traffic sent into a known outage
//! lockstep   = with more than one replica, Σ over those faults of
//!              10 s × probe peak ÷ replicas: the share of the replicas
//!              that probed in the same second, at 10 s when all of them did
//! ```
//!
//! A false trip costs its collateral rejections plus a flat
//! [`FALSE_TRIP_SECONDS`]: the page, the flapping dashboard and the trust
//! in the breaker it burns. Lock-step probing costs up to
//! [`LOCKSTEP_SECONDS`] per outage: the simulated dependency has no
//! capacity limit, but a real one that is recovering (cold caches,
//! restarting pools) is knocked over again when every caller probes it in
//! the same instant. Ties keep their order (file or grid order); reports
//! flag them.

use serde::Serialize;

use crate::fault_report::FaultReport;
use crate::scenario::{Scenario, fault_span};

/// The flat cost of one false trip, in seconds.
pub const FALSE_TRIP_SECONDS: f64 = 5.0;

/// The cost of every replica probing an outage in the same second, in
/// seconds (a share of the replicas costs that share of it).
pub const LOCKSTEP_SECONDS: f64 = 10.0;

/// A run's score and its parts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Score {
    /// The total, seconds; lower is better.
    pub value: f64,
    /// Σ detection delays, misses counted at full length, seconds.
    pub detection: f64,
    /// Faults with `expect_trip = true` and no trip.
    pub missed: u64,
    /// False trips.
    pub false_trips: u64,
    /// Collateral rejections as seconds of healthy traffic.
    pub collateral: f64,
    /// Calls sent into outages after their first trip, as seconds of
    /// full traffic.
    pub load: f64,
    /// Lock-step probing: [`LOCKSTEP_SECONDS`] × the share of replicas
    /// probing in the busiest second, summed over outages.
    pub lockstep: f64,
}

impl Score {
    /// Scores a run of `scenario` from its per-fault reports.
    pub fn new(
        scenario: &Scenario,
        faults: &[FaultReport],
        false_trips: u64,
        collateral_rejected: u64,
    ) -> Score {
        let mut detection = 0.0;
        let mut missed = 0;
        let mut sent_after_trip = 0;
        let mut lockstep = 0.0;
        let replicas = scenario.traffic.replicas;
        for (f, r) in scenario
            .faults
            .iter()
            .zip(faults)
            .filter(|(f, _)| f.expect_trip)
        {
            match r.detection_delay {
                Some(d) => detection += d,
                None => {
                    missed += 1;
                    detection += fault_span(scenario, &f.window);
                }
            }
            sent_after_trip += r.sent_after_trip.unwrap_or(0);
            if replicas > 1
                && let Some(peak) = r.probe_peak_per_second
            {
                let share = (peak as f64 / f64::from(replicas)).min(1.0);
                lockstep += LOCKSTEP_SECONDS * share;
            }
        }
        let collateral = collateral_rejected as f64 / scenario.total_rate();
        let load = sent_after_trip as f64 / scenario.total_rate();
        Score {
            value: detection
                + FALSE_TRIP_SECONDS * false_trips as f64
                + collateral
                + load
                + lockstep,
            detection,
            missed,
            false_trips,
            collateral,
            load,
            lockstep,
        }
    }
}
