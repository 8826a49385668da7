//! One breaker's panel of the simulation chart: header and warnings, state
//! band, half-open lane, outcome bars and downstream load.

use tripline::State;

use super::{
    CLOSED, FAILED, HALF_OPEN, LEFT, LOAD, MIN_CALLS_PER_BAR, OK, OPEN, PLOT, REJECTED, WARNING,
};
use crate::engine::Counts;
use crate::report::{Run, text::fmt_secs};
use crate::scenario::Scenario;
use crate::svg::{Anchor, Svg, tick_label, wrap};

const HEAD_SIZE: u32 = 12;
const HEAD_LINE: f64 = 15.0;
const NOTE_SIZE: u32 = 10;
const NOTE_LINE: f64 = 12.0;
const STATE_H: f64 = 16.0;
const HALF_H: f64 = 8.0;
const BARS_H: f64 = 70.0;
const LOAD_H: f64 = 40.0;
/// Everything below the header: gaps, state band, half-open lane, bars,
/// load.
const BODY_H: f64 = 6.0 + STATE_H + 3.0 + HALF_H + 8.0 + BARS_H + 8.0 + LOAD_H + 12.0;

/// Bar widths, seconds: round numbers a reader adds up in their head.
const NICE_SECONDS: [usize; 13] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

/// A panel's text, wrapped to the plot's width, which fixes its height.
pub(super) struct Layout {
    head: Vec<String>,
    notes: Vec<String>,
}

impl Layout {
    pub(super) fn new(run: &Run, width: f64) -> Layout {
        let head = format!(
            "{} — trips: {}, false: {}, healthy calls rejected: {}",
            run.breaker,
            run.trips(),
            run.false_trips,
            run.collateral_rejected
        );
        let mut notes = Vec::new();
        for w in &run.warnings {
            notes.extend(wrap(&format!("⚠ warning: {w}"), NOTE_SIZE, width));
        }
        for f in run.faults.iter().filter(|f| f.expect_trip && f.trips == 0) {
            let missed = format!("⚠ never tripped during {:?}, which should trip it", f.name);
            notes.extend(wrap(&missed, NOTE_SIZE, width));
        }
        Layout {
            head: wrap(&head, HEAD_SIZE, width),
            notes,
        }
    }

    fn header_height(&self) -> f64 {
        6.0 + HEAD_LINE * self.head.len() as f64 + NOTE_LINE * self.notes.len() as f64
    }

    pub(super) fn height(&self) -> f64 {
        self.header_height() + BODY_H
    }
}

/// Seconds per outcome bar for `seconds` of traffic at `calls_per_second`
/// (all replicas): the smallest round width that holds
/// [`MIN_CALLS_PER_BAR`] expected calls and gives no more bars than
/// pixels, but never fewer than about eight bars over the run.
pub(super) fn bucket_seconds(seconds: usize, calls_per_second: f64) -> usize {
    let for_pixels = seconds.div_ceil(PLOT as usize).max(1);
    let for_calls = if calls_per_second > 0.0 && calls_per_second.is_finite() {
        (MIN_CALLS_PER_BAR / calls_per_second).ceil().min(1e9) as usize
    } else {
        1
    };
    let need = for_pixels.max(for_calls).max(1);
    let bucket = NICE_SECONDS
        .iter()
        .copied()
        .find(|s| *s >= need)
        .unwrap_or(need);
    // Thin traffic over a short run: keep some shape rather than one bar.
    let most = (seconds / 8).max(for_pixels).max(1);
    if bucket <= most {
        bucket
    } else {
        NICE_SECONDS
            .iter()
            .copied()
            .rev()
            .find(|s| *s <= most)
            .unwrap_or(1)
    }
}

pub(super) fn draw(
    svg: &mut Svg,
    scenario: &Scenario,
    run: &Run,
    layout: &Layout,
    bucket: usize,
    y0: f64,
    x: &dyn Fn(f64) -> f64,
) {
    let mut y = y0 + 6.0;
    for line in &layout.head {
        y += HEAD_LINE;
        svg.text(LEFT, y - 3.0, Anchor::Start, HEAD_SIZE, line);
    }
    if !layout.notes.is_empty() {
        svg.group("warning");
        for line in &layout.notes {
            y += NOTE_LINE;
            svg.text_fill(LEFT, y - 2.0, Anchor::Start, NOTE_SIZE, WARNING, line);
        }
        svg.end_group();
    }
    let state_y = y0 + layout.header_height() + 6.0;
    svg.text(LEFT - 6.0, state_y + 12.0, Anchor::End, 10, "state");
    let busy = state_time(scenario, run);
    state_band(svg, scenario, &busy, state_y);
    let half_y = state_y + STATE_H + 3.0;
    svg.text(LEFT - 6.0, half_y + 7.0, Anchor::End, 9, "half-open");
    half_open_lane(svg, scenario, &busy, half_y);
    let bars_y = half_y + HALF_H + 8.0;
    outcomes(svg, run, bucket, bars_y, x);
}

fn outcomes(svg: &mut Svg, run: &Run, bucket: usize, bars_y: f64, x: &dyn Fn(f64) -> f64) {
    let groups = group(&run.per_second, bucket);
    let max = groups
        .iter()
        .map(|(_, _, c)| c.calls())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let unit = if bucket == 1 {
        "calls/s".to_owned()
    } else {
        format!("calls / {}", fmt_secs(bucket as f64))
    };
    svg.text(LEFT - 6.0, bars_y + 12.0, Anchor::End, 10, &unit);
    let max_label = format!("max {}", tick_label(max));
    svg.text(LEFT - 6.0, bars_y + 24.0, Anchor::End, 9, &max_label);
    let mut i = 0;
    while i < groups.len() {
        // Equal neighbouring seconds become one rectangle: no seams, a
        // smaller file. Wider bars stay apart, so they read as bars.
        let (t0, _, c) = groups[i];
        let mut e = i + 1;
        while bucket == 1 && e < groups.len() && groups[e].2 == c {
            e += 1;
        }
        let t1 = groups[e - 1].0 + groups[e - 1].1;
        i = e;
        // A one-pixel gap between wide bars keeps them readable as bars.
        let gap = if bucket > 1 { 1.0 } else { 0.0 };
        let (bx, bw) = (x(t0), (x(t1) - x(t0) - gap).max(0.5));
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
    let rates: Vec<f64> = groups.iter().map(|(_, s, c)| c.sent() as f64 / s).collect();
    let top = rates.iter().copied().fold(0.0, f64::max).max(1e-9);
    let mut pts = Vec::with_capacity(groups.len() * 2);
    for ((t0, seconds, _), rate) in groups.iter().zip(rates) {
        let y = load_y + LOAD_H - LOAD_H * rate / top;
        pts.push((x(*t0), y));
        pts.push((x(t0 + seconds), y));
    }
    svg.polyline(&pts, LOAD);
}

/// Per-second counts summed `bucket` seconds at a time; returns
/// `(start second, seconds in the group, summed counts)` — the last group
/// may be shorter.
fn group(per_second: &[Counts], bucket: usize) -> Vec<(f64, f64, Counts)> {
    per_second
        .chunks(bucket.max(1))
        .enumerate()
        .map(|(i, c)| {
            let sum = c.iter().fold(Counts::default(), |a, b| Counts {
                succeeded: a.succeeded + b.succeeded,
                failed: a.failed + b.failed,
                rejected: a.rejected + b.rejected,
            });
            ((i * bucket) as f64, c.len() as f64, sum)
        })
        .collect()
}

/// Per pixel column: nanoseconds spent half-open and open, all replicas.
fn state_time(scenario: &Scenario, run: &Run) -> Vec<[f64; 2]> {
    let cols = PLOT as usize;
    let col_ns = scenario.duration.as_nanos() as f64 / cols as f64;
    let replicas = scenario.traffic.replicas as usize;
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
            // A zero-length stay still marks its column: a probe that
            // resolves within the same instant was half-open all the same.
            busy[c][layer] += (hi - lo).max(f64::MIN_POSITIVE);
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
    busy
}

/// Stacked share of replica-time per state, one column per pixel, with
/// equal neighbouring columns merged into one rectangle.
fn state_band(svg: &mut Svg, scenario: &Scenario, busy: &[[f64; 2]], y: f64) {
    let cols = busy.len();
    let col_ns = scenario.duration.as_nanos() as f64 / cols as f64;
    let total = col_ns * f64::from(scenario.traffic.replicas);
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

/// A mark over every run of pixel columns in which any replica was
/// half-open, at least two pixels wide, in the `half-open` group.
fn half_open_lane(svg: &mut Svg, scenario: &Scenario, busy: &[[f64; 2]], y: f64) {
    let cols = busy.len();
    let col_s = scenario.duration.as_secs_f64() / cols as f64;
    let px = PLOT / cols as f64;
    svg.rect(LEFT, y, PLOT, HALF_H, "#f3e5f5", None);
    svg.group("half-open");
    let mut c = 0;
    while c < cols {
        if busy[c][0] <= 0.0 {
            c += 1;
            continue;
        }
        let mut e = c + 1;
        while e < cols && busy[e][0] > 0.0 {
            e += 1;
        }
        let w = ((e - c) as f64 * px).max(2.0);
        let x0 = (LEFT + c as f64 * px).min(LEFT + PLOT - w);
        let tip = format!(
            "half-open: {} – {}",
            fmt_secs(c as f64 * col_s),
            fmt_secs(e as f64 * col_s)
        );
        svg.rect(x0, y, w, HALF_H, HALF_OPEN, Some(&tip));
        c = e;
    }
    svg.end_group();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_traffic_gets_wider_bars_and_busy_traffic_keeps_seconds() {
        assert_eq!(bucket_seconds(600, 0.2), 30, "5 calls need 25 s → 30 s");
        assert_eq!(bucket_seconds(120, 100.0), 1);
        assert_eq!(bucket_seconds(10_000, 100.0), 15, "≤ 820 bars");
        assert_eq!(bucket_seconds(40, 0.01), 5, "still about eight bars");
        assert_eq!(bucket_seconds(3, 0.0), 1);
    }
}
