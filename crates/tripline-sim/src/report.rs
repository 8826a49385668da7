//! What a run cost: attribution to faults, totals, downstream load, score.
//!
//! # Attribution
//!
//! Each call (by its start time) and each transition (by its time) belongs
//! to the latest fault that started at or before that time — a fault with an
//! `at` list starts at its first instant — and stays with it until the next
//! fault starts; before the first fault it belongs to no fault. For a fault:
//! `trips` counts its Closed→Open transitions (all replicas);
//! `detection_delay` is its first trip minus its start; `recovered_at` is
//! the first HalfOpen→Closed (any replica) at or after that trip.
//! `false_trips` counts the trips of faults with `expect_trip = false`, plus
//! any trip before the first fault (there was nothing to detect).
//! `collateral_rejected` counts calls rejected while no fault was acting on
//! the dependency: healthy calls the breaker turned away.
//!
//! # JSON schema (`schema_version` 1)
//!
//! ```text
//! { "schema_version": 1, "scenario": str, "seed": u64, "duration": secs,
//!   "replicas": u32, "calls_per_replica": u64,
//!   "runs": [ { "breaker": str, "warnings": [str],
//!     "totals": { "calls", "succeeded", "failed", "rejected" },
//!     "transitions": [ { "at": secs, "replica", "from", "to", "reason",
//!                        "window": { "calls", "failures", "slow" } } ],
//!     "faults": [ { "name", "start": secs, "expect_trip": bool, "trips",
//!                   "detection_delay": secs|null, "recovered_at": secs|null,
//!                   "probe_peak_per_second": u64|null,
//!                   "sent_after_trip": u64|null,
//!                   "rejected", "failed", "succeeded" } ],
//!     "false_trips", "collateral_rejected",
//!     "downstream": { "peak_per_second": u64, "mean_per_second": f64 },
//!     "score": { "value", "detection", "missed", "false_trips", "collateral",
//!                "load", "lockstep" },
//!     "series": [ { "t", "succeeded", "failed", "rejected", "sent",
//!                   "open", "half_open" } ] } ] }
//! ```
//!
//! Times are seconds from the scenario start; states and reasons are the
//! library's snake_case names. Fields are only ever added, never renamed.

pub mod series;
pub mod text;

use rayon::prelude::*;
use serde::Serialize;
use serde::ser::SerializeStruct;

use crate::engine::{self, Counts, Plan, Trace, TransitionRecord};
use crate::scenario::{FaultWindow, Scenario, ScenarioError};
use crate::score::Score;

pub use crate::fault_report::FaultReport;

/// The version of the JSON schema above.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole scenario's report: one run per `[[breaker]]`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// See the module docs; bumped only on an incompatible change.
    pub schema_version: u32,
    /// The scenario's name.
    pub scenario: String,
    /// Its seed.
    pub seed: u64,
    /// Its duration, seconds.
    pub duration: f64,
    /// Replicas (breaker instances per run).
    pub replicas: u32,
    /// Calls each replica attempts.
    pub calls_per_replica: u64,
    /// One per breaker, in file order.
    pub runs: Vec<Run>,
}

/// One breaker config on the scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// The breaker's name.
    pub breaker: String,
    /// The config's validation warnings (e.g. a window that can never hold
    /// `minimum_calls`): a run that never trips often explains itself here.
    pub warnings: Vec<String>,
    /// All calls of all replicas.
    pub totals: Totals,
    /// Every transition, in time order.
    pub transitions: Vec<TransitionRecord>,
    /// Per fault, in file order.
    pub faults: Vec<FaultReport>,
    /// Trips nobody wanted (see the module docs).
    pub false_trips: u64,
    /// Healthy calls rejected.
    pub collateral_rejected: u64,
    /// Load that reached the dependency.
    pub downstream: Downstream,
    /// The ranking score of [`crate::score`].
    pub score: Score,
    /// Per second: outcomes, load on the dependency, replicas open and
    /// half-open ([`series`]).
    pub series: Vec<series::Second>,
    /// Calls by start second (for charts; in the JSON as `series`).
    #[serde(skip)]
    pub per_second: Vec<Counts>,
}

/// Call totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Calls attempted.
    pub calls: u64,
    /// Sent and succeeded.
    pub succeeded: u64,
    /// Sent and failed.
    pub failed: u64,
    /// Rejected by the breaker.
    pub rejected: u64,
}

/// Calls that reached the dependency, per one-second bucket, all replicas.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Downstream {
    /// The busiest second.
    pub peak_per_second: u64,
    /// Sent calls divided by the seconds of the scenario.
    pub mean_per_second: f64,
}

impl Serialize for TransitionRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Window {
            calls: u64,
            failures: u64,
            slow: u64,
        }
        let mut st = s.serialize_struct("Transition", 6)?;
        st.serialize_field("at", &secs(self.at))?;
        st.serialize_field("replica", &self.replica)?;
        st.serialize_field("from", self.from.as_str())?;
        st.serialize_field("to", self.to.as_str())?;
        st.serialize_field("reason", self.reason.as_str())?;
        let w = &self.window;
        let window = Window {
            calls: w.calls,
            failures: w.failures,
            slow: w.slow,
        };
        st.serialize_field("window", &window)?;
        st.end()
    }
}

/// Nanoseconds to seconds.
pub(crate) fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

impl Report {
    /// Runs every breaker of `scenario` (in parallel) and reports.
    pub fn simulate(scenario: &Scenario) -> Result<Report, ScenarioError> {
        let plan = Plan::new(scenario);
        let runs = scenario
            .breakers
            .par_iter()
            .enumerate()
            .map(|(i, b)| {
                let trace = engine::run(scenario, &plan, &b.config).map_err(|e| ScenarioError {
                    file: scenario.file.clone(),
                    position: None,
                    table: Some(format!("[[breaker]] #{} {:?}", i + 1, b.config.name)),
                    field: Some(e.field.clone()),
                    message: e.constraint.clone(),
                })?;
                Ok(Run::new(scenario, &plan, &b.config.name, trace))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Report {
            schema_version: SCHEMA_VERSION,
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            duration: scenario.duration.as_secs_f64(),
            replicas: scenario.traffic.replicas,
            calls_per_replica: plan.calls_per_replica(),
            runs,
        })
    }

    /// The report as pretty JSON (the schema of the module docs).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

impl Run {
    /// Summarises `trace`, a run of the breaker `name` on `scenario`.
    pub fn new(scenario: &Scenario, plan: &Plan, name: &str, trace: Trace) -> Run {
        let n = scenario.faults.len() + 1;
        let mut trips = vec![0u64; n];
        let mut first_trip: Vec<Option<u64>> = vec![None; n];
        for t in trace.transitions.iter().filter(|t| is_trip(t)) {
            let slot = plan.slot_at(t.at);
            trips[slot] += 1;
            first_trip[slot].get_or_insert(t.at);
        }
        let faults: Vec<FaultReport> = scenario
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let slot = i + 1;
                let start = f.window.start();
                let start_ns = u64::try_from(start.as_nanos()).unwrap_or(u64::MAX);
                let c = trace.slots[slot];
                let recovered = first_trip[slot].and_then(|trip| {
                    trace
                        .transitions
                        .iter()
                        .find(|t| t.at >= trip && is_recovery(t))
                        .map(|t| secs(t.at))
                });
                let after_trip = match (&f.window, first_trip[slot]) {
                    (FaultWindow::Interval { end, .. }, Some(trip)) => {
                        let from = (trip / 1_000_000_000 + 1) as usize;
                        let to = (end.as_secs() as usize).min(trace.per_second.len());
                        trace.per_second.get(from..to)
                    }
                    _ => None,
                };
                let probe_peak = after_trip.map(|s| s.iter().map(Counts::sent).max().unwrap_or(0));
                let sent_after_trip = after_trip.map(|s| s.iter().map(Counts::sent).sum());
                FaultReport {
                    name: f.name.clone(),
                    start: start.as_secs_f64(),
                    expect_trip: f.expect_trip,
                    trips: trips[slot],
                    detection_delay: first_trip[slot].map(|t| secs(t - start_ns)),
                    recovered_at: recovered,
                    probe_peak_per_second: probe_peak,
                    sent_after_trip,
                    rejected: c.rejected,
                    failed: c.failed,
                    succeeded: c.succeeded,
                }
            })
            .collect();
        let false_trips = trips[0]
            + faults
                .iter()
                .filter(|f| !f.expect_trip)
                .map(|f| f.trips)
                .sum::<u64>();
        let all = trace.slots.iter().fold(Counts::default(), |a, c| Counts {
            succeeded: a.succeeded + c.succeeded,
            failed: a.failed + c.failed,
            rejected: a.rejected + c.rejected,
        });
        let peak = trace.per_second.iter().map(Counts::sent).max().unwrap_or(0);
        let downstream = Downstream {
            peak_per_second: peak,
            mean_per_second: all.sent() as f64 / plan.seconds.max(1) as f64,
        };
        let score = Score::new(scenario, &faults, false_trips, trace.collateral_rejected);
        let series = series::build(
            &trace.per_second,
            &trace.transitions,
            scenario.traffic.replicas,
        );
        Run {
            breaker: name.to_owned(),
            warnings: trace.warnings.iter().map(ToString::to_string).collect(),
            totals: Totals {
                calls: all.calls(),
                succeeded: all.succeeded,
                failed: all.failed,
                rejected: all.rejected,
            },
            transitions: trace.transitions,
            faults,
            false_trips,
            collateral_rejected: trace.collateral_rejected,
            downstream,
            score,
            series,
            per_second: trace.per_second,
        }
    }

    /// Closed→Open transitions, all faults together.
    pub fn trips(&self) -> u64 {
        self.transitions.iter().filter(|t| is_trip(t)).count() as u64
    }
}

fn is_trip(t: &TransitionRecord) -> bool {
    t.from == tripline::State::Closed && t.to == tripline::State::Open
}

fn is_recovery(t: &TransitionRecord) -> bool {
    t.from == tripline::State::HalfOpen && t.to == tripline::State::Closed
}
