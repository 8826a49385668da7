//! The report: outages, trade-off table, recommendation with one line of
//! reasoning per parameter, and the config as TOML.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use tripline::{CircuitBreakerConfig, HalfOpenPolicy, OpenDuration, WindowConfig};

use super::{Objective, Tuning};
use crate::tune::outage::Kind;
use crate::tune::replay::Outcome;

/// A second from the log's start as a UTC time of day, `HH:MM:SS`.
pub fn clock(tuning: &Tuning, s: f64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(tuning.traffic.start + s.max(0.0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()[11..19].to_owned()
}

fn ms(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn window_text(w: &WindowConfig) -> String {
    match w {
        WindowConfig::Time { length, .. } => format!("time {}", ms(*length)),
        WindowConfig::Count { size } => format!("count {size}"),
    }
}

fn half_open_text(h: &HalfOpenPolicy) -> String {
    match h {
        HalfOpenPolicy::Consecutive { successes } => format!("{successes} in a row"),
        HalfOpenPolicy::Permits {
            calls,
            failure_rate_threshold,
        } => {
            format!("{calls} @ {:.0}%", failure_rate_threshold * 100.0)
        }
        HalfOpenPolicy::Ramp { .. } => "ramp".to_owned(),
    }
}

fn open_text(o: &OpenDuration) -> String {
    match o {
        OpenDuration::Fixed(d) => ms(*d),
        OpenDuration::Backoff(b) => format!("backoff from {}", ms(b.initial)),
    }
}

/// The config as a breaker table: valid as a file for `tripline check`
/// and `tripline config push`, and inline as a route's `breaker = {…}`.
pub fn config_toml(c: &CircuitBreakerConfig) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "name = {:?}", c.name);
    let _ = match c.window {
        WindowConfig::Time { length, buckets } => writeln!(
            s,
            "window = {{ kind = \"time\", length = \"{}\", buckets = {buckets} }}",
            ms(length)
        ),
        WindowConfig::Count { size } => {
            writeln!(s, "window = {{ kind = \"count\", size = {size} }}")
        }
    };
    let _ = writeln!(s, "minimum_calls = {}", c.minimum_calls);
    let _ = writeln!(s, "failure_rate_threshold = {}", c.failure_rate_threshold);
    if let Some(d) = c.slow_call_duration {
        let _ = writeln!(s, "slow_call_duration = \"{}\"", ms(d));
        let _ = writeln!(
            s,
            "slow_call_rate_threshold = {}",
            c.slow_call_rate_threshold
        );
    }
    if let OpenDuration::Fixed(d) = c.open_duration {
        let _ = writeln!(s, "open_duration = \"{}\"", ms(d));
    }
    let _ = match &c.half_open {
        HalfOpenPolicy::Consecutive { successes } => writeln!(
            s,
            "half_open = {{ policy = \"consecutive\", successes = {successes} }}"
        ),
        HalfOpenPolicy::Permits {
            calls,
            failure_rate_threshold,
        } => writeln!(
            s,
            "half_open = {{ policy = \"permits\", calls = {calls}, failure_rate_threshold = {failure_rate_threshold} }}"
        ),
        HalfOpenPolicy::Ramp { .. } => Ok(()),
    };
    s
}

/// One line per parameter: its value and the figure it came from.
pub fn reasons(t: &Tuning, c: &CircuitBreakerConfig) -> Vec<String> {
    let f = &t.candidates.facts;
    let quiet = f.quietest_minute;
    let mut out = Vec::new();
    out.push(match c.window {
        WindowConfig::Time { length, .. } => format!(
            "window = time {}: at the quietest minute's {:.1} calls/s it holds ~{:.0} calls; at the mean {:.1} calls/s, ~{:.0}",
            ms(length),
            quiet as f64 / 60.0,
            quiet as f64 / 60.0 * length.as_secs_f64(),
            f.healthy_rate,
            f.healthy_rate * length.as_secs_f64()
        ),
        WindowConfig::Count { size } => format!(
            "window = count {size}: ~20 s of the healthy mean of {:.1} calls/s",
            f.healthy_rate
        ),
    });
    out.push(format!(
        "minimum_calls = {}: the quietest minute (at {}) had {quiet} calls, so the window can still trip then",
        c.minimum_calls,
        clock(t, f.quietest_at as f64)
    ));
    out.push(format!(
        "failure_rate_threshold = {}: healthy 10 s windows failed {:.1}% at p99 (baseline {:.2}%)",
        c.failure_rate_threshold,
        f.failure_p99 * 100.0,
        t.baseline.failure_rate * 100.0
    ));
    out.push(match c.slow_call_duration {
        Some(d) => format!(
            "slow_call_duration = {} (rate threshold {}): 2 × the healthy p99 latency of {:.1} ms; healthy windows were {:.1}% that slow at p99",
            ms(d),
            c.slow_call_rate_threshold,
            f.latency_p99_ms,
            f.slow_p99 * 100.0
        ),
        None => "slow_call_duration off: slow-call detection caught nothing failures did not catch sooner".to_owned(),
    });
    out.push(format!(
        "open_duration = {}: the shortest outage lasted {}",
        open_text(&c.open_duration),
        t.outages
            .iter()
            .map(|o| o.to - o.from)
            .min()
            .map_or("— (none found)".to_owned(), |s| format!("{s} s"))
    ));
    out.push(format!(
        "half_open = {}: it scored best with the rest",
        half_open_text(&c.half_open)
    ));
    out
}

fn figures(o: &Outcome) -> String {
    let det: Vec<String> = o
        .detection
        .iter()
        .map(|d| d.map_or("missed".to_owned(), |d| format!("{d:.1}s")))
        .collect();
    format!(
        "{:<16} {:>11} {:>16} {:>12} {:>8.1}",
        if det.is_empty() {
            "—".to_owned()
        } else {
            det.join(",")
        },
        o.false_trips,
        o.rejected_healthy,
        o.let_through,
        o.score.value
    )
}

fn row(name: &str, c: &CircuitBreakerConfig, o: &Outcome) -> String {
    format!(
        "{name:<13} {:<11} {:>5} {:>6} {:>7} {:>5} {:<10} {}",
        window_text(&c.window),
        c.minimum_calls,
        format!("{:.0}%", c.failure_rate_threshold * 100.0),
        c.slow_call_duration.map_or("off".to_owned(), ms),
        open_text(&c.open_duration),
        half_open_text(&c.half_open),
        figures(o)
    )
}

/// The whole report, recommending `objective`'s config.
pub fn text(t: &Tuning, objective: Objective) -> String {
    let mut s = String::new();
    let tr = &t.traffic;
    let _ = writeln!(
        s,
        "traffic: {} s from {} UTC, {} calls ({:.1}/s), {:.2}% failed; latency p50 ≤ {:.1} ms, healthy p99 ≤ {:.1} ms",
        tr.seconds,
        clock(t, 0.0),
        tr.calls,
        tr.calls as f64 / tr.seconds.max(1) as f64,
        tr.failures as f64 * 100.0 / tr.calls.max(1) as f64,
        t.baseline.p50_ms,
        t.baseline.p99_ms
    );
    let _ = writeln!(s, "outages: {}", t.outages.len());
    for o in &t.outages {
        let _ = writeln!(
            s,
            "  {}–{} ({} s, {}): {:.0}% failed, {:.0}% slow (baseline {:.1}% / {:.1}%)",
            clock(t, o.from as f64),
            clock(t, o.to as f64),
            o.to - o.from,
            match (o.labelled, o.kind) {
                (true, _) => "labelled",
                (false, Kind::Errors) => "errors",
                (false, Kind::Slow) => "slow",
            },
            o.failure_rate * 100.0,
            o.slow_rate * 100.0,
            t.baseline.failure_rate * 100.0,
            t.baseline.slow_rate * 100.0
        );
    }
    let stopped = t.results.iter().filter(|r| r.stopped_at.is_some()).count();
    let _ = if stopped == 0 {
        writeln!(
            s,
            "candidates: {} configs replayed through the breaker\n",
            t.results.len()
        )
    } else {
        writeln!(
            s,
            "candidates: {} configs replayed through the breaker ({stopped} stopped early: already worse than the best under every objective)\n",
            t.results.len()
        )
    };
    let _ = writeln!(
        s,
        "{:<13} {:<11} {:>5} {:>6} {:>7} {:>5} {:<10} {:<16} {:>11} {:>16} {:>12} {:>8}",
        "objective",
        "window",
        "min",
        "thresh",
        "slow",
        "open",
        "half-open",
        "detection",
        "false trips",
        "healthy rejected",
        "let through",
        "score"
    );
    for &o in &Objective::ALL {
        let (c, r) = t.pick(o);
        let _ = writeln!(s, "{}", row(o.name(), c, r));
    }
    if let Some((c, r)) = &t.current {
        let _ = writeln!(s, "{}", row("current", c, r));
    }
    let (c, r) = t.pick(objective);
    let _ = writeln!(s, "\nrecommended ({}):", objective.name());
    for line in reasons(t, c) {
        let _ = writeln!(s, "  {line}");
    }
    if let Some((_, cur)) = &t.current {
        let _ = writeln!(s, "\ncompared with the current config:");
        for (i, o) in t.outages.iter().enumerate() {
            let at = clock(t, o.from as f64);
            let line = match (r.detection[i], cur.detection[i]) {
                (Some(a), Some(b)) if a < b => {
                    format!("would have caught the {at} outage {:.1} s earlier", b - a)
                }
                (Some(a), Some(b)) if a > b => {
                    format!("would have caught the {at} outage {:.1} s later", a - b)
                }
                (Some(_), Some(_)) => format!("would have caught the {at} outage as fast"),
                (Some(a), None) => format!(
                    "would have caught the {at} outage (after {a:.1} s), which the current config missed"
                ),
                (None, Some(_)) => {
                    format!("would have missed the {at} outage, which the current config caught")
                }
                (None, None) => {
                    format!("would have missed the {at} outage, as the current config did")
                }
            };
            let _ = writeln!(s, "  {line}");
        }
        let diff = r.false_trips as i64 - cur.false_trips as i64;
        let _ = writeln!(
            s,
            "  with {} false trip(s) ({} {}), {} healthy call(s) rejected ({} now)",
            r.false_trips,
            if diff >= 0 {
                format!("{diff}")
            } else {
                format!("{}", -diff)
            },
            if diff >= 0 { "more" } else { "fewer" },
            r.rejected_healthy,
            cur.rejected_healthy
        );
    }
    s
}
