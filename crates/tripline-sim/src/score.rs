//! The ranking score: what a breaker config cost on a scenario, in seconds.
//!
//! Parameters should be chosen by measured trade-offs: a breaker
//! that trips early also trips on blips and rejects healthy calls, one that
//! waits lets a real outage hit callers longer. The score puts the three
//! costs on one scale, *seconds of harm*, lower is better:
//!
//! ```text
//! score = detection + 5 × false_trips + collateral
//! detection  = Σ over faults with expect_trip = true of its detection delay,
//!              or, if no trip was attributed to it, how long it acted
//!              (end − start; for an `at` list, its instants ÷ rate)
//! collateral = collateral_rejected ÷ (rate × replicas): seconds of healthy
//!              traffic turned away
//! ```
//!
//! A false trip costs its collateral rejections plus a flat
//! [`FALSE_TRIP_SECONDS`]: the page, the flapping dashboard and the trust
//! in the breaker it burns. Ties keep their order (file or grid order).

use serde::Serialize;

use crate::report::{FaultReport, fault_span};
use crate::scenario::Scenario;

/// The flat cost of one false trip, in seconds.
pub const FALSE_TRIP_SECONDS: f64 = 5.0;

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
        }
        let collateral = collateral_rejected as f64 / scenario.total_rate();
        Score {
            value: detection + FALSE_TRIP_SECONDS * false_trips as f64 + collateral,
            detection,
            missed,
            false_trips,
            collateral,
        }
    }
}
