//! The bundled scenarios teach what their comments say, through the
//! library's public API.

use std::path::PathBuf;

use tripline::{Reason, State};
use tripline_sim::{Report, Run, Scenario};

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn simulate(name: &str) -> (Scenario, Report) {
    let scenario = Scenario::load(&path(name)).expect("bundled scenario is valid");
    let report = Report::simulate(&scenario).expect("runs");
    (scenario, report)
}

fn run<'a>(report: &'a Report, breaker: &str) -> &'a Run {
    report
        .runs
        .iter()
        .find(|r| r.breaker == breaker)
        .expect("breaker present")
}

#[test]
fn every_bundled_scenario_says_what_it_teaches() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("scenarios/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 4);
    for p in names {
        let src = std::fs::read_to_string(&p).expect("read");
        assert!(src.starts_with('#'), "{p:?} opens with a comment");
        assert!(src.contains("What it teaches:"), "{p:?}");
        Scenario::from_toml(&p.display().to_string(), &src).expect("valid");
    }
}

#[test]
fn ride_hailing_detection_delay_trades_against_false_trips() {
    let (_, report) = simulate("ride-hailing-eta.toml");
    let (s, b, c) = (
        run(&report, "sensitive"),
        run(&report, "balanced"),
        run(&report, "conservative"),
    );
    let delay = |r: &Run| r.faults[0].detection_delay.expect("the outage is detected");
    assert!(delay(s) < delay(b) && delay(b) < delay(c));
    assert!(delay(s) < 0.1 && delay(c) > 15.0);
    assert_eq!(
        s.false_trips, 2,
        "the 2- and 3-call blips trip the sensitive breaker"
    );
    assert_eq!(s.faults[2].trips, 0, "a single dropped call does not");
    assert_eq!((b.false_trips, c.false_trips), (0, 0));
    assert!(s.collateral_rejected > 5 * b.collateral_rejected);
    assert!(
        c.faults[0].failed > 10 * b.faults[0].failed,
        "slow detection fails callers"
    );
    assert!(b.score.value < s.score.value && b.score.value < c.score.value);
}

#[test]
fn slow_dependency_is_caught_only_by_the_slow_call_rate() {
    let (_, report) = simulate("slow-dependency.toml");
    let blind = run(&report, "errors only");
    assert_eq!(blind.trips(), 0);
    assert_eq!(
        (blind.totals.failed, blind.totals.rejected),
        (0, 0),
        "no errors at all"
    );
    let aware = run(&report, "slow-call aware");
    let first = &aware.transitions[0];
    assert_eq!(
        (first.from, first.to, first.reason),
        (State::Closed, State::Open, Reason::SlowCallRate)
    );
    assert!(aware.faults[0].detection_delay.expect("detected") < 10.0);
    assert!(aware.totals.rejected > 500);
    assert_eq!(
        aware.trips(),
        1,
        "slow probes fail the half-open round: no flapping during the slowness"
    );
}

#[test]
fn fixed_open_duration_makes_replicas_probe_in_lock_step() {
    let (scenario, report) = simulate("replica-resonance.toml");
    assert_eq!(scenario.traffic.replicas, 200);
    let fixed = run(&report, "fixed 10s");
    let jittered = run(&report, "jittered 10s");
    let backoff = run(&report, "backoff + jitter");
    let peak = |r: &Run| r.faults[0].probe_peak_per_second.expect("tripped");
    assert_eq!(peak(fixed), 200, "every replica probes in the same second");
    assert!(
        peak(jittered) < 50 && peak(backoff) < 100,
        "jitter spreads the probes"
    );
    // Periodic spikes: with the dependency down, the fixed breakers send
    // nothing except 200 probes every 10 s.
    let outage = &fixed.per_second[25..90];
    let spikes: Vec<usize> = (0..outage.len())
        .filter(|&i| outage[i].sent() > 0)
        .collect();
    assert!(spikes.len() >= 6);
    // Period: the open duration, plus the wait for the next call (0.2 s)
    // and the failed probe's 20 ms, so 10.22 s.
    let gaps: Vec<usize> = spikes.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| (10..=11).contains(g)),
        "period ≈ open duration: {spikes:?}"
    );
    // Recovery: all 200 fixed breakers close in the same instant.
    let closes = |r: &Run| {
        let t: Vec<u64> = r
            .transitions
            .iter()
            .filter(|t| t.to == State::Closed)
            .map(|t| t.at)
            .collect();
        (
            t.len(),
            t.iter().max().copied().unwrap_or(0) - t.iter().min().copied().unwrap_or(0),
        )
    };
    assert_eq!(closes(fixed), (200, 0));
    let (n, spread) = closes(jittered);
    assert!(
        n >= 200 && spread > 5_000_000_000,
        "jittered replicas close over > 5 s"
    );
}

#[test]
fn low_traffic_never_reaches_minimum_calls_in_a_time_window() {
    let (_, report) = simulate("low-traffic.toml");
    let rate = run(&report, "rate-based");
    assert_eq!(rate.trips(), 0);
    assert_eq!(rate.score.missed, 1);
    assert_eq!(
        rate.faults[0].failed, 60,
        "every call of the 5-minute outage goes out and fails"
    );
    assert!(
        rate.warnings.iter().any(|w| w.contains("can never trip")),
        "{:?}",
        rate.warnings
    );
    let consecutive = run(&report, "consecutive failures");
    assert_eq!(
        consecutive.faults[0].detection_delay,
        Some(10.08),
        "third failure, 80 ms late"
    );
}

/// Each bundled scenario's comment states a lesson; the score must rank the
/// configs the way the lesson says, or the simulator teaches the opposite.
#[test]
fn every_bundled_scenarios_ranking_agrees_with_its_lesson() {
    let rank = |report: &Report, name: &str| {
        let mut runs: Vec<&Run> = report.runs.iter().collect();
        runs.sort_by(|a, b| a.score.value.total_cmp(&b.score.value));
        runs.iter()
            .position(|r| r.breaker == name)
            .expect("breaker present")
    };
    let lessons: [(&str, &[&str]); 4] = [
        ("low-traffic.toml", &["consecutive failures", "rate-based"]),
        (
            "replica-resonance.toml",
            &["jittered 10s", "backoff + jitter", "fixed 10s"],
        ),
        (
            "ride-hailing-eta.toml",
            &["balanced", "sensitive", "conservative"],
        ),
        ("slow-dependency.toml", &["slow-call aware", "errors only"]),
    ];
    for (file, order) in lessons {
        let (_, report) = simulate(file);
        let ranks: Vec<usize> = order.iter().map(|n| rank(&report, n)).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]),
            "{file}: expected {order:?} in this order, got ranks {ranks:?}"
        );
    }
    let resonance = simulate("replica-resonance.toml").1;
    let fixed = run(&resonance, "fixed 10s");
    let jittered = run(&resonance, "jittered 10s");
    assert!(
        fixed.score.lockstep > 3.0 * jittered.score.lockstep,
        "lock-step probing is what sinks the fixed duration"
    );
}
