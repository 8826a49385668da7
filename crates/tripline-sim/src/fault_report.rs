//! One fault's line in a report: what it cost and how the breaker handled it.
//!
//! The [`report`](crate::report) builds these per run and the
//! [`score`](crate::score) prices them; the type sits below both so the
//! score reads a report's faults without importing the report that
//! contains the score. Its public path is `report::FaultReport`.

use serde::Serialize;

/// One fault's cost and how the breaker handled it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultReport {
    /// Its name.
    pub name: String,
    /// When it started, seconds.
    pub start: f64,
    /// Whether a trip was wanted.
    pub expect_trip: bool,
    /// Closed→Open transitions attributed to it.
    pub trips: u64,
    /// First trip minus start, seconds.
    pub detection_delay: Option<f64>,
    /// First HalfOpen→Closed at or after the first trip, seconds.
    pub recovered_at: Option<f64>,
    /// The most calls that reached the dependency in one second (all
    /// replicas) from the second after the first trip to the fault's end:
    /// with the breakers open these are probes, and a high peak means
    /// replicas probing in lock-step. Null without a trip
    /// or for an `at` fault.
    pub probe_peak_per_second: Option<u64>,
    /// Calls that still reached the dependency from the second after the
    /// first trip to the fault's end (all replicas): load sent into an
    /// outage the breakers already knew about. Null without a trip or for
    /// an `at` fault.
    pub sent_after_trip: Option<u64>,
    /// Calls attributed to it that were rejected.
    pub rejected: u64,
    /// … that were sent and failed.
    pub failed: u64,
    /// … that were sent and succeeded.
    pub succeeded: u64,
}
