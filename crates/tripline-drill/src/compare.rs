//! Simulated against measured: the same expectation keys from a
//! `tripline simulate` run of a scenario and from a drill, side by side.
//!
//! A drill is usually shortened and its load differs from the scenario's,
//! so counts (false trips, healthy rejections, probes per second) compare
//! in kind and order of magnitude, and times (detection, recovery) compare
//! directly when the breaker's parameters are the same.

use std::fmt::Write;
use std::path::Path;

use tripline_sim::report::Report;
use tripline_sim::scenario::{FaultWindow, Scenario};

use crate::DrillError;
use crate::file::Drill;
use crate::verdict::Outcome;

/// One shared key.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CompareRow {
    /// The drill's expectation key.
    pub key: String,
    /// The simulator's value (first fault expecting a trip).
    pub simulated: String,
    /// The drill's value (worst phase).
    pub measured: String,
}

/// The simulator's values of the shared keys, computed before the drill
/// runs so a bad scenario fails fast.
#[derive(Clone, Debug, PartialEq)]
pub struct Simulated {
    /// The scenario's `[[breaker]]` compared.
    pub breaker: String,
    detection: Option<f64>,
    false_trips: u64,
    collateral: u64,
    recovery: Option<f64>,
    probes: Option<u64>,
}

/// Simulates `scenario_path`; its run is `drill.compare_breaker`'s, or
/// its first breaker's, and its fault the first expecting a trip.
pub fn simulate(drill: &Drill, scenario_path: &Path) -> Result<Simulated, DrillError> {
    let bad = |message: String| DrillError::File {
        file: scenario_path.display().to_string(),
        message,
    };
    let scenario = Scenario::load(scenario_path).map_err(|e| bad(e.to_string()))?;
    let report = Report::simulate(&scenario).map_err(|e| bad(e.to_string()))?;
    let run = match &drill.compare_breaker {
        Some(name) => report
            .runs
            .iter()
            .find(|r| &r.breaker == name)
            .ok_or_else(|| {
                bad(format!(
                    "compare_breaker: the scenario has no [[breaker]] named {name:?}"
                ))
            })?,
        None => report
            .runs
            .first()
            .ok_or_else(|| bad("the scenario has no [[breaker]]".to_owned()))?,
    };
    let fault = run
        .faults
        .iter()
        .zip(&scenario.faults)
        .find(|(f, _)| f.expect_trip);
    Ok(Simulated {
        breaker: run.breaker.clone(),
        detection: fault.and_then(|(f, _)| f.detection_delay),
        false_trips: run.false_trips,
        collateral: run.collateral_rejected,
        recovery: fault.and_then(|(f, spec)| match spec.window {
            FaultWindow::Interval { end, .. } => {
                f.recovered_at.map(|r| (r - end.as_secs_f64()).max(0.0))
            }
            FaultWindow::Instants(_) => None,
        }),
        probes: fault.and_then(|(f, _)| f.probe_peak_per_second),
    })
}

/// Lines the simulated values up with the drill's `outcome`.
pub fn compare(sim: &Simulated, outcome: &Outcome) -> Vec<CompareRow> {
    let opt =
        |v: Option<f64>, unit: &str| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}{unit}"));
    let (sim_detect, sim_recover, sim_probes) = (sim.detection, sim.recovery, sim.probes);
    let m = &outcome.measured;
    let worst_secs = |f: fn(&crate::verdict::PhaseMeasure) -> Option<std::time::Duration>| {
        m.phases
            .iter()
            .filter_map(f)
            .map(|d| d.as_secs_f64())
            .reduce(f64::max)
    };
    vec![
        CompareRow {
            key: "trip_within".into(),
            simulated: opt(sim_detect, "s"),
            measured: opt(worst_secs(|p| p.detection_delay), "s"),
        },
        CompareRow {
            key: "false_trips".into(),
            simulated: sim.false_trips.to_string(),
            measured: m.false_trips.to_string(),
        },
        CompareRow {
            key: "max_healthy_rejected".into(),
            simulated: sim.collateral.to_string(),
            measured: m.healthy_rejected.to_string(),
        },
        CompareRow {
            key: "recover_within".into(),
            simulated: opt(sim_recover, "s"),
            measured: opt(worst_secs(|p| p.recovery), "s"),
        },
        CompareRow {
            key: "max_probes_per_second".into(),
            simulated: sim_probes.map_or_else(|| "-".to_owned(), |v| format!("{v}/s")),
            measured: m
                .phases
                .iter()
                .filter_map(|p| p.probe_peak_per_second)
                .max()
                .map_or_else(|| "-".to_owned(), |v| format!("{v}/s")),
        },
    ]
}

/// The comparison as a table, headed by the scenario and breaker.
pub fn text(scenario: &Path, sim: &Simulated, rows: &[CompareRow]) -> String {
    let mut s = format!(
        "\nsimulated ({}, breaker {:?}) vs measured:\n",
        scenario.display(),
        sim.breaker
    );
    let _ = writeln!(s, "{:<22}  {:>12}  {:>12}", "key", "simulated", "measured");
    for r in rows {
        let _ = writeln!(s, "{:<22}  {:>12}  {:>12}", r.key, r.simulated, r.measured);
    }
    s
}
