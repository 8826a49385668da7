//! The simulation chart: one SVG a person reads at a glance.
//!
//! Time runs left to right over `[0, duration)`. Fault intervals are shaded
//! behind everything (orange: should trip; blue: should be ridden out) and
//! named in a strip at the top. Each breaker gets three rows:
//!
//! 1. **state band** — for every pixel column, the share of replica-time
//!    spent closed (green), half-open (amber) and open (red), computed from
//!    the transitions. With one replica it is the exact state timeline.
//! 2. **outcomes per second** — stacked bars: succeeded, failed, rejected.
//! 3. **downstream load** — calls that reached the dependency per second,
//!    with the peak and mean.
//!
//! Seconds are grouped when there are more of them than pixels.

use std::fmt::Write;

use tripline::State;

use crate::engine::Counts;
use crate::report::{Report, Run, text::fmt_secs};
use crate::scenario::{FaultWindow, Scenario};
use crate::svg::{Anchor, Svg, tick_label, tick_step};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 120.0;
const RIGHT: f64 = 20.0;
const PLOT: f64 = WIDTH - LEFT - RIGHT;
const FAULT_ROW: f64 = 14.0;
const STATE_H: f64 = 16.0;
const BARS_H: f64 = 70.0;
const LOAD_H: f64 = 40.0;
const PANEL_H: f64 = 26.0 + STATE_H + 8.0 + BARS_H + 8.0 + LOAD_H + 10.0;

const CLOSED: &str = "#43a047";
const HALF_OPEN: &str = "#ffb300";
const OPEN: &str = "#e53935";
const OK: &str = "#81c784";
const FAILED: &str = "#e57373";
const REJECTED: &str = "#9e9e9e";
const LOAD: &str = "#1e88e5";

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
    let faults_h = 8.0 + FAULT_ROW * scenario.faults.len() as f64;
    let top = 34.0 + faults_h;
    let height = top + PANEL_H * report.runs.len() as f64 + 50.0;
    let mut svg = Svg::new(
        WIDTH,
        height,
        &format!("tripline simulate: {}", report.scenario),
    );
    let title = format!(
        "{} — seed {}, {} replica(s) × {} calls/s",
        report.scenario, report.seed, report.replicas, scenario.traffic.rate
    );
    svg.text(LEFT, 20.0, Anchor::Start, 14, &title);
    for (i, f) in scenario.faults.iter().enumerate() {
        let fill = if f.expect_trip { "#ffe0b2" } else { "#bbdefb" };
        let y = 30.0 + FAULT_ROW * i as f64;
        svg.text(LEFT - 6.0, y + 10.0, Anchor::End, 10, &shorten(&f.name, 20));
        for (a, b) in intervals(scenario, &f.window) {
            let w = (x(b) - x(a)).max(1.5);
            svg.rect(x(a), top - 4.0, w, height - top - 40.0, fill, None);
            let strip = if f.expect_trip { "#ff8a65" } else { "#64b5f6" };
            svg.rect(x(a), y + 2.0, w, FAULT_ROW - 4.0, strip, Some(&f.name));
        }
    }
    for (i, run) in report.runs.iter().enumerate() {
        panel(&mut svg, scenario, run, top + PANEL_H * i as f64, &x);
    }
    let axis_y = height - 40.0;
    svg.line(LEFT, axis_y, LEFT + PLOT, axis_y, "#444444");
    let step = tick_step(duration, 12.0);
    let mut t = 0.0;
    while t <= duration + 1e-9 {
        svg.line(x(t), axis_y, x(t), axis_y + 4.0, "#444444");
        svg.text(
            x(t),
            axis_y + 15.0,
            Anchor::Middle,
            10,
            &format!("{}s", tick_label(t)),
        );
        t += step;
    }
    let legend = [
        (CLOSED, "closed"),
        (HALF_OPEN, "half-open"),
        (OPEN, "open"),
        (OK, "succeeded"),
        (FAILED, "failed"),
        (REJECTED, "rejected"),
        (LOAD, "downstream calls/s"),
    ];
    for (i, (color, label)) in legend.iter().enumerate() {
        let lx = LEFT + 115.0 * i as f64;
        svg.rect(lx, height - 17.0, 10.0, 10.0, color, None);
        svg.text(lx + 14.0, height - 8.0, Anchor::Start, 10, label);
    }
    svg.finish()
}

/// `s` cut to `max` characters with an ellipsis, to fit the left margin
/// (the full name is in the bar's tooltip).
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
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

fn panel(svg: &mut Svg, scenario: &Scenario, run: &Run, y0: f64, x: &dyn Fn(f64) -> f64) {
    let mut head = format!(
        "{} — trips: {}, false: {}",
        run.breaker,
        run.trips(),
        run.false_trips
    );
    write!(
        head,
        ", healthy calls rejected: {}",
        run.collateral_rejected
    )
    .ok();
    svg.text(LEFT, y0 + 14.0, Anchor::Start, 12, &head);
    let state_y = y0 + 22.0;
    svg.text(LEFT - 6.0, state_y + 12.0, Anchor::End, 10, "state");
    state_band(svg, scenario, run, state_y);
    let bars_y = state_y + STATE_H + 8.0;
    let groups = group(&run.per_second);
    let max = groups
        .iter()
        .map(|(_, c)| c.calls())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    svg.text(LEFT - 6.0, bars_y + 12.0, Anchor::End, 10, "calls/s");
    svg.text(
        LEFT - 6.0,
        bars_y + 24.0,
        Anchor::End,
        9,
        &format!("max {}", tick_label(max)),
    );
    let per = groups.first().map_or(1.0, |(s, _)| *s);
    let mut i = 0;
    while i < groups.len() {
        // Equal neighbours become one rectangle: no seams, a smaller file.
        let c = groups[i].1;
        let mut e = i + 1;
        while e < groups.len() && groups[e].1 == c {
            e += 1;
        }
        let (t0, t1) = (i as f64 * per, e as f64 * per);
        i = e;
        let (bx, bw) = (x(t0), (x(t1) - x(t0)).max(0.5));
        let mut y = bars_y + BARS_H;
        for (v, color) in [
            (c.succeeded, OK),
            (c.failed, FAILED),
            (c.rejected, REJECTED),
        ] {
            let h = BARS_H * v as f64 / max;
            if h > 0.0 {
                y -= h;
                svg.rect(bx, y, bw, h, color, None);
            }
        }
    }
    let load_y = bars_y + BARS_H + 8.0;
    let peak = run.downstream.peak_per_second.max(1) as f64;
    svg.text(LEFT - 6.0, load_y + 12.0, Anchor::End, 10, "downstream");
    let peak_label = format!("peak {}/s", run.downstream.peak_per_second);
    let mean_label = format!("mean {:.1}/s", run.downstream.mean_per_second);
    svg.text(LEFT - 6.0, load_y + 24.0, Anchor::End, 9, &peak_label);
    svg.text(LEFT - 6.0, load_y + 35.0, Anchor::End, 9, &mean_label);
    svg.line(
        LEFT,
        load_y + LOAD_H,
        LEFT + PLOT,
        load_y + LOAD_H,
        "#cccccc",
    );
    let mut pts = Vec::with_capacity(groups.len() * 2);
    for (i, (seconds, c)) in groups.iter().enumerate() {
        let y = load_y + LOAD_H - LOAD_H * (c.sent() as f64 / seconds) / peak;
        pts.push((x(i as f64 * per), y));
        pts.push((x(i as f64 * per + seconds), y));
    }
    svg.polyline(&pts, LOAD);
}

/// Groups per-second counts so there are at most as many groups as pixels;
/// returns `(seconds in group, summed counts)`.
fn group(per_second: &[Counts]) -> Vec<(f64, Counts)> {
    let size = per_second.len().div_ceil(PLOT as usize).max(1);
    per_second
        .chunks(size)
        .map(|c| {
            let sum = c.iter().fold(Counts::default(), |a, b| Counts {
                succeeded: a.succeeded + b.succeeded,
                failed: a.failed + b.failed,
                rejected: a.rejected + b.rejected,
            });
            (size as f64, sum)
        })
        .collect()
}

/// Stacked share of replica-time per state, one column per pixel, with
/// equal neighbouring columns merged into one rectangle.
fn state_band(svg: &mut Svg, scenario: &Scenario, run: &Run, y: f64) {
    let cols = PLOT as usize;
    let col_ns = scenario.duration.as_nanos() as f64 / cols as f64;
    let replicas = scenario.traffic.replicas as usize;
    // Per column: nanoseconds spent half-open and open, all replicas.
    let mut busy = vec![[0f64; 2]; cols];
    let mut since: Vec<(State, u64)> = vec![(State::Closed, 0); replicas];
    let end = u64::try_from(scenario.duration.as_nanos()).unwrap_or(u64::MAX);
    let mut add = |state: State, a: u64, b: u64| {
        let layer = match state {
            State::HalfOpen => 0,
            State::Open | State::ForcedOpen => 1,
            _ => return,
        };
        let (a, b) = (a.min(end) as f64, b.min(end) as f64);
        let mut c = (a / col_ns) as usize;
        while c < cols && (c as f64) * col_ns < b {
            let lo = a.max(c as f64 * col_ns);
            let hi = b.min((c + 1) as f64 * col_ns);
            busy[c][layer] += (hi - lo).max(0.0);
            c += 1;
        }
    };
    for t in &run.transitions {
        let s = &mut since[t.replica as usize];
        add(s.0, s.1, t.at);
        *s = (t.to, t.at);
    }
    for (state, from) in since {
        add(state, from, end);
    }
    let total = col_ns * replicas as f64;
    let shares: Vec<[u32; 2]> = busy
        .iter()
        .map(|b| {
            [
                (b[0] / total * 1000.0).round() as u32,
                (b[1] / total * 1000.0).round() as u32,
            ]
        })
        .collect();
    let px = PLOT / cols as f64;
    let mut c = 0;
    while c < cols {
        let mut e = c + 1;
        while e < cols && shares[e] == shares[c] {
            e += 1;
        }
        let [half, open] = shares[c];
        let (hh, oh) = (
            STATE_H * f64::from(half) / 1000.0,
            STATE_H * f64::from(open) / 1000.0,
        );
        let (x0, w) = (LEFT + c as f64 * px, (e - c) as f64 * px);
        let tip = format!(
            "{} – {}: {:.0}% open, {:.0}% half-open",
            fmt_secs(c as f64 * col_ns / 1e9),
            fmt_secs(e as f64 * col_ns / 1e9),
            f64::from(open) / 10.0,
            f64::from(half) / 10.0
        );
        let layers = [
            (y, STATE_H - hh - oh, CLOSED),
            (y + STATE_H - hh - oh, hh, HALF_OPEN),
            (y + STATE_H - oh, oh, OPEN),
        ];
        let mut tip = Some(tip);
        for (ly, lh, color) in layers {
            if lh > 0.0 {
                svg.rect(x0, ly, w, lh, color, tip.take().as_deref());
            }
        }
        c = e;
    }
}
