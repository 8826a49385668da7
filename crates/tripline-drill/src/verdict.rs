//! The verdict: one row per written expectation, measured and judged.

use std::time::Duration;

use serde::Serialize;

use crate::events::TransitionSeen;
use crate::file::Drill;

/// One expectation's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The expectation key, as written in `[expect]`.
    pub key: String,
    /// What was expected, e.g. `<= 2s`.
    pub expected: String,
    /// What was measured, e.g. `0.41s (outage)`, or why nothing could be.
    pub measured: String,
    /// Whether it held.
    pub pass: bool,
}

/// One fault phase, measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseMeasure {
    /// Its name.
    pub name: String,
    /// Whether a trip was wanted.
    pub expect_trip: bool,
    /// Closed→Open transitions attributed to it.
    pub trips: u64,
    /// First trip minus the phase's start.
    #[serde(serialize_with = "opt_secs")]
    pub detection_delay: Option<Duration>,
    /// From the phase's end until every watched breaker was closed.
    #[serde(serialize_with = "opt_secs")]
    pub recovery: Option<Duration>,
    /// Most requests let through in one second while tripped.
    pub probe_peak_per_second: Option<u64>,
}

/// Everything measured, expectations or not (the JSON report has it all).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// Per fault phase, in file order.
    pub phases: Vec<PhaseMeasure>,
    /// Trips nobody wanted.
    pub false_trips: u64,
    /// Requests refused by a breaker while no fault was on.
    pub healthy_rejected: u64,
    /// Tries ÷ requests; `None` if the metrics could not be read.
    pub retry_amplification: Option<f64>,
    /// p99 latency in fault phases.
    #[serde(serialize_with = "opt_secs")]
    pub fault_p99: Option<Duration>,
}

/// Counts of the load.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Requests sent.
    pub sent: u64,
    /// Ticks skipped because `load.concurrency` requests were in flight.
    pub skipped: u64,
    /// Answers below 400.
    pub ok: u64,
    /// 5xx answers and requests without an answer.
    pub errors: u64,
    /// Refused by the proxy before any try.
    pub refused: u64,
    /// Without an answer.
    pub no_answer: u64,
}

/// A judged drill.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// The drill's name.
    pub drill: String,
    /// Why the abort rule stopped it, if it did.
    pub aborted: Option<String>,
    /// One per written expectation.
    pub rows: Vec<Row>,
    /// Everything measured.
    pub measured: Measured,
    /// The load's counts.
    pub summary: Summary,
    /// Transitions of the watched breakers.
    pub transitions: Vec<TransitionSeen>,
}

impl Outcome {
    /// 0 every expectation held, 1 one failed, 2 aborted by the abort rule.
    pub fn exit_code(&self) -> u8 {
        if self.aborted.is_some() {
            2
        } else if self.rows.iter().all(|r| r.pass) {
            0
        } else {
            1
        }
    }
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// The worst of each phase's value, with the phase it came from; a
/// phase without a value is the worst of all (named as `missing`).
fn worst<T: PartialOrd + Copy>(
    m: &Measured,
    wanted: impl Fn(&PhaseMeasure) -> bool,
    value: impl Fn(&PhaseMeasure) -> Option<T>,
) -> Result<Option<(T, String)>, String> {
    let mut worst: Option<(T, String)> = None;
    for p in m.phases.iter().filter(|p| wanted(p)) {
        match value(p) {
            None => return Err(p.name.clone()),
            Some(v) if worst.as_ref().is_none_or(|(w, _)| v > *w) => {
                worst = Some((v, p.name.clone()))
            }
            Some(_) => {}
        }
    }
    Ok(worst)
}

/// Judges every written expectation of `drill` against `m`.
pub(crate) fn judge(drill: &Drill, m: &Measured) -> Vec<Row> {
    let e = &drill.expect;
    let mut rows = Vec::new();
    let mut row = |key: &str, expected: String, measured: String, pass: bool| {
        rows.push(Row {
            key: key.to_owned(),
            expected,
            measured,
            pass,
        });
    };
    let tripped = |p: &PhaseMeasure| p.expect_trip;
    if let Some(limit) = e.trip_within {
        let (measured, pass) = match worst(m, tripped, |p| p.detection_delay) {
            Err(phase) => (format!("no trip in {phase:?}"), false),
            Ok(None) => ("no phase expects a trip".to_owned(), false),
            Ok(Some((d, phase))) => (format!("{} ({phase})", secs(d)), d <= limit),
        };
        row("trip_within", format!("<= {}", secs(limit)), measured, pass);
    }
    if let Some(limit) = e.false_trips {
        row(
            "false_trips",
            format!("<= {limit}"),
            m.false_trips.to_string(),
            m.false_trips <= limit,
        );
    }
    if let Some(limit) = e.max_healthy_rejected {
        let v = m.healthy_rejected;
        row(
            "max_healthy_rejected",
            format!("<= {limit}"),
            v.to_string(),
            v <= limit,
        );
    }
    let tripped_now = |p: &PhaseMeasure| p.trips > 0;
    if let Some(limit) = e.recover_within {
        let (measured, pass) = match worst(m, tripped_now, |p| p.recovery) {
            Err(phase) => (
                format!("not recovered after {phase:?} before the drill ended"),
                false,
            ),
            Ok(None) => ("nothing tripped".to_owned(), false),
            Ok(Some((d, phase))) => (format!("{} ({phase})", secs(d)), d <= limit),
        };
        row(
            "recover_within",
            format!("<= {}", secs(limit)),
            measured,
            pass,
        );
    }
    if let Some(limit) = e.max_probes_per_second {
        let (measured, pass) = match worst(m, tripped_now, |p| p.probe_peak_per_second) {
            Err(phase) => (format!("no whole second tripped in {phase:?}"), false),
            Ok(None) => ("nothing tripped".to_owned(), false),
            Ok(Some((v, phase))) => (format!("{v}/s ({phase})"), v <= limit),
        };
        row(
            "max_probes_per_second",
            format!("<= {limit}/s"),
            measured,
            pass,
        );
    }
    if let Some(limit) = e.max_retry_amplification {
        let (measured, pass) = match m.retry_amplification {
            Some(v) => (format!("{v:.3}"), v <= limit),
            None => (
                "unknown (the proxy's metrics could not be read)".to_owned(),
                false,
            ),
        };
        row(
            "max_retry_amplification",
            format!("<= {limit}"),
            measured,
            pass,
        );
    }
    if let Some(limit) = e.fault_p99 {
        let (measured, pass) = match m.fault_p99 {
            Some(v) => (secs(v), v <= limit),
            None => ("no request in a fault phase".to_owned(), false),
        };
        row("fault_p99", format!("<= {}", secs(limit)), measured, pass);
    }
    rows
}
