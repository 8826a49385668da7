//! The human report: per breaker, the transition timeline and the faults'
//! costs; then one comparison table with a row per breaker.
//!
//! Plain text, fixed column widths computed from the content, times in
//! seconds with trailing zeros dropped, so the output is byte-identical for
//! the same scenario and seed.

use std::fmt::Write;

use super::{Report, Run, secs};
use crate::scenario::{FaultKind, FaultWindow, Scenario};

/// Most transitions listed per breaker; the JSON has all of them.
pub const MAX_LISTED_TRANSITIONS: usize = 60;

/// Seconds, as `32.5s`: up to millisecond precision, no trailing zeros.
pub fn fmt_secs(s: f64) -> String {
    let mut t = format!("{s:.3}");
    while t.ends_with('0') {
        t.pop();
    }
    if t.ends_with('.') {
        t.pop();
    }
    t.push('s');
    t
}

fn opt_secs(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_owned(), fmt_secs)
}

/// Renders rows under headers. A column whose cells all read as numbers
/// (or `-`) is right-aligned, any other left-aligned.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    let mut numeric = vec![!rows.is_empty(); headers.len()];
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(headers.len()) {
            widths[i] = widths[i].max(cell.chars().count());
            numeric[i] &= cell == "-" || cell.starts_with(|c: char| c.is_ascii_digit());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, cell) in cells.enumerate().take(headers.len()) {
            let pad = " ".repeat(widths[i] - cell.chars().count());
            if i > 0 {
                l.push_str("  ");
            }
            if numeric[i] {
                l.push_str(&pad);
                l.push_str(cell);
            } else {
                l.push_str(cell);
                l.push_str(&pad);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

fn describe_fault(scenario: &Scenario, i: usize) -> Vec<String> {
    let f = &scenario.faults[i];
    let mut what = match f.kind {
        FaultKind::Error => "error".to_owned(),
        FaultKind::Latency => "latency".to_owned(),
    };
    if let Some(l) = f.latency {
        write!(what, " {}", humantime::format_duration(l)).ok();
    }
    if f.rate < 1.0 {
        write!(what, " at {}%", f.rate * 100.0).ok();
    }
    let when = match &f.window {
        FaultWindow::Interval { start, end } => {
            format!(
                "{} – {}",
                fmt_secs(start.as_secs_f64()),
                fmt_secs(end.as_secs_f64())
            )
        }
        FaultWindow::Instants(at) => {
            let list: Vec<String> = at.iter().map(|t| fmt_secs(t.as_secs_f64())).collect();
            format!("at {}", list.join(", "))
        }
    };
    let expect = if f.expect_trip {
        "should trip"
    } else {
        "should ride out"
    };
    vec![f.name.clone(), what, when, expect.to_owned()]
}

/// The whole text report.
pub fn render(scenario: &Scenario, report: &Report) -> String {
    let mut out = String::new();
    let t = &scenario.traffic;
    writeln!(
        out,
        "scenario: {} (seed {}, {}, {} replica{} × {} calls/s = {} calls)",
        report.scenario,
        report.seed,
        fmt_secs(report.duration),
        t.replicas,
        if t.replicas == 1 { "" } else { "s" },
        t.rate,
        report.calls_per_replica * u64::from(t.replicas),
    )
    .ok();
    if !scenario.faults.is_empty() {
        let rows: Vec<Vec<String>> = (0..scenario.faults.len())
            .map(|i| describe_fault(scenario, i))
            .collect();
        out.push('\n');
        out.push_str(&table(&["fault", "kind", "when", "expectation"], &rows));
    }
    for run in &report.runs {
        out.push('\n');
        render_run(&mut out, run);
    }
    out.push_str(
        "\ncomparison (score = detection + 5s × false trips + healthy calls rejected ÷ calls/s; lower is better)\n",
    );
    let rows: Vec<Vec<String>> = report.runs.iter().map(comparison_row).collect();
    out.push_str(&table(
        &[
            "breaker",
            "calls",
            "succeeded",
            "failed",
            "rejected",
            "trips",
            "false trips",
            "detection",
            "missed",
            "collateral",
            "peak/s",
            "mean/s",
            "score",
        ],
        &rows,
    ));
    out
}

fn comparison_row(run: &Run) -> Vec<String> {
    vec![
        run.breaker.clone(),
        run.totals.calls.to_string(),
        run.totals.succeeded.to_string(),
        run.totals.failed.to_string(),
        run.totals.rejected.to_string(),
        run.trips().to_string(),
        run.false_trips.to_string(),
        fmt_secs(run.score.detection),
        run.score.missed.to_string(),
        run.collateral_rejected.to_string(),
        run.downstream.peak_per_second.to_string(),
        format!("{:.2}", run.downstream.mean_per_second),
        format!("{:.1}", run.score.value),
    ]
}

fn render_run(out: &mut String, run: &Run) {
    writeln!(out, "== breaker {:?} ==", run.breaker).ok();
    for w in &run.warnings {
        writeln!(out, "warning: {w}").ok();
    }
    if run.transitions.is_empty() {
        out.push_str("no transitions\n");
    } else {
        let rows: Vec<Vec<String>> = run
            .transitions
            .iter()
            .take(MAX_LISTED_TRANSITIONS)
            .map(|t| {
                vec![
                    fmt_secs(secs(t.at)),
                    t.replica.to_string(),
                    format!("{} → {}", t.from, t.to),
                    t.reason.to_string(),
                    format!(
                        "{} calls, {} failed, {} slow",
                        t.window.calls, t.window.failures, t.window.slow
                    ),
                ]
            })
            .collect();
        out.push_str(&table(
            &["time", "replica", "transition", "reason", "window"],
            &rows,
        ));
        let more = run.transitions.len().saturating_sub(MAX_LISTED_TRANSITIONS);
        if more > 0 {
            writeln!(
                out,
                "… and {more} more transitions (all are in --format json)"
            )
            .ok();
        }
    }
    if !run.faults.is_empty() {
        let rows: Vec<Vec<String>> = run
            .faults
            .iter()
            .map(|f| {
                vec![
                    f.name.clone(),
                    fmt_secs(f.start),
                    f.trips.to_string(),
                    opt_secs(f.detection_delay),
                    opt_secs(f.recovered_at),
                    f.probe_peak_per_second
                        .map_or_else(|| "-".to_owned(), |p| p.to_string()),
                    f.rejected.to_string(),
                    f.failed.to_string(),
                    f.succeeded.to_string(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &[
                "fault",
                "start",
                "trips",
                "detection delay",
                "recovered at",
                "probe peak/s",
                "rejected",
                "failed",
                "succeeded",
            ],
            &rows,
        ));
    }
    let t = &run.totals;
    writeln!(
        out,
        "\ntotals: {} calls: {} succeeded, {} failed, {} rejected; {} trips, {} false; {} healthy calls rejected",
        t.calls, t.succeeded, t.failed, t.rejected, run.trips(), run.false_trips, run.collateral_rejected
    )
    .ok();
    writeln!(
        out,
        "downstream: peak {} calls/s, mean {:.2} calls/s",
        run.downstream.peak_per_second, run.downstream.mean_per_second
    )
    .ok();
}
