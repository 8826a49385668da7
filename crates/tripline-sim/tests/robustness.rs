//! No scenario text panics the simulator: whatever the values — zero,
//! negative, NaN, infinite, absurdly large, out of order — parsing either
//! gives a scenario or an error, and a scenario that parses simulates to
//! the same report twice.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use proptest::prelude::*;
use tripline_sim::{Grid, Report, Scenario};

/// Durations no field accepts, or that stretch every limit.
const HOSTILE_DURATIONS: &[&str] = &[
    "\"0s\"",
    "\"1ns\"",
    "\"100000000h\"",
    "\"-1s\"",
    "\"soon\"",
    "5",
];

/// A value for one field: in a hostile scenario one value in five comes
/// from `hostile`; a sane scenario uses `valid` only, so that many
/// scenarios get through parsing and run.
fn pick(h: bool, valid: &[&'static str], hostile: &[&'static str]) -> BoxedStrategy<&'static str> {
    let valid = prop::sample::select(valid.to_vec());
    if h {
        prop_oneof![4 => valid, 1 => prop::sample::select(hostile.to_vec())].boxed()
    } else {
        valid.boxed()
    }
}

fn span(h: bool) -> BoxedStrategy<&'static str> {
    pick(h, &["\"10s\"", "\"30s\"", "\"60s\""], HOSTILE_DURATIONS)
}

fn instant(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["\"1s\"", "\"3s\"", "\"7s\"", "\"9s\""],
        HOSTILE_DURATIONS,
    )
}

fn latency(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["\"1ms\"", "\"20ms\"", "\"250ms\"", "\"2s\""],
        HOSTILE_DURATIONS,
    )
}

fn window_length(h: bool) -> BoxedStrategy<&'static str> {
    pick(h, &["\"1s\"", "\"10s\"", "\"30s\""], HOSTILE_DURATIONS)
}

fn open_duration(h: bool) -> BoxedStrategy<&'static str> {
    pick(h, &["\"1s\"", "\"3s\"", "\"7s\""], HOSTILE_DURATIONS)
}

fn fraction(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["0.05", "0.2", "0.5", "1.0"],
        &["-1.0", "0.0", "1e-9", "1.5", "1e12", "nan", "inf", "-inf"],
    )
}

fn traffic_rate(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["0.5", "5.0", "20.0"],
        &["-1.0", "0.0", "1e-9", "1e12", "nan", "inf"],
    )
}

fn count(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["1", "2", "5", "10", "20"],
        &[
            "-1",
            "0",
            "30000",
            "1000000",
            "4294967295",
            "18446744073709551615",
        ],
    )
}

fn fault(h: bool) -> impl Strategy<Value = String> {
    (
        instant(h),
        instant(h),
        prop::bool::ANY,
        fraction(h),
        prop::option::of(latency(h)),
        prop::bool::ANY,
        prop::collection::vec(instant(h), usize::from(!h)..4),
        prop::bool::ANY,
    )
        .prop_map(
            move |(a, b, latency_kind, rate, latency, at_list, mut at, expect)| {
                let when = if at_list {
                    if !h {
                        at.sort_by_key(|s| {
                            s.trim_matches(|c: char| !c.is_ascii_digit())
                                .parse::<u32>()
                                .unwrap_or(0)
                        });
                        at.dedup();
                    }
                    format!("at = [{}]", at.join(", "))
                } else if !h && a > b {
                    format!("start = {b}\nend = {a}")
                } else {
                    format!("start = {a}\nend = {b}")
                };
                let (kind, latency) = match (latency_kind, latency) {
                    (true, None) if !h => ("latency", Some("\"900ms\"")),
                    (true, l) => ("latency", l),
                    (false, l) => ("error", l),
                };
                let latency = latency.map_or(String::new(), |l| format!("latency = {l}\n"));
                format!(
                    "[[fault]]\nname = \"f\"\nkind = \"{kind}\"\n{when}\nrate = {rate}\n\
                 expect_trip = {expect}\n{latency}"
                )
            },
        )
}

fn breaker(h: bool) -> impl Strategy<Value = String> {
    (
        (
            prop::bool::ANY,
            count(h),
            window_length(h),
            count(h),
            count(h),
        ),
        (fraction(h), fraction(h), latency(h), open_duration(h)),
        (prop::bool::ANY, count(h), fraction(h)),
    )
        .prop_map(
            |(
                (count_window, size, length, buckets, minimum),
                (failure, slow_rate, slow, open),
                (consecutive, probes, probe_threshold),
            )| {
                let window = if count_window {
                    format!("{{ kind = \"count\", size = {size} }}")
                } else {
                    format!("{{ kind = \"time\", length = {length}, buckets = {buckets} }}")
                };
                let half_open = if consecutive {
                    format!("{{ policy = \"consecutive\", successes = {probes} }}")
                } else {
                    format!(
                        "{{ policy = \"permits\", calls = {probes}, \
                         failure_rate_threshold = {probe_threshold} }}"
                    )
                };
                format!(
                    "window = {window}\nminimum_calls = {minimum}\n\
                     failure_rate_threshold = {failure}\nslow_call_duration = {slow}\n\
                     slow_call_rate_threshold = {slow_rate}\nopen_duration = {open}\n\
                     half_open = {half_open}\n"
                )
            },
        )
}

fn scenario(h: bool) -> impl Strategy<Value = String> {
    (
        span(h),
        traffic_rate(h),
        latency(h),
        prop::option::of(latency(h)),
        count(h),
        prop::collection::vec(fault(h), 0..3),
        prop::collection::vec(breaker(h), usize::from(!h)..3),
    )
        .prop_map(
            |(length, rate, latency, timeout, replicas, faults, breakers)| {
                let timeout = timeout.map_or(String::new(), |t| format!("timeout = {t}\n"));
                let breakers: String = breakers
                    .iter()
                    .enumerate()
                    .map(|(i, b)| format!("[[breaker]]\nname = \"b{i}\"\n{b}"))
                    .collect();
                format!(
                    "duration = {length}\nseed = 7\n[traffic]\nrate = {rate}\nlatency = {latency}\n\
                 {timeout}replicas = {replicas}\n{}{breakers}",
                    faults.concat(),
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// `--grid` specs are user input: any text parses or is refused.
    #[test]
    fn any_grid_spec_parses_or_is_refused(
        specs in prop::collection::vec("[a-z_.=,0-9\\[\\]\" s]{0,30}", 0..20)
    ) {
        if let Ok(grid) = Grid::parse(&specs) {
            prop_assert!(!grid.is_empty() && grid.len() <= tripline_sim::sweep::MAX_POINTS);
        }
    }

    #[test]
    fn no_scenario_panics_and_reports_are_deterministic(
        src in prop_oneof![scenario(false), scenario(true)]
    ) {
        let parsed = Scenario::from_toml("prop.toml", &src);
        // `ROBUSTNESS_STATS=1 cargo test --test robustness -- --nocapture |
        // sort | uniq -c` shows how many generated scenarios get to run.
        if std::env::var_os("ROBUSTNESS_STATS").is_some() {
            match &parsed {
                Ok(_) => eprintln!("OK"),
                Err(e) => eprintln!("ERR {}", e.to_string().lines().next().unwrap_or_default()),
            }
        }
        let Ok(scenario) = parsed else {
            // Refused with an error (the CLI's bad-input tests check what
            // it names); refusing without panicking is all that is asked.
            return Ok(());
        };
        let calls = scenario
            .calls_per_replica()
            .saturating_mul(u64::from(scenario.traffic.replicas));
        prop_assume!(calls <= 30_000);
        let first = Report::simulate(&scenario).map(|r| r.to_json());
        let second = Report::simulate(&scenario).map(|r| r.to_json());
        match (first, second) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "runs disagree: {a:?} / {b:?}"),
        }
    }
}

/// A refused scenario's error names the file and the field.
#[test]
fn refusals_name_the_file_and_the_field() {
    let err = Scenario::from_toml(
        "bad.toml",
        "duration = \"10s\"\n[traffic]\nrate = -1.0\n[[breaker]]\nname = \"b\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("rate"), "{err}");
}

/// A bad element of an array names the array's key and the position.
#[test]
fn a_bad_array_element_names_its_key() {
    let err = Scenario::from_toml(
        "bad.toml",
        "duration = \"10s\"\n[traffic]\nrate = 5.0\n[[fault]]\nname = \"f\"\nat = [\"1s\", 5]\n\
         [[breaker]]\nname = \"b\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("bad.toml:6:13:"), "{err}");
    assert!(err.contains("[[fault]] #1 \"f\", field `at`"), "{err}");
}

/// A scenario that would run for days is refused up front, naming the rate
/// and what multiplies it.
#[test]
fn a_scenario_of_more_than_a_billion_calls_is_refused() {
    let err = Scenario::from_toml(
        "huge.toml",
        "duration = \"7days\"\n[traffic]\nrate = 1e6\nreplicas = 10\n[[breaker]]\nname = \"b\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("huge.toml:3:8: in [traffic], field `rate`"),
        "{err}"
    );
    assert!(
        err.contains("6048000000000 calls; at most 1000000000"),
        "{err}"
    );
}
