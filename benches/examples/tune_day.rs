//! `tripline tune` at the scale of a day: 24 hours at 200 requests/s
//! (17.28 M calls) with one two-minute outage at noon, ranked over a
//! 500-config grid on every core. The derived grid is widened to 500 by
//! the open durations and failure-rate thresholds around it, so the extra
//! configs are plausible ones, not padding that loses at once.
//!
//! `cargo run --release -p tripline-benches --example tune_day` prints
//! one JSON line: the grid, its classes (configs that decide alike until a
//! trip and share that stretch's replay), the ranking time and how many
//! replays stopped early. Reading the day's log
//! is measured by the `tune` criterion bench (lines per second); the day
//! is built here from an hour read once and repeated, so that the log's
//! 5 GB need not be held in memory.

use std::time::{Duration, Instant};

use tripline::OpenDuration;
use tripline_sim::tune::grid;
use tripline_sim::tune::outage::detect;
use tripline_sim::tune::read::{ReadOptions, Traffic, read};
use tripline_sim::tune::recommend::rank_candidates;
use tripline_sim::tune::replay::closed_behaviour;
use tripline_sim::tune::synth::{Spec, write};

/// An hour of the proxy's JSON access log at 200 requests/s, read.
fn hour(outage_at: Option<u64>) -> Option<Traffic> {
    let spec = Spec {
        seconds: 3600,
        rate: 200,
        outages: outage_at
            .map(|at| (at, at + 120, false))
            .into_iter()
            .collect(),
        ..Spec::default()
    };
    let mut bytes = Vec::new();
    write(&spec, &mut bytes).ok()?;
    read(&bytes[..], &ReadOptions::default()).ok()
}

fn main() -> std::process::ExitCode {
    let (Some(healthy), Some(noon)) = (hour(None), hour(Some(1800))) else {
        eprintln!("tune_day: the synthetic hour did not read");
        return std::process::ExitCode::FAILURE;
    };
    let mut day = healthy.clone();
    day.seconds.clear();
    for h in 0..24 {
        let part = if h == 12 { &noon } else { &healthy };
        day.seconds.extend_from_slice(&part.seconds);
    }
    let (baseline, outages) = detect(&day);
    let derived = grid::derive(&day, &baseline, &outages);
    let mut candidates = derived.clone();
    'widen: for extra_open in [10, 40, 60, 90] {
        for scale in [1.0, 0.8, 1.25] {
            for c in &derived.configs {
                if candidates.configs.len() >= 500 {
                    break 'widen;
                }
                let mut c = c.clone();
                c.open_duration = OpenDuration::Fixed(Duration::from_secs(extra_open));
                c.failure_rate_threshold = (c.failure_rate_threshold * scale).clamp(0.01, 1.0);
                candidates.configs.push(c);
            }
        }
    }
    let configs = candidates.configs.len();
    // A benchmark measures the wall clock the user waits on.
    #[allow(clippy::disallowed_methods)]
    let start = Instant::now();
    let Ok(tuning) = rank_candidates(&day, baseline, outages, candidates, None, &|| {}) else {
        eprintln!("tune_day: ranking failed");
        return std::process::ExitCode::FAILURE;
    };
    let took = start.elapsed();
    let stopped = tuning
        .results
        .iter()
        .filter(|r| r.stopped_at.is_some())
        .count();
    let mut classes: Vec<tripline::CircuitBreakerConfig> = Vec::new();
    for c in &tuning.candidates.configs {
        let key = closed_behaviour(c);
        if !classes.contains(&key) {
            classes.push(key);
        }
    }
    println!(
        "{{\"calls\":{},\"outages\":{},\"configs\":{configs},\"classes\":{},\"cores\":{},\"rank_seconds\":{:.2},\"stopped_early\":{stopped}}}",
        day.calls(),
        tuning.outages.len(),
        classes.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        took.as_secs_f64(),
    );
    std::process::ExitCode::SUCCESS
}
