//! The sweep's trade-off chart: detection delay against false trips and
//! against collateral rejections, one point per config.
//!
//! A static image has no hover, so everything a reader needs is printed:
//! each labelled point carries its rank (points on the same spot share one
//! label, `#2, #5`, runs as ranges: `#5–#10`), a key under the plots gives every labelled rank's
//! parameter values and score, and the three best are ringed in gold with
//! their rank in bold. Only the best [`LABELLED`] are labelled: beyond that
//! the labels would hide the points, and every rank is in `--format csv`.
//!
//! Detection delays of a grid often span orders of magnitude (a
//! consecutive-failure breaker detects in 0.3 s, a large time window in
//! 60 s), which squeezes the good end of a linear axis into a few pixels;
//! when the positive delays span more than one decade the axis is
//! logarithmic, ticked at 1, 2 and 5 × 10ⁿ, and a delay of zero sits on its
//! left edge.

use std::collections::BTreeMap;

use super::SCORE_FORMULA;
use crate::report::text::fmt_secs;
use crate::svg::{Anchor, Svg, text_width, tick_label, tick_step, wrap};
use crate::sweep::{Sweep, SweepResult};

/// How many of the best configs get a label and a line in the key.
pub const LABELLED: usize = 30;

/// How many of the best configs are ringed.
pub const MARKED: usize = 3;

const W: f64 = 960.0;
const PW: f64 = 380.0;
const PH: f64 = 300.0;
const Y0: f64 = 50.0;
const KEY_SIZE: u32 = 10;
const KEY_LINE: f64 = 13.0;
const GOLD: &str = "#f9a825";
/// The widest a point's label runs before it wraps, px.
const LABEL_WIDTH: f64 = 160.0;

/// The x axis: linear from 0, or logarithmic over whole decades.
#[derive(Clone, Copy)]
enum XAxis {
    Linear { max: f64 },
    Log { lo: f64, hi: f64 },
}

impl XAxis {
    fn for_delays(delays: impl Iterator<Item = f64> + Clone) -> XAxis {
        let max = delays.clone().fold(0.0, f64::max).max(1.0);
        let min_pos = delays.filter(|d| *d > 0.0).fold(f64::INFINITY, f64::min);
        if min_pos.is_finite() && max / min_pos > 10.0 {
            let lo = 10f64.powf(min_pos.log10().floor()).max(0.001);
            let hi = 10f64.powf(max.log10().ceil());
            XAxis::Log { lo, hi }
        } else {
            XAxis::Linear { max }
        }
    }

    /// Position in `[0, 1]` along the axis.
    fn frac(self, v: f64) -> f64 {
        match self {
            XAxis::Linear { max } => v / max,
            XAxis::Log { lo, hi } if v > lo => (v.log10() - lo.log10()) / (hi.log10() - lo.log10()),
            XAxis::Log { .. } => 0.0,
        }
        .clamp(0.0, 1.0)
    }

    /// Tick values, each with whether it is labelled: on a log axis over
    /// more than two decades only the powers of ten are, so that labels
    /// never overlap (2 and 5 keep an unlabelled tick).
    fn ticks(self) -> Vec<(f64, bool)> {
        match self {
            XAxis::Linear { max } => {
                let step = tick_step(max, 6.0);
                (0..)
                    .map(|i| f64::from(i) * step)
                    .take_while(|t| *t <= max + 1e-9)
                    .map(|t| (t, true))
                    .collect()
            }
            XAxis::Log { lo, hi } => {
                let all = (hi / lo).log10() <= 2.0 + 1e-9;
                let mut out = Vec::new();
                let mut decade = lo;
                while decade <= hi * 1.000_001 {
                    for m in [1.0, 2.0, 5.0] {
                        let t = m * decade;
                        if t <= hi * 1.000_001 {
                            out.push((t, all || m == 1.0));
                        }
                    }
                    decade *= 10.0;
                }
                out
            }
        }
    }

    fn class(self) -> &'static str {
        match self {
            XAxis::Linear { .. } => "x-axis linear",
            XAxis::Log { .. } => "x-axis log",
        }
    }
}

/// Two scatter plots of detection delay against false trips and against
/// collateral rejections: the trade-off every breaker config makes. The ten
/// best are blue, the three best ringed and numbered, the best
/// [`LABELLED`] labelled with their rank and listed with their parameter
/// values in a key under the plots.
pub fn chart(s: &Sweep) -> String {
    let key = key_lines(s);
    let title = format!(
        "{} — breaker {:?}, {} configs",
        s.scenario,
        s.breaker,
        s.results.len()
    );
    let title = wrap(&title, 14, W - 80.0);
    // Everything below the title moves down by its extra lines.
    let y0 = Y0 + 18.0 * (title.len() as f64 - 1.0);
    let key_top = y0 + PH + 52.0;
    let h = key_top + KEY_LINE * key.rows as f64 + 34.0;
    let mut svg = Svg::new(W, h, &format!("tripline sweep: {}", s.scenario));
    for (i, line) in title.iter().enumerate() {
        svg.text(60.0, 22.0 + 18.0 * i as f64, Anchor::Start, 14, line);
    }
    let axis = XAxis::for_delays(s.results.iter().map(|r| r.score.detection));
    type Axis = fn(&SweepResult) -> f64;
    let panels: [(&str, Axis); 2] = [
        ("false trips", |r| r.score.false_trips as f64),
        ("collateral rejections (healthy calls)", |r| {
            r.collateral_rejected as f64
        }),
    ];
    for (p, (label, y_of)) in panels.iter().enumerate() {
        let x0 = 70.0 + p as f64 * (PW + 90.0);
        let max_y = s.results.iter().map(y_of).fold(0.0, f64::max).max(1.0);
        let sx = |v: f64| x0 + PW * axis.frac(v);
        // Headroom above the highest point keeps its label off the title.
        let sy = |v: f64| y0 + PH - PH * v / (max_y * 1.08);
        svg.line(x0, y0 + PH, x0 + PW, y0 + PH, "#444444");
        svg.line(x0, y0, x0, y0 + PH, "#444444");
        svg.group(axis.class());
        for (t, labelled) in axis.ticks() {
            let len = if labelled { 4.0 } else { 2.5 };
            svg.line(sx(t), y0 + PH, sx(t), y0 + PH + len, "#444444");
            if labelled {
                svg.text(sx(t), y0 + PH + 15.0, Anchor::Middle, 10, &fmt_secs(t));
            }
        }
        svg.end_group();
        let ys = tick_step(max_y, 6.0).max(1.0); // counts: whole ticks
        let mut t = 0.0;
        while t <= max_y + 1e-9 {
            svg.line(x0 - 4.0, sy(t), x0, sy(t), "#444444");
            svg.text(x0 - 6.0, sy(t) + 3.0, Anchor::End, 10, &tick_label(t));
            t += ys;
        }
        let x_label = match axis {
            XAxis::Linear { .. } => "detection delay (Σ, misses at full length)",
            XAxis::Log { .. } => "detection delay (Σ, misses at full length; log scale)",
        };
        svg.text(x0 + PW / 2.0, y0 + PH + 32.0, Anchor::Middle, 11, x_label);
        svg.text(x0, y0 - 8.0, Anchor::Start, 11, label);
        for r in s.results.iter().rev() {
            let color = if r.rank <= 10 { "#1e88e5" } else { "#9e9e9e" };
            let tip = format!("#{} score {:.1}: {}", r.rank, r.score.value, params(r));
            svg.circle(sx(r.score.detection), sy(y_of(r)), 3.5, color, &tip);
        }
        // One label per spot: configs with the same outcome coincide.
        let mut spots: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
        for r in s.results.iter().take(LABELLED) {
            let (px, py) = (sx(r.score.detection), sy(y_of(r)));
            spots
                .entry(((px * 10.0).round() as i64, (py * 10.0).round() as i64))
                .or_default()
                .push(r.rank);
        }
        svg.group("point-label");
        // Bottom first, so that a label nudged up clear of another one
        // moves towards free space.
        let mut order: Vec<_> = spots.iter().collect();
        order.sort_by_key(|((px, py), _)| (std::cmp::Reverse(*py), *px));
        let mut placed: Vec<[f64; 4]> = Vec::new();
        for ((px, py), ranks) in order {
            let (px, py) = (*px as f64 / 10.0, *py as f64 / 10.0);
            // Long lists of coinciding ranks stack upwards in lines.
            let lines = wrap(&rank_label(ranks), 9, LABEL_WIDTH);
            let right_edge = (x0 + PW + 60.0).min(W - 10.0);
            let w = lines.iter().map(|l| text_width(l, 9)).fold(0.0, f64::max);
            // Right of the point unless that would leave the panel.
            let (lx, anchor, left) = if px + 6.0 + w <= right_edge {
                (px + 6.0, Anchor::Start, px + 6.0)
            } else {
                (px - 6.0, Anchor::End, px - 6.0 - w)
            };
            let h = 11.0 * lines.len() as f64;
            let mut bottom = py - 5.0;
            for _ in 0..40 {
                let clash = placed.iter().any(|b| {
                    left < b[1] && left + w > b[0] && bottom - h + 2.0 < b[3] && bottom + 2.0 > b[2]
                });
                if !clash {
                    break;
                }
                bottom -= 11.0;
            }
            placed.push([left, left + w, bottom - h + 2.0, bottom + 2.0]);
            if bottom < py - 10.0 {
                // Moved off its point: a leader line says whose label it is.
                svg.line(px, py, lx, bottom + 1.0, "#9e9e9e");
            }
            for (i, line) in lines.iter().rev().enumerate() {
                svg.text(lx, bottom - 11.0 * i as f64, anchor, 9, line);
            }
        }
        svg.end_group();
        svg.group("top");
        for r in s.results.iter().take(MARKED).rev() {
            let (px, py) = (sx(r.score.detection), sy(y_of(r)));
            svg.ring(px, py, 7.0, GOLD);
        }
        svg.end_group();
    }
    svg.group("key");
    for (i, line) in key.lines.iter().enumerate() {
        let col = i / key.rows.max(1);
        let row = i % key.rows.max(1);
        let x = 60.0 + key.column_width * col as f64;
        let y = key_top + KEY_LINE * row as f64;
        let fill = if line.top { "#8d6e00" } else { "#222222" };
        svg.text_fill(x, y, Anchor::Start, KEY_SIZE, fill, &line.text);
    }
    svg.end_group();
    let more = s.results.len().saturating_sub(LABELLED);
    let mut foot =
        format!("blue: the ten best, gold rings: the {MARKED} best, by score = {SCORE_FORMULA}");
    if more > 0 {
        foot = format!(
            "{more} configs past rank {LABELLED} are unlabelled (all are in --format csv); {foot}"
        );
    }
    for (i, line) in wrap(&foot, 10, W - 80.0).iter().enumerate() {
        svg.text(60.0, h - 20.0 + 12.0 * i as f64, Anchor::Start, 10, line);
    }
    svg.finish()
}

/// `#1–#4, #11, #12`: ranks sharing a spot, runs of three or more
/// consecutive ranks written as a range; tied configs (one rank) coincide
/// and are named once.
fn rank_label(ranks: &[usize]) -> String {
    let mut ranks = ranks.to_vec();
    ranks.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut e = i;
        while e + 1 < ranks.len() && ranks[e + 1] == ranks[e] + 1 {
            e += 1;
        }
        if e >= i + 2 {
            parts.push(format!("#{}–#{}", ranks[i], ranks[e]));
        } else {
            parts.extend(ranks[i..=e].iter().map(|r| format!("#{r}")));
        }
        i = e + 1;
    }
    parts.join(", ")
}

fn params(r: &SweepResult) -> String {
    let p: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    p.join(" ")
}

struct KeyLine {
    text: String,
    top: bool,
}

struct Key {
    lines: Vec<KeyLine>,
    rows: usize,
    column_width: f64,
}

/// The key's lines — `#rank  k=v k=v  (score s)`, wrapped — in two columns
/// when every line fits half the width, else one.
fn key_lines(s: &Sweep) -> Key {
    let full = W - 80.0;
    let entries: Vec<(String, bool)> = s
        .results
        .iter()
        .take(LABELLED)
        .enumerate()
        .map(|(i, r)| {
            let text = format!("#{}  {}  (score {:.1})", r.rank, params(r), r.score.value);
            // The ringed ones: the first MARKED rows, ties or not.
            (text, i < MARKED)
        })
        .collect();
    let half = full / 2.0;
    let two = entries.len() > 1
        && entries
            .iter()
            .all(|(t, _)| text_width(t, KEY_SIZE) <= half - 10.0);
    let width = if two { half } else { full };
    let mut lines = Vec::new();
    for (text, top) in entries {
        for l in wrap(&text, KEY_SIZE, width - 10.0) {
            lines.push(KeyLine { text: l, top });
        }
    }
    let columns = if two { 2 } else { 1 };
    Key {
        rows: lines.len().div_ceil(columns),
        lines,
        column_width: width,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coinciding_ranks_are_listed_with_runs_as_ranges() {
        assert_eq!(rank_label(&[1, 2, 3, 4, 11, 12]), "#1–#4, #11, #12");
        assert_eq!(rank_label(&[7]), "#7");
        assert_eq!(rank_label(&[1, 1, 3, 4, 5]), "#1, #3–#5");
    }

    #[test]
    fn the_axis_is_logarithmic_past_one_decade() {
        let values =
            |ticks: Vec<(f64, bool)>| -> Vec<f64> { ticks.into_iter().map(|(t, _)| t).collect() };
        let labelled = |ticks: Vec<(f64, bool)>| -> Vec<f64> {
            ticks.into_iter().filter(|t| t.1).map(|(t, _)| t).collect()
        };
        let log = XAxis::for_delays([0.3, 4.0, 60.0].into_iter());
        let ticks = log.ticks();
        assert_eq!(
            values(ticks.clone()),
            vec![0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(labelled(ticks), vec![0.1, 1.0, 10.0, 100.0], "3 decades");
        assert!((log.frac(1.0) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(log.frac(0.0), 0.0, "zero on the left edge");
        let two = XAxis::for_delays([1.5, 40.0].into_iter());
        assert_eq!(
            labelled(two.ticks()),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        let lin = XAxis::for_delays([2.0, 5.0, 12.0].into_iter());
        assert_eq!(
            labelled(lin.ticks()),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
        );
    }
}
