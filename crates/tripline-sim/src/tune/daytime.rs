//! Time of day: when the traffic differs by hour (a busy day, a quiet
//! night), one config cannot fit both — a `minimum_calls` the night can
//! reach is a hair trigger at peak. This splits the hours of the day (UTC)
//! into a peak and a quiet period when their mean rates differ by at least
//! [`RATIO`], and tunes each on its own hours.

use super::outage::Outage;
use super::read::{Second, Traffic};
use super::recommend::{Objective, Tuning, rank};

/// Peak over quiet mean rate from which one config per period is proposed.
pub const RATIO: f64 = 3.0;

/// An hour of the day needs this many recorded seconds to be judged.
const MIN_SECONDS: u64 = 1800;

/// One period and its own tuning.
#[derive(Clone, Debug)]
pub struct Period {
    /// `peak` or `quiet`.
    pub name: &'static str,
    /// Its hours of the day, UTC.
    pub hours: Vec<u8>,
    /// Its mean calls per second.
    pub rate: f64,
    /// The tuning on its hours alone.
    pub tuning: Tuning,
}

/// Mean calls per second by hour of the day (UTC), for the hours with
/// enough recorded seconds.
pub fn hourly_rates(traffic: &Traffic) -> Vec<(u8, f64)> {
    let mut calls = [0u64; 24];
    let mut seconds = [0u64; 24];
    for (i, s) in traffic.seconds.iter().enumerate() {
        let h = ((traffic.start + i as u64) / 3600 % 24) as usize;
        calls[h] += s.calls();
        seconds[h] += 1;
    }
    (0..24)
        .filter(|&h| seconds[h] >= MIN_SECONDS)
        .map(|h| (h as u8, calls[h] as f64 / seconds[h] as f64))
        .collect()
}

/// The peak and quiet hours, if the traffic differs enough by hour.
pub fn split(traffic: &Traffic) -> Option<(Vec<u8>, Vec<u8>)> {
    let rates = hourly_rates(traffic);
    let max = rates.iter().map(|r| r.1).fold(0.0, f64::max);
    let min = rates.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    if rates.len() < 2 || min <= 0.0 || max / min < RATIO {
        return None;
    }
    let cut = (max * min).sqrt();
    let peak = rates.iter().filter(|r| r.1 >= cut).map(|r| r.0).collect();
    let quiet = rates.iter().filter(|r| r.1 < cut).map(|r| r.0).collect();
    Some((peak, quiet))
}

/// Tunes each period on its own hours (the other hours emptied), with the
/// whole log's baseline and the outages that start in the period.
pub fn tune_periods(
    traffic: &Traffic,
    whole: &Tuning,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Period>, String> {
    let Some((peak, quiet)) = split(traffic) else {
        return Ok(Vec::new());
    };
    let hour = |i: u64| ((traffic.start + i) / 3600 % 24) as u8;
    let mut out = Vec::new();
    for (name, hours) in [("peak", peak), ("quiet", quiet)] {
        let mut part = traffic.clone();
        for (i, s) in part.seconds.iter_mut().enumerate() {
            if !hours.contains(&hour(i as u64)) {
                *s = Second::default();
            }
        }
        let outages: Vec<Outage> = whole
            .outages
            .iter()
            .filter(|o| hours.contains(&hour(o.from)))
            .cloned()
            .collect();
        let secs = part.seconds.iter().filter(|s| s.calls() > 0).count().max(1);
        let rate = part.calls() as f64 / secs as f64;
        let tuning = rank(&part, whole.baseline.clone(), outages, None, tick)
            .map_err(|e| format!("the {name} hours: {e}"))?;
        out.push(Period {
            name,
            hours,
            rate,
            tuning,
        });
    }
    Ok(out)
}

/// The periods as text: why, then each period's hours and config (its
/// breaker named `name`).
pub fn text(periods: &[Period], objective: Objective, name: &str) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if periods.is_empty() {
        return s;
    }
    let hours = |h: &[u8]| {
        h.iter()
            .map(|h| format!("{h:02}h"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        s,
        "\ntime of day: the traffic differs by hour, one config per period ({}):",
        objective.name()
    );
    for p in periods {
        let (config, r) = p.tuning.pick(objective);
        let _ = writeln!(
            s,
            "# {} hours (UTC) {}: {:.1} calls/s; {} false trip(s), {} healthy call(s) rejected",
            p.name,
            hours(&p.hours),
            p.rate,
            r.false_trips,
            r.rejected_healthy
        );
        s.push_str(&named_toml(config, name));
    }
    s
}

/// The config as a breaker table under `name`.
fn named_toml(config: &tripline::CircuitBreakerConfig, name: &str) -> String {
    let mut c = config.clone();
    c.name = name.to_owned();
    super::recommend::config_toml(&c)
}

/// The hours as runs of consecutive hours, `(from, to)` with `to`
/// exclusive (24 for midnight); a run through midnight is one run
/// (`to` < `from`).
pub fn hour_runs(hours: &[u8]) -> Vec<(u8, u8)> {
    let mut sorted: Vec<u8> = hours.iter().copied().filter(|h| *h < 24).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(u8, u8)> = Vec::new();
    for h in sorted {
        match runs.last_mut() {
            Some((_, to)) if *to == h => *to = h + 1,
            _ => runs.push((h, h + 1)),
        }
    }
    // 22h 23h and 00h 01h are one run, through midnight.
    if runs.len() > 1 && runs[0].0 == 0 && runs[runs.len() - 1].1 == 24 {
        let first = runs.remove(0);
        if let Some(last) = runs.last_mut() {
            last.1 = first.1;
        }
    }
    runs
}

/// The periods as one config document for `tripline config push`: the
/// quiet hours' config as the breaker's table, and the peak hours' config
/// as a daily `[[profile]]` per run of peak hours (UTC), which the
/// appliers switch to and from at the hours' boundaries, keeping state.
/// `name` names the breaker (the route's, for a proxy route).
pub fn document_toml(periods: &[Period], objective: Objective, name: &str) -> Option<String> {
    use std::fmt::Write as _;
    let quiet = periods.iter().find(|p| p.name == "quiet")?;
    let peak = periods.iter().find(|p| p.name == "peak")?;
    let named = |c| named_toml(c, name);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Tuned per time of day ({}): the quiet hours' config, and the\n# peak hours' as a daily profile (UTC).\n",
        objective.name()
    );
    let _ = writeln!(s, "[[breaker]]\n{}", named(quiet.tuning.pick(objective).0));
    let days = r#"["mon", "tue", "wed", "thu", "fri", "sat", "sun"]"#;
    for (from, to) in hour_runs(&peak.hours) {
        let _ = writeln!(
            s,
            "[[profile]]\nname = \"peak-{from:02}h\"\nwhen = {{ days = {days}, from = \"{from:02}:00\", to = \"{:02}:00\", tz = \"UTC\" }}\n",
            to % 24
        );
        let _ = writeln!(
            s,
            "[[profile.breaker]]\n{}",
            named(peak.tuning.pick(objective).0)
        );
    }
    Some(s)
}
