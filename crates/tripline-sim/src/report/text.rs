//! The human report, answer first: a verdict line (which breaker handled
//! the scenario best, and what its score is made of), the faults, one
//! comparison table with a row per breaker, then per breaker the
//! transition timeline and the faults' costs.
//!
//! Repeated failed probe rounds (`open → half_open → open`, the same
//! reason, one replica) are collapsed into one row with a count unless
//! [`TextOptions::verbose`] asks for every transition.
//!
//! Plain text, fixed column widths computed from the content, times in
//! seconds with trailing zeros dropped, so the output is byte-identical for
//! the same scenario and seed.

mod timeline;

use std::fmt::Write;

use super::{Report, Run};
use crate::scenario::{FaultKind, FaultWindow, Scenario};

/// Most timeline rows listed per breaker; the JSON has every transition.
pub const MAX_LISTED_TRANSITIONS: usize = 60;

/// How much of the timeline the text report shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// Every transition on its own row, repeated probe rounds included
    /// (still at most [`MAX_LISTED_TRANSITIONS`] rows per breaker).
    pub verbose: bool,
}

/// `1 call`, `2 calls`: a count with its noun in agreement.
pub fn count(n: u64, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("{n} {singular}")
    } else {
        format!("{n} {plural}")
    }
}

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
        write!(what, " {}", tripline::clock::HumanDuration(l)).ok();
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

/// The whole text report, repeated probe rounds collapsed.
pub fn render(scenario: &Scenario, report: &Report) -> String {
    render_with(scenario, report, TextOptions::default())
}

/// The whole text report, with `options`.
pub fn render_with(scenario: &Scenario, report: &Report, options: TextOptions) -> String {
    let mut out = String::new();
    let t = &scenario.traffic;
    writeln!(
        out,
        "scenario: {} (seed {}, {}, {} × {} calls/s = {})",
        report.scenario,
        report.seed,
        fmt_secs(report.duration),
        count(u64::from(t.replicas), "replica", "replicas"),
        t.rate,
        count(
            report.calls_per_replica * u64::from(t.replicas),
            "call",
            "calls"
        ),
    )
    .ok();
    out.push('\n');
    out.push_str(&verdict(report));
    if !scenario.faults.is_empty() {
        let rows: Vec<Vec<String>> = (0..scenario.faults.len())
            .map(|i| describe_fault(scenario, i))
            .collect();
        out.push('\n');
        out.push_str(&table(&["fault", "kind", "when", "expectation"], &rows));
    }
    out.push_str(
        "\ncomparison (score, in seconds of harm = detection + 5s × false trips + (healthy calls rejected + calls sent into an outage after the trip) ÷ calls/s + lock-step probing; lower is better)\n",
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
            "sent in outage",
            "probe peak/s",
            "peak/s",
            "mean/s",
            "score",
        ],
        &rows,
    ));
    for run in &report.runs {
        out.push('\n');
        render_run(&mut out, run, options);
    }
    out
}

/// One or two lines: the best-scoring breaker, what its score is made of,
/// and how far the next one is behind (or that they tie).
pub fn verdict(report: &Report) -> String {
    let mut ranked: Vec<&Run> = report.runs.iter().collect();
    ranked.sort_by(|a, b| a.score.value.total_cmp(&b.score.value));
    let Some(best) = ranked.first() else {
        return "verdict: no breaker to compare\n".to_owned();
    };
    let mut out = String::new();
    if ranked.len() == 1 {
        writeln!(
            out,
            "verdict: {:?} scores {} ({})",
            best.breaker,
            fmt_secs(best.score.value),
            score_parts(best)
        )
        .ok();
        return out;
    }
    let tied: Vec<&str> = ranked
        .iter()
        .take_while(|r| same_score(r.score.value, best.score.value))
        .map(|r| r.breaker.as_str())
        .collect();
    if tied.len() > 1 {
        writeln!(
            out,
            "verdict: tie at {} between {} ({})",
            fmt_secs(best.score.value),
            tied.iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            score_parts(best)
        )
        .ok();
        return out;
    }
    writeln!(
        out,
        "verdict: {:?} handled this scenario best, score {} ({})",
        best.breaker,
        fmt_secs(best.score.value),
        score_parts(best)
    )
    .ok();
    if let Some(next) = ranked.get(1) {
        writeln!(
            out,
            "         next: {:?} at {} ({})",
            next.breaker,
            fmt_secs(next.score.value),
            score_parts(next)
        )
        .ok();
    }
    out
}

/// Scores equal to the millisecond (what the table shows) are a tie.
fn same_score(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.0005
}

/// What a score is made of, in words.
fn score_parts(run: &Run) -> String {
    let s = &run.score;
    let mut parts = Vec::new();
    let detected = run.faults.iter().filter(|f| f.expect_trip).count() as u64 - s.missed;
    if detected > 0 {
        parts.push(format!("detection {}", fmt_secs(s.detection)));
    }
    if s.missed > 0 {
        parts.push(format!("missed {}", count(s.missed, "outage", "outages")));
    }
    parts.push(match s.false_trips {
        0 => "no false trips".to_owned(),
        n => count(n, "false trip", "false trips"),
    });
    parts.push(if run.collateral_rejected == 0 {
        "no healthy calls rejected".to_owned()
    } else {
        format!(
            "{} rejected ({} of traffic)",
            count(run.collateral_rejected, "healthy call", "healthy calls"),
            fmt_secs(s.collateral)
        )
    });
    if s.load > 0.0 {
        parts.push(format!("{} of traffic sent into outages", fmt_secs(s.load)));
    }
    if s.lockstep > 0.0 {
        parts.push(format!("lock-step probing {}", fmt_secs(s.lockstep)));
    }
    if !run.warnings.is_empty() {
        parts.push(count(run.warnings.len() as u64, "warning", "warnings"));
    }
    parts.join(", ")
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
        run.faults
            .iter()
            .filter(|f| f.expect_trip)
            .filter_map(|f| f.sent_after_trip)
            .sum::<u64>()
            .to_string(),
        run.faults
            .iter()
            .filter(|f| f.expect_trip)
            .filter_map(|f| f.probe_peak_per_second)
            .max()
            .map_or_else(|| "-".to_owned(), |p| p.to_string()),
        run.downstream.peak_per_second.to_string(),
        format!("{:.2}", run.downstream.mean_per_second),
        format!("{:.1}", run.score.value),
    ]
}

fn render_run(out: &mut String, run: &Run, options: TextOptions) {
    writeln!(out, "== breaker {:?} ==", run.breaker).ok();
    for w in &run.warnings {
        writeln!(out, "warning: {w}").ok();
    }
    if run.transitions.is_empty() {
        out.push_str("no transitions\n");
    } else {
        let mut rows = timeline::rows(&run.transitions, options.verbose);
        let more = rows.len().saturating_sub(MAX_LISTED_TRANSITIONS);
        rows.truncate(MAX_LISTED_TRANSITIONS);
        out.push_str(&table(
            &["time", "replica", "transition", "reason", "window"],
            &rows,
        ));
        if more > 0 {
            writeln!(
                out,
                "… and {} more (every transition is in --format json)",
                count(more as u64, "row", "rows")
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
        "\ntotals: {}: {} succeeded, {} failed, {} rejected; {}, {} false; {} rejected",
        count(t.calls, "call", "calls"),
        t.succeeded,
        t.failed,
        t.rejected,
        count(run.trips(), "trip", "trips"),
        run.false_trips,
        count(run.collateral_rejected, "healthy call", "healthy calls"),
    )
    .ok();
    writeln!(
        out,
        "downstream: peak {} calls/s, mean {:.2} calls/s",
        run.downstream.peak_per_second, run.downstream.mean_per_second
    )
    .ok();
}
