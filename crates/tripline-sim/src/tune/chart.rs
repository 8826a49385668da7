//! `tripline tune --chart`: the recorded failure rate and slow share over
//! time, the outages shaded, and each objective's trips marked on a lane
//! of its own, so a person sees what each recommendation would have done.

use crate::svg::{Anchor, Svg};

use super::read::Second;
use super::recommend::{Objective, Tuning};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 110.0;
const PLOT: f64 = WIDTH - LEFT - 20.0;
const TOP: f64 = 30.0;
const RATE_H: f64 = 160.0;
const LANE: f64 = 22.0;

/// Renders the chart of `tuning` on the recorded `seconds` as SVG.
pub fn render(tuning: &Tuning, seconds: &[Second]) -> String {
    let span = seconds.len().max(1) as f64;
    let lanes = Objective::ALL.len() + usize::from(tuning.current.is_some());
    let height = TOP + RATE_H + 30.0 + LANE * lanes as f64 + 20.0;
    let mut svg = Svg::new(WIDTH, height, "tripline tune: recorded traffic and trips");
    let x = |s: f64| LEFT + PLOT * s / span;
    for o in &tuning.outages {
        svg.rect(
            x(o.from as f64),
            TOP,
            (x(o.to as f64) - x(o.from as f64)).max(1.0),
            RATE_H + 30.0 + LANE * lanes as f64,
            "#ffe0b2",
            Some("outage"),
        );
    }
    // Rates per bar of whole seconds, at most one bar per pixel.
    let per_bar = (span / PLOT).ceil().max(1.0) as usize;
    let mut failed = Vec::new();
    let mut slow = Vec::new();
    for (b, chunk) in seconds.chunks(per_bar).enumerate() {
        let calls: u64 = chunk.iter().map(Second::calls).sum();
        if calls == 0 {
            continue;
        }
        let f: u64 = chunk.iter().map(Second::failures).sum();
        let sl: u64 = chunk
            .iter()
            .map(|s| s.slow(tuning.baseline.slow_bucket))
            .sum();
        let at = x((b * per_bar) as f64 + per_bar as f64 / 2.0);
        let y = |r: f64| TOP + RATE_H * (1.0 - r);
        failed.push((at, y(f as f64 / calls as f64)));
        slow.push((at, y(sl as f64 / calls as f64)));
    }
    svg.line(LEFT, TOP + RATE_H, LEFT + PLOT, TOP + RATE_H, "#999999");
    svg.text(LEFT - 6.0, TOP + 4.0, Anchor::End, 10, "100%");
    svg.text(LEFT - 6.0, TOP + RATE_H, Anchor::End, 10, "0%");
    svg.polyline(&slow, "#1e88e5");
    svg.polyline(&failed, "#e53935");
    svg.text_fill(
        LEFT,
        TOP - 10.0,
        Anchor::Start,
        11,
        "#e53935",
        "failed share",
    );
    svg.text_fill(
        LEFT + 90.0,
        TOP - 10.0,
        Anchor::Start,
        11,
        "#1e88e5",
        "slow share",
    );
    let mut lane = TOP + RATE_H + 30.0;
    let mut rows: Vec<(&str, &[f64])> = Objective::ALL
        .iter()
        .map(|&o| (o.name(), tuning.pick(o).1.trips.as_slice()))
        .collect();
    if let Some((_, r)) = &tuning.current {
        rows.push(("current", r.trips.as_slice()));
    }
    for (name, trips) in rows {
        svg.text(LEFT - 6.0, lane + LANE / 2.0 + 4.0, Anchor::End, 11, name);
        svg.line(
            LEFT,
            lane + LANE / 2.0,
            LEFT + PLOT,
            lane + LANE / 2.0,
            "#dddddd",
        );
        for &t in trips {
            svg.circle(
                x(t),
                lane + LANE / 2.0,
                4.0,
                "#e53935",
                &format!("trip at {t:.1} s"),
            );
        }
        lane += LANE;
    }
    svg.finish()
}
