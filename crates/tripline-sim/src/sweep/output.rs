//! A sweep as text, JSON, CSV and an SVG trade-off chart.
//!
//! JSON (`schema_version` 1):
//!
//! ```text
//! { "schema_version": 1, "scenario": str, "breaker": str, "grid": [key],
//!   "score": "<formula>",
//!   "results": [ { "rank", "params": { key: value-as-written },
//!                  "score", "detection", "missed", "false_trips",
//!                  "collateral", "collateral_rejected", "load",
//!                  "lockstep", "tie": bool, "trips", "rejected", "failed",
//!                  "warnings": [str] } ] }
//! ```
//!
//! CSV: one header row `rank,score,detection,missed,false_trips,
//! collateral_rejected,trips,rejected,failed,load,lockstep,tie,<grid keys…>`,
//! then one row per
//! result by rank; fields holding commas or quotes are quoted (RFC 4180).

use std::fmt::Write;

use serde_json::{Map, Value, json};

use super::{Sweep, SweepResult};
use crate::report::text::{count, fmt_secs, table};

mod chart;

pub use chart::{LABELLED, MARKED, chart};

/// The score formula, as printed in every output.
pub const SCORE_FORMULA: &str = "detection + 5s × false_trips + (collateral_rejected + sent_after_trip) ÷ (rate × replicas) + 10s × lock-step share; lower is better";

/// Whether the result at `i` (rank order) has the score of a neighbour, to
/// the millisecond: they share a rank, and the order between them is grid
/// order, not merit.
pub fn is_tie(s: &Sweep, i: usize) -> bool {
    let same = |a: &SweepResult, b: &SweepResult| super::same_score(a.score.value, b.score.value);
    let r = &s.results[i];
    (i > 0 && same(&s.results[i - 1], r)) || s.results.get(i + 1).is_some_and(|n| same(n, r))
}

/// Rows listed by the text output; CSV and JSON have all of them.
pub const TEXT_ROWS: usize = 25;

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

/// Ranked table of the best results.
pub fn text(s: &Sweep) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "sweep of breaker {:?} on {:?}: {}\nscore = {SCORE_FORMULA}\n",
        s.breaker,
        s.scenario,
        count(s.results.len() as u64, "config", "configs")
    )
    .ok();
    let mut headers = vec![
        "rank",
        "score",
        "detection",
        "missed",
        "false trips",
        "collateral",
        "load",
        "lockstep",
        "trips",
        "rejected",
        "failed",
    ];
    headers.extend(s.keys.iter().map(String::as_str));
    let shown = s.results.len().min(TEXT_ROWS);
    let rows: Vec<Vec<String>> = s.results[..shown]
        .iter()
        .map(|r| {
            let mut row = vec![
                r.rank.to_string(),
                format!("{:.1}", r.score.value),
                fmt_secs(r.score.detection),
                r.score.missed.to_string(),
                r.score.false_trips.to_string(),
                r.collateral_rejected.to_string(),
                fmt_secs(r.score.load),
                fmt_secs(r.score.lockstep),
                r.trips.to_string(),
                r.rejected.to_string(),
                r.failed.to_string(),
            ];
            row.extend(r.params.iter().map(|(_, v)| v.clone()));
            row
        })
        .collect();
    out.push_str(&table(&headers, &rows));
    let more = s.results.len().saturating_sub(TEXT_ROWS);
    if more > 0 {
        writeln!(out, "… and {more} more (all are in --format csv or json)").ok();
    }
    if (0..shown).any(|i| is_tie(s, i)) {
        out.push_str(
            "equal ranks are tied to the millisecond; tied configs are listed in grid order\n",
        );
    }
    // A row that missed an outage or never tripped usually explains itself
    // in its config's warnings (a window that can never hold minimum_calls).
    let warned: Vec<&SweepResult> = s.results[..shown]
        .iter()
        .filter(|r| !r.warnings.is_empty())
        .collect();
    if !warned.is_empty() {
        out.push_str("\nwarnings:\n");
        for r in warned {
            for w in &r.warnings {
                writeln!(out, "  rank {}: {w}", r.rank).ok();
            }
        }
    }
    out
}

fn result_json(r: &SweepResult, tie: bool) -> Value {
    let params: Map<String, Value> = r
        .params
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "rank": r.rank,
        "params": params,
        "score": r.score.value,
        "detection": r.score.detection,
        "missed": r.score.missed,
        "false_trips": r.score.false_trips,
        "collateral": r.score.collateral,
        "collateral_rejected": r.collateral_rejected,
        "load": r.score.load,
        "lockstep": r.score.lockstep,
        "tie": tie,
        "trips": r.trips,
        "rejected": r.rejected,
        "failed": r.failed,
        "warnings": r.warnings,
    })
}

/// The sweep as pretty JSON.
pub fn json(s: &Sweep) -> String {
    let v = json!({
        "schema_version": crate::report::SCHEMA_VERSION,
        "scenario": s.scenario,
        "breaker": s.breaker,
        "grid": s.keys,
        "score": SCORE_FORMULA,
        "results": s
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| result_json(r, is_tie(s, i)))
            .collect::<Vec<_>>(),
    });
    let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
    out.push('\n');
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// The sweep as CSV, one row per result by rank.
pub fn csv(s: &Sweep) -> String {
    let mut out = String::from(
        "rank,score,detection,missed,false_trips,collateral_rejected,trips,rejected,failed,load,lockstep,tie",
    );
    for k in &s.keys {
        out.push(',');
        out.push_str(&csv_field(k));
    }
    out.push('\n');
    for (i, r) in s.results.iter().enumerate() {
        write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            r.rank,
            f3(r.score.value),
            f3(r.score.detection),
            r.score.missed,
            r.score.false_trips,
            r.collateral_rejected,
            r.trips,
            r.rejected,
            r.failed,
            f3(r.score.load),
            f3(r.score.lockstep),
            is_tie(s, i)
        )
        .ok();
        for (_, v) in &r.params {
            out.push(',');
            out.push_str(&csv_field(v));
        }
        out.push('\n');
    }
    out
}
