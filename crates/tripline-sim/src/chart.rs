//! The simulation chart: one SVG a person reads at a glance.
//!
//! Time runs left to right over `[0, duration)`. Fault intervals are shaded
//! behind everything (orange: should trip; blue: should be ridden out) and
//! named in a strip at the top, one row per fault; a name is never cut: it
//! sits at its fault's start, is moved left to stay inside the plot and
//! wraps onto more lines when it is wider than the plot. Each breaker gets a
//! panel:
//!
//! 1. **header** — name, trips, false trips, healthy calls rejected, then in
//!    red every config warning (e.g. a window that can never hold
//!    `minimum_calls`, so the breaker cannot trip) and every fault that
//!    should have tripped it and did not: a run that stays flat says why
//!    on the chart itself, not only in the text report.
//! 2. **state band** — for every pixel column, the share of replica-time
//!    spent closed (green), half-open (purple) and open (red), computed from
//!    the transitions. With one replica it is the exact state timeline.
//! 3. **half-open lane** — a mark wherever any replica was half-open, at
//!    least two pixels wide: probes last milliseconds, so their share of the
//!    band above is usually too thin to see, yet they are what shows how a
//!    breaker comes back.
//! 4. **outcomes** — stacked bars: succeeded, failed, rejected. A bar spans
//!    one second when traffic allows; when it is thin (fewer than
//!    [`MIN_CALLS_PER_BAR`] calls a second expected) or there are more
//!    seconds than pixels, seconds are summed into wider bars (2 s, 5 s,
//!    10 s, 15 s, 30 s, 1 min, …) and the margin says `calls / 30s`: one
//!    call every five seconds drawn per second is a barcode of 0s and 1s.
//! 5. **downstream load** — calls that reached the dependency per second
//!    (averaged over a bar), with the peak and mean.

mod panel;

use crate::report::Report;
use crate::scenario::{FaultWindow, Scenario};
use crate::svg::{Anchor, Svg, text_width, tick_label, tick_step, wrap};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 120.0;
const RIGHT: f64 = 20.0;
const PLOT: f64 = WIDTH - LEFT - RIGHT;
const LABEL_SIZE: u32 = 10;
const LINE: f64 = 12.0;

pub(crate) const CLOSED: &str = "#43a047";
pub(crate) const HALF_OPEN: &str = "#8e24aa";
pub(crate) const OPEN: &str = "#e53935";
pub(crate) const OK: &str = "#81c784";
pub(crate) const FAILED: &str = "#e57373";
pub(crate) const REJECTED: &str = "#9e9e9e";
pub(crate) const LOAD: &str = "#1e88e5";
pub(crate) const WARNING: &str = "#b71c1c";
const SHOULD_TRIP: (&str, &str) = ("#ffe0b2", "#ff8a65");
const RIDE_OUT: (&str, &str) = ("#bbdefb", "#64b5f6");

/// Expected calls a bar should hold before bars get wider than a second.
pub const MIN_CALLS_PER_BAR: f64 = 5.0;

/// Renders the report of `scenario` as an SVG document.
///
/// ```
/// use tripline_sim::{Report, Scenario, chart};
///
/// let scenario = Scenario::from_toml("doc.toml", r#"
///     duration = "10s"
///     [traffic]
///     rate = 2.0
///     [[fault]]
///     name = "down"
///     start = "4s"
///     [[breaker]]
///     name = "b"
///     window = { kind = "count", size = 4 }
///     minimum_calls = 4
/// "#).unwrap();
/// let svg = chart::render(&scenario, &Report::simulate(&scenario).unwrap());
/// assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
/// assert!(svg.ends_with("</svg>\n"));
/// ```
pub fn render(scenario: &Scenario, report: &Report) -> String {
    let duration = scenario.duration.as_secs_f64();
    let x = |t: f64| LEFT + PLOT * (t / duration).clamp(0.0, 1.0);
    let rows: Vec<Vec<String>> = scenario
        .faults
        .iter()
        .map(|f| wrap(&f.name, LABEL_SIZE, PLOT))
        .collect();
    let title = format!(
        "{} — seed {}, {} replica(s) × {} calls/s",
        report.scenario, report.seed, report.replicas, scenario.traffic.rate
    );
    let title = wrap(&title, 14, WIDTH - 20.0);
    let title_h = 18.0 * (title.len() as f64 - 1.0);
    let faults_h: f64 = rows.iter().map(|r| fault_row_height(r.len())).sum();
    let top = title_h + 34.0 + faults_h + 6.0;
    let bucket = panel::bucket_seconds(
        scenario.duration.as_secs().max(1) as usize,
        scenario.traffic.rate * f64::from(scenario.traffic.replicas),
    );
    let panels: Vec<panel::Layout> = report
        .runs
        .iter()
        .map(|run| panel::Layout::new(run, PLOT))
        .collect();
    let panels_h: f64 = panels.iter().map(panel::Layout::height).sum();
    let axis_y = top + panels_h;
    let legend = legend_layout();
    let legend_rows = legend.iter().map(|e| e.row).max().map_or(0, |r| r + 1);
    let height = axis_y + 30.0 + 16.0 * legend_rows as f64 + 6.0;
    let mut svg = Svg::new(
        WIDTH,
        height,
        &format!("tripline simulate: {}", report.scenario),
    );
    for (i, line) in title.iter().enumerate() {
        svg.text(10.0, 20.0 + 18.0 * i as f64, Anchor::Start, 14, line);
    }
    let mut y = 30.0 + title_h;
    for (f, lines) in scenario.faults.iter().zip(&rows) {
        let (shade, strip) = if f.expect_trip { SHOULD_TRIP } else { RIDE_OUT };
        let spans = intervals(scenario, &f.window);
        let kind = if f.expect_trip {
            "should trip"
        } else {
            "ride out"
        };
        svg.text(LEFT - 6.0, y + 10.0, Anchor::End, LABEL_SIZE, kind);
        // The label starts at the fault's start and is pulled left just
        // enough to end inside the plot; wrapped lines fit PLOT, so it
        // never starts left of it.
        let widest = lines
            .iter()
            .map(|l| text_width(l, LABEL_SIZE))
            .fold(0.0, f64::max);
        let start = spans.first().map_or(LEFT, |(a, _)| x(*a));
        let lx = start.min(LEFT + PLOT - widest).max(LEFT);
        svg.group("fault-label");
        for (i, line) in lines.iter().enumerate() {
            let ly = y + 10.0 + LINE * i as f64;
            svg.text(lx, ly, Anchor::Start, LABEL_SIZE, line);
        }
        svg.end_group();
        let strip_y = y + LINE * lines.len() as f64 + 1.0;
        for (a, b) in spans {
            let w = (x(b) - x(a)).max(1.5);
            svg.rect(x(a), top - 4.0, w, axis_y - top + 4.0, shade, None);
            svg.rect(x(a), strip_y, w, 6.0, strip, Some(&f.name));
        }
        y += fault_row_height(lines.len());
    }
    let mut y0 = top;
    for (run, layout) in report.runs.iter().zip(&panels) {
        panel::draw(&mut svg, scenario, run, layout, bucket, y0, &x);
        y0 += layout.height();
    }
    svg.line(LEFT, axis_y, LEFT + PLOT, axis_y, "#444444");
    let step = tick_step(duration, 12.0);
    let mut t = 0.0;
    while t <= duration + 1e-9 {
        svg.line(x(t), axis_y, x(t), axis_y + 4.0, "#444444");
        let label = format!("{}s", tick_label(t));
        svg.text(x(t), axis_y + 15.0, Anchor::Middle, 10, &label);
        t += step;
    }
    svg.group("legend");
    for e in &legend {
        let ly = axis_y + 26.0 + 16.0 * e.row as f64;
        svg.rect(e.x, ly, 10.0, 10.0, e.color, None);
        svg.text(e.x + 14.0, ly + 9.0, Anchor::Start, 10, e.label);
    }
    svg.end_group();
    svg.finish()
}

fn fault_row_height(lines: usize) -> f64 {
    LINE * lines as f64 + 10.0
}

struct LegendEntry {
    color: &'static str,
    label: &'static str,
    x: f64,
    row: usize,
}

/// The legend's entries laid out left to right, onto a new row when the
/// next would pass the right edge.
fn legend_layout() -> Vec<LegendEntry> {
    let entries = [
        (CLOSED, "closed"),
        (HALF_OPEN, "half-open (any replica)"),
        (OPEN, "open"),
        (OK, "succeeded"),
        (FAILED, "failed"),
        (REJECTED, "rejected"),
        (LOAD, "downstream calls/s"),
        (SHOULD_TRIP.1, "fault: should trip"),
        (RIDE_OUT.1, "fault: ride out"),
    ];
    let (mut x, mut row) = (10.0, 0);
    let mut out = Vec::with_capacity(entries.len());
    for (color, label) in entries {
        let w = 14.0 + text_width(label, 10) + 14.0;
        if x + w > WIDTH - RIGHT && x > 10.0 {
            x = 10.0;
            row += 1;
        }
        out.push(LegendEntry {
            color,
            label,
            x,
            row,
        });
        x += w;
    }
    out
}

/// The time intervals, in seconds, during which a fault acts.
fn intervals(scenario: &Scenario, w: &FaultWindow) -> Vec<(f64, f64)> {
    match w {
        FaultWindow::Interval { start, end } => vec![(start.as_secs_f64(), end.as_secs_f64())],
        FaultWindow::Instants(at) => {
            let width = 1.0 / scenario.traffic.rate;
            at.iter()
                .map(|t| (t.as_secs_f64(), t.as_secs_f64() + width))
                .collect()
        }
    }
}
