//! `tune` on logs in the proxy's exact JSON format with known outages:
//! it must find them, recommend a config that trips on them quickly and
//! never on the healthy phases, and refuse logs it cannot use.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use tripline_sim::tune::read::{ReadOptions, read};
use tripline_sim::tune::recommend::{Objective, config_toml, text, tune};
use tripline_sim::tune::synth::{Spec, write};

fn log(spec: &Spec) -> Vec<u8> {
    let mut out = Vec::new();
    write(spec, &mut out).unwrap();
    out
}

fn run(bytes: &[u8]) -> tripline_sim::tune::Tuning {
    let traffic = read(bytes, &ReadOptions::default()).unwrap();
    tune(&traffic, None, None, &|| {}).unwrap()
}

/// A drill's expectation: the breaker opens within this of the outage's start.
const TRIP_WITHIN: f64 = 10.0;

#[test]
fn finds_the_outage_and_trips_on_it_only() {
    let spec = Spec {
        outages: vec![(600, 720, false)],
        ..Spec::default()
    };
    let t = run(&log(&spec));
    assert_eq!(t.outages.len(), 1, "{:?}", t.outages);
    let o = &t.outages[0];
    assert!(
        o.from.abs_diff(600) <= 1 && o.to.abs_diff(720) <= 1,
        "{o:?}"
    );
    for objective in Objective::ALL {
        let (config, r) = t.pick(objective);
        let d = r.detection[0].expect("caught");
        assert!(d <= TRIP_WITHIN, "{objective:?}: {d} s with {config:?}");
        assert_eq!(r.false_trips, 0, "{objective:?}: {config:?}");
    }
    let report = text(&t, Objective::Balanced);
    assert!(report.contains("minimum_calls = "), "{report}");
    assert!(report.contains("quietest minute"), "{report}");
    assert!(
        report.contains("sensitive") && report.contains("conservative"),
        "{report}"
    );
}

#[test]
fn finds_a_slow_outage() {
    let spec = Spec {
        outages: vec![(300, 420, true)],
        ..Spec::default()
    };
    let t = run(&log(&spec));
    assert_eq!(t.outages.len(), 1, "{:?}", t.outages);
    let (config, r) = t.pick(Objective::Balanced);
    assert!(config.slow_call_duration.is_some(), "{config:?}");
    assert!(r.detection[0].is_some_and(|d| d <= TRIP_WITHIN), "{r:?}");
    assert_eq!(r.false_trips, 0);
}

#[test]
fn a_healthy_log_gets_a_config_that_never_trips() {
    let t = run(&log(&Spec::default()));
    assert!(t.outages.is_empty(), "{:?}", t.outages);
    for objective in Objective::ALL {
        let (config, r) = t.pick(objective);
        assert!(
            r.trips.is_empty(),
            "{objective:?}: {config:?} tripped at {:?}",
            r.trips
        );
    }
}

#[test]
fn the_recommended_config_is_a_valid_breaker_table() {
    let spec = Spec {
        outages: vec![(600, 720, false)],
        ..Spec::default()
    };
    let t = run(&log(&spec));
    let (config, _) = t.pick(Objective::Balanced);
    let toml_text = config_toml(config);
    let parsed: tripline::CircuitBreakerConfig = toml::from_str(&toml_text).unwrap();
    parsed.validate().unwrap();
    assert_eq!(&parsed, config, "{toml_text}");
}

#[test]
fn refuses_a_log_with_too_few_calls() {
    let spec = Spec {
        seconds: 5,
        ..Spec::default()
    };
    let traffic = read(&log(&spec)[..], &ReadOptions::default()).unwrap();
    let e = tune(&traffic, None, None, &|| {}).unwrap_err();
    assert!(
        e.contains("too few calls") && e.contains("100 call(s)"),
        "{e}"
    );
}

#[test]
fn refuses_a_log_with_one_outcome_only() {
    let spec = Spec {
        failure_rate: 0.0,
        ..Spec::default()
    };
    let traffic = read(&log(&spec)[..], &ReadOptions::default()).unwrap();
    let e = tune(&traffic, None, None, &|| {}).unwrap_err();
    assert!(
        e.contains("one outcome only") && e.contains("succeeded"),
        "{e}"
    );
}

#[test]
fn the_emitted_scenario_runs_in_the_simulator_and_trips_on_the_outage() {
    use tripline_sim::tune::scenario::scenario_toml;
    let spec = Spec {
        outages: vec![(600, 720, false)],
        ..Spec::default()
    };
    let t = run(&log(&spec));
    let (config, _) = t.pick(Objective::Balanced);
    let src = scenario_toml(&t, config);
    let scenario = tripline_sim::Scenario::from_toml("emitted.toml", &src).unwrap();
    let report = tripline_sim::Report::simulate(&scenario).unwrap();
    let outage = report.runs[0].faults.last().unwrap();
    assert!(
        outage.detection_delay.is_some_and(|d| d <= TRIP_WITHIN),
        "{src}\n{outage:?}"
    );
}

#[test]
fn traffic_that_differs_by_hour_gets_one_config_per_period() {
    use tripline_sim::tune::daytime::{split, tune_periods};
    // 07:00–08:00 UTC at 2 requests/s, 08:00–09:00 at 20.
    let spec = Spec {
        start: 1_796_108_400,
        seconds: 7200,
        rate: 2,
        busy: Some((3600, 7200, 20)),
        ..Spec::default()
    };
    let bytes = log(&spec);
    let traffic = read(&bytes[..], &ReadOptions::default()).unwrap();
    assert_eq!(split(&traffic), Some((vec![8], vec![7])));
    let whole = tune(&traffic, None, None, &|| {}).unwrap();
    let periods = tune_periods(&traffic, &whole, &|| {}).unwrap();
    let [peak, quiet] = &periods[..] else {
        panic!("{periods:?}")
    };
    let (p, q) = (
        peak.tuning.pick(Objective::Balanced).0,
        quiet.tuning.pick(Objective::Balanced).0,
    );
    assert!(p.minimum_calls > q.minimum_calls, "peak {p:?}\nquiet {q:?}");
    for period in &periods {
        assert!(
            period.tuning.pick(Objective::Balanced).1.trips.is_empty(),
            "{}",
            period.name
        );
    }
    let steady = run(&log(&Spec {
        seconds: 7200,
        ..Spec::default()
    }));
    assert!(
        tune_periods(
            &read(
                &log(&Spec {
                    seconds: 7200,
                    ..Spec::default()
                })[..],
                &ReadOptions::default()
            )
            .unwrap(),
            &steady,
            &|| {}
        )
        .unwrap()
        .is_empty()
    );
}

/// Noisy traffic (5 % background failures, so loose configs trip
/// falsely) with two outages; and a slow outage beside a partial one.
fn noisy_logs() -> [Spec; 2] {
    [
        Spec {
            seconds: 1800,
            failure_rate: 0.05,
            outages: vec![(300, 360, false), (1200, 1320, false)],
            ..Spec::default()
        },
        Spec {
            seconds: 1200,
            outages: vec![(200, 260, true), (900, 960, false)],
            outage_failure_rate: 0.6,
            ..Spec::default()
        },
    ]
}

#[test]
fn stopping_hopeless_replays_early_picks_what_full_replays_pick() {
    use tripline_sim::tune::replay;
    for spec in noisy_logs() {
        let t = run(&log(&spec));
        let stopped = t.results.iter().filter(|r| r.stopped_at.is_some()).count();
        assert!(
            stopped * 2 > t.results.len(),
            "most of this grid is hopeless early: {stopped} of {} stopped",
            t.results.len()
        );
        let traffic = read(&log(&spec)[..], &ReadOptions::default()).unwrap();
        let rate = t.candidates.facts.healthy_rate;
        let full: Vec<_> = t
            .candidates
            .configs
            .iter()
            .map(|c| replay::run(&traffic, &t.outages, c, rate).unwrap())
            .collect();
        for (i, r) in t.results.iter().enumerate() {
            match r.stopped_at {
                None => assert_eq!(r, &full[i], "a finished replay is the full one"),
                Some(_) => {
                    for objective in Objective::ALL {
                        let (_, best) = t.pick(objective);
                        assert!(
                            objective.cost(&full[i]) > objective.cost(best),
                            "{i} {:?}\npartial {r:?}\nfull {:?}\nbest {best:?}",
                            t.candidates.configs[i],
                            full[i]
                        );
                    }
                }
            }
        }
        for objective in Objective::ALL {
            let mut best = 0;
            for (i, r) in full.iter().enumerate() {
                if objective.cost(r) < objective.cost(&full[best]) - 1e-9 {
                    best = i;
                }
            }
            assert_eq!(
                t.pick(objective).1,
                &full[best],
                "{} picks the full replays' best",
                objective.name()
            );
        }
    }
}

#[test]
fn a_class_member_continued_from_its_leaders_checkpoint_equals_its_replay_from_the_start() {
    use tripline_sim::tune::bound::Bound;
    use tripline_sim::tune::replay::{closed_behaviour, run_class};
    for spec in noisy_logs() {
        let bytes = log(&spec);
        let t = run(&bytes);
        let traffic = read(&bytes[..], &ReadOptions::default()).unwrap();
        let rate = t.candidates.facts.healthy_rate;
        let configs = &t.candidates.configs;
        let mut continued = 0;
        for leader in configs {
            let key = closed_behaviour(leader);
            let class: Vec<_> = configs
                .iter()
                .filter(|c| closed_behaviour(c) == key)
                .collect();
            if class.len() < 2 || !std::ptr::eq(class[0], leader) {
                continue;
            }
            let outcomes = run_class(&traffic, &t.outages, &class, rate, &Bound::none()).unwrap();
            for (config, outcome) in class.iter().zip(&outcomes) {
                let alone =
                    tripline_sim::tune::replay::run(&traffic, &t.outages, config, rate).unwrap();
                assert_eq!(outcome, &alone, "{config:?}");
            }
            continued += usize::from(!outcomes[0].trips.is_empty()) * (class.len() - 1);
        }
        assert!(continued > 0, "some members went on from a checkpoint");
    }
}
