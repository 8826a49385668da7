//! The candidate configs, derived from the recorded traffic.
//!
//! - window: time windows of 10, 30 and 60 s that hold at least
//!   [`MIN_WINDOW_CALLS`] calls at the quietest minute's rate (the longest
//!   is kept regardless), and a count window of ~20 s of mean traffic;
//! - `minimum_calls`: ¼ and ½ of what the window holds at the quietest
//!   minute's rate (at least 5), so the breaker can still trip then;
//! - `failure_rate_threshold`: well above the p99 of the healthy 10 s
//!   windows' failure rate (×1.5 + 5 %, ×2 + 15 %, ×3 + 30 %, ≤ 100 %);
//! - `slow_call_duration`: off, or 2 × the healthy p99 latency, with a
//!   slow-rate threshold above the healthy windows' slow-rate p99;
//! - `open_duration` 5 s or 20 s; half-open: 3 consecutive successes, or
//!   up to 10 probes (no more than `minimum_calls`) judged 20 points
//!   below the threshold (the library's hysteresis), when that is > 0.

use std::time::Duration;

use tripline::{CircuitBreakerConfig, HalfOpenPolicy, OpenDuration, WindowConfig};

use super::outage::{Baseline, Outage};
use super::read::{Traffic, bucket_of};

/// A time window must hold this many calls at the quietest minute.
pub const MIN_WINDOW_CALLS: f64 = 10.0;

/// What the grid was derived from, kept for the reasoning lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// Mean calls per second outside outages.
    pub healthy_rate: f64,
    /// Calls in the quietest full minute outside outages.
    pub quietest_minute: u64,
    /// Its first second, from the log's start.
    pub quietest_at: u64,
    /// p99 of the failure rate of healthy 10 s windows.
    pub failure_p99: f64,
    /// p99 of the slow rate of healthy 10 s windows (slow: ≥ the slow line).
    pub slow_p99: f64,
    /// Healthy p99 latency, ms.
    pub latency_p99_ms: f64,
    /// The slow line proposed, ms.
    pub slow_ms: u64,
}

/// The grid and what it came from.
#[derive(Clone, Debug)]
pub struct Candidates {
    /// Configs in grid order (ties keep it).
    pub configs: Vec<CircuitBreakerConfig>,
    /// The figures they were derived from.
    pub facts: Facts,
}

/// Derives the grid from `traffic`, its baseline and outages.
pub fn derive(traffic: &Traffic, baseline: &Baseline, outages: &[Outage]) -> Candidates {
    let secs = &traffic.seconds;
    let healthy = |s: usize| !outages.iter().any(|o| o.contains(s as u64));
    // Minutes without a single call are left out of the rate and of the
    // quietest minute: no config can trip there, and a log restricted to
    // some hours of the day has whole such stretches.
    let (mut calls, mut n) = (0u64, 0u64);
    for (m, chunk) in secs.chunks(60).enumerate() {
        let healthy_seconds = (m * 60..m * 60 + chunk.len()).filter(|&i| healthy(i));
        let (c, k) = healthy_seconds.fold((0, 0), |(c, k), i| (c + secs[i].calls(), k + 1));
        if c > 0 {
            calls += c;
            n += k;
        }
    }
    let healthy_rate = calls as f64 / n.max(1) as f64;
    let (mut quietest_minute, mut quietest_at) = (calls, 0u64);
    for (m, chunk) in secs.chunks(60).enumerate() {
        let from = m * 60;
        if chunk.len() == 60 && (from..from + 60).all(healthy) {
            let c: u64 = chunk.iter().map(|s| s.calls()).sum();
            if c > 0 && c < quietest_minute {
                (quietest_minute, quietest_at) = (c, from as u64);
            }
        }
    }
    if secs.len() < 60 {
        quietest_minute = (healthy_rate * 60.0) as u64;
    }
    let latency_p99_ms = baseline.p99_ms;
    let slow_ms = nice_ms(2.0 * latency_p99_ms);
    let slow_from = bucket_of(slow_ms as f64);
    let mut fail_rates = Vec::new();
    let mut slow_rates = Vec::new();
    for (w, chunk) in secs.chunks(10).enumerate() {
        if !(w * 10..w * 10 + chunk.len()).all(healthy) {
            continue;
        }
        let c: u64 = chunk.iter().map(|s| s.calls()).sum();
        if c >= 5 {
            let f: u64 = chunk.iter().map(|s| s.failures()).sum();
            let sl: u64 = chunk.iter().map(|s| s.slow(slow_from)).sum();
            fail_rates.push(f as f64 / c as f64);
            slow_rates.push(sl as f64 / c as f64);
        }
    }
    let facts = Facts {
        healthy_rate,
        quietest_minute,
        quietest_at,
        failure_p99: p99(&mut fail_rates),
        slow_p99: p99(&mut slow_rates),
        latency_p99_ms,
        slow_ms,
    };
    Candidates {
        configs: configs(&facts),
        facts,
    }
}

fn p99(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
}

/// A duration rounded up to 1, 2 or 5 × a power of ten, ms.
fn nice_ms(ms: f64) -> u64 {
    let ms = ms.max(1.0);
    let p = 10f64.powf(ms.log10().floor());
    let m = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * p >= ms)
        .unwrap_or(10.0);
    (m * p).round() as u64
}

fn round2(x: f64) -> f64 {
    ((x * 100.0).ceil() / 100.0).clamp(0.01, 1.0)
}

/// The failure-rate thresholds tried, lowest first.
pub fn thresholds(failure_p99: f64) -> Vec<f64> {
    let mut t: Vec<f64> = [(1.5, 0.05), (2.0, 0.15), (3.0, 0.3)]
        .iter()
        .map(|(m, a)| round2((failure_p99 * m).max(failure_p99 + a)))
        .collect();
    t.dedup();
    t
}

fn configs(f: &Facts) -> Vec<CircuitBreakerConfig> {
    let quiet_rate = f.quietest_minute as f64 / 60.0;
    let mut windows: Vec<(WindowConfig, f64)> = Vec::new();
    for len in [10u64, 30, 60] {
        if quiet_rate * len as f64 >= MIN_WINDOW_CALLS || len == 60 {
            windows.push((
                WindowConfig::Time {
                    length: Duration::from_secs(len),
                    buckets: 10,
                },
                quiet_rate * len as f64,
            ));
        }
    }
    let size = (f.healthy_rate * 20.0)
        .round()
        .clamp(10.0, f64::from(WindowConfig::MAX_COUNT)) as u32;
    windows.push((
        WindowConfig::Count { size },
        f64::from(size).min(quiet_rate * 20.0),
    ));
    let thresholds = thresholds(f.failure_p99);
    let slow_threshold = round2((f.slow_p99 * 2.0).max(f.slow_p99 + 0.2));
    let mut out = Vec::new();
    for (window, held) in &windows {
        let mut mins: Vec<u32> = [0.25, 0.5]
            .iter()
            .map(|q| ((held * q).floor() as u32).max(5))
            .collect();
        if let WindowConfig::Count { size } = window {
            mins.iter_mut().for_each(|m| *m = (*m).min(*size));
        }
        mins.dedup();
        for &minimum_calls in &mins {
            for &threshold in &thresholds {
                for slow in [None, Some(Duration::from_millis(f.slow_ms))] {
                    for open in [5u64, 20] {
                        for half_open in [
                            HalfOpenPolicy::Consecutive { successes: 3 },
                            HalfOpenPolicy::Permits {
                                calls: minimum_calls.min(10),
                                failure_rate_threshold: round2(threshold - 0.2),
                            },
                        ] {
                            let c = CircuitBreakerConfig {
                                name: "tuned".to_owned(),
                                window: *window,
                                minimum_calls,
                                failure_rate_threshold: threshold,
                                slow_call_duration: slow,
                                slow_call_rate_threshold: if slow.is_some() {
                                    slow_threshold
                                } else {
                                    1.0
                                },
                                open_duration: OpenDuration::Fixed(Duration::from_secs(open)),
                                half_open,
                                ..CircuitBreakerConfig::default()
                            };
                            // A candidate the library would warn about is no recommendation.
                            if c.validate().is_ok_and(|w| w.is_empty()) {
                                out.push(c);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
