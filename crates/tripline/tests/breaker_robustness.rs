//! No config value and no call sequence panics the breaker: configs with
//! hostile values (zero, negative, NaN, infinite, ten-thousand-year
//! durations, contradictions) are parsed, validated and either refused with
//! an error or built; a built breaker then survives any sequence of calls,
//! outcomes, clock jumps, operator actions, reconfigurations and snapshot
//! round trips, and its invariants hold.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod support {
    pub mod hostile;
}

use std::time::Duration;

use proptest::prelude::*;
use std::time::SystemTime;
use support::hostile::pick;

use tripline::breaker::Snapshot;
use tripline::clock::{ManualClock, Timestamp};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, State, WindowSnapshot};

fn window_length(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["\"1s\"", "\"10s\"", "\"60s\""],
        &["\"0s\"", "\"100000000h\"", "\"-1s\"", "7"],
    )
}

fn duration(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["\"1ms\"", "\"500ms\"", "\"1s\"", "\"5s\"", "\"60s\""],
        &[
            "\"0s\"",
            "\"1ns\"",
            "\"100000000h\"",
            "\"18446744073709551615ns\"",
            "\"-1s\"",
            "7",
        ],
    )
}

fn fraction(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["0.1", "0.5", "0.99", "1.0"],
        &["0.0", "-0.5", "1.5", "nan", "inf", "1e-300"],
    )
}

fn factor(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["1.0", "1.5", "3.0"],
        &["0.0", "-2.0", "nan", "inf", "1e300"],
    )
}

fn count(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["1", "2", "5", "20", "100"],
        &["0", "-1", "30001", "4294967295"],
    )
}

fn window(h: bool) -> BoxedStrategy<String> {
    prop_oneof![
        count(h).prop_map(|n| format!("{{ kind = \"count\", size = {n} }}")),
        (window_length(h), count(h))
            .prop_map(|(l, b)| format!("{{ kind = \"time\", length = {l}, buckets = {b} }}")),
    ]
    .boxed()
}

fn open_duration(h: bool) -> BoxedStrategy<String> {
    prop_oneof![
        duration(h).prop_map(str::to_owned),
        (
            duration(h),
            factor(h),
            duration(h),
            pick(h, &["\"full\"", "\"equal\"", "0.2"], &["1.5", "\"wild\""])
        )
            .prop_map(|(i, m, x, j)| format!(
                "{{ initial = {i}, multiplier = {m}, max = {x}, jitter = {j} }}"
            )),
    ]
    .boxed()
}

fn half_open(h: bool) -> BoxedStrategy<String> {
    prop_oneof![
        count(h).prop_map(|n| format!("{{ policy = \"consecutive\", successes = {n} }}")),
        (count(h), fraction(h)).prop_map(|(n, f)| format!(
            "{{ policy = \"permits\", calls = {n}, failure_rate_threshold = {f} }}"
        )),
        (
            pick(
                h,
                &["[0.1, 0.5, 1.0]", "[1.0]"],
                &["[0.5, 0.1, 1.0]", "[0.1, 0.5]", "[]", "[nan, 1.0]"]
            ),
            duration(h),
            fraction(h),
            count(h)
        )
            .prop_map(|(s, d, f, m)| format!(
                "{{ policy = \"ramp\", steps = {s}, step_duration = {d}, \
                 failure_rate_threshold = {f}, minimum_calls_per_step = {m} }}"
            )),
    ]
    .boxed()
}

/// A config as TOML text; each optional key present or not.
fn config_text(h: bool) -> impl Strategy<Value = String> {
    (
        (
            window(h),
            count(h),
            fraction(h),
            prop::option::of(duration(h)),
            fraction(h),
        ),
        (
            open_duration(h),
            half_open(h),
            prop::option::of(duration(h)),
        ),
        (
            prop::option::of(duration(h)),
            prop::option::of((duration(h), fraction(h))),
            prop::option::of((duration(h), pick(h, &["no_trip", "relaxed"], &["loud"]))),
            prop::option::of((
                pick(h, &["0.5", "0.9", "0.99"], &["0.0", "1.0", "nan"]),
                factor(h),
                duration(h),
                duration(h),
            )),
            prop::option::of(factor(h)),
        ),
    )
        .prop_map(
            move |(
                (window, minimum, failure, slow, slow_rate),
                (open, half_open, max_half_open),
                (min_state, cooldown, warm_up, baseline, probe_factor),
            )| {
                let mut t = format!(
                    "window = {window}\nminimum_calls = {minimum}\n\
                     failure_rate_threshold = {failure}\nslow_call_rate_threshold = {slow_rate}\n\
                     open_duration = {open}\nhalf_open = {half_open}\n"
                );
                if let Some(s) = slow {
                    t += &format!("slow_call_duration = {s}\n");
                }
                if let Some(d) = max_half_open {
                    t += &format!("max_half_open_duration = {d}\n");
                }
                if let Some(d) = min_state {
                    t += &format!("min_state_duration = {d}\n");
                }
                if let Some((d, f)) = cooldown {
                    t +=
                        &format!("cooldown = {{ duration = {d}, failure_rate_threshold = {f} }}\n");
                }
                if let Some((d, m)) = warm_up {
                    t += &format!("warm_up = {{ duration = {d}, mode = \"{m}\" }}\n");
                }
                // A sane config has a fixed or a learned slow-call threshold,
                // never both.
                let baseline = baseline.filter(|_| h || slow.is_none());
                if let Some((q, f, lo, hi)) = baseline {
                    t += &format!(
                        "slow_call = {{ baseline_quantile = {q}, factor = {f}, floor = {lo}, \
                         ceiling = {hi} }}\n"
                    );
                }
                if let Some(f) = probe_factor {
                    t += &format!("slow_probe_factor = {f}\n");
                }
                t
            },
        )
}

/// Something a user or an operator does to a breaker.
#[derive(Clone, Debug)]
enum Action {
    /// A call through `try_acquire`, recorded with this outcome and latency
    /// (ms), or dropped unrecorded.
    Call(Option<Outcome>, u64),
    /// `call(|| ..)` returning `Ok` or `Err`.
    Closure(bool),
    Advance(u64),
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
    OpenFor(u64),
    OpenUntil(u64),
    Reconfigure(String),
    SnapshotRoundTrip,
}

fn action() -> impl Strategy<Value = Action> {
    let outcome = prop::option::of(prop::sample::select(vec![
        Outcome::Success,
        Outcome::Failure,
        Outcome::Ignored,
    ]));
    let ms = prop_oneof![0..5_000u64, Just(u64::MAX / 2_000_000), Just(u64::MAX)];
    prop_oneof![
        20 => (outcome, 0..3_000u64).prop_map(|(o, l)| Action::Call(o, l)),
        5 => any::<bool>().prop_map(Action::Closure),
        10 => ms.clone().prop_map(Action::Advance),
        1 => Just(Action::ForceOpen),
        1 => Just(Action::Disable),
        1 => Just(Action::MetricsOnly),
        1 => Just(Action::Reset),
        1 => ms.clone().prop_map(Action::OpenFor),
        1 => ms.prop_map(Action::OpenUntil),
        1 => prop_oneof![config_text(false), config_text(true)].prop_map(Action::Reconfigure),
        1 => Just(Action::SnapshotRoundTrip),
    ]
}

fn run(breaker: &CircuitBreaker, clock: &ManualClock, action: &Action) {
    match action {
        Action::Call(outcome, latency) => {
            if let (Ok(permit), Some(o)) = (breaker.try_acquire(), outcome) {
                permit.record(*o, Duration::from_millis(*latency));
            }
        }
        Action::Closure(ok) => {
            let _ = breaker.call(|| if *ok { Ok(1) } else { Err("down") });
        }
        Action::Advance(ms) => {
            clock.advance(Duration::from_millis(*ms));
        }
        Action::ForceOpen => breaker.force_open(),
        Action::Disable => breaker.disable(),
        Action::MetricsOnly => breaker.metrics_only(),
        Action::Reset => breaker.reset(),
        Action::OpenFor(ms) => breaker.open_for(Duration::from_millis(*ms)),
        Action::OpenUntil(ms) => {
            breaker.open_until(Timestamp::from_nanos(ms.saturating_mul(1_000_000)));
        }
        Action::Reconfigure(text) => {
            if let Ok(config) = toml::from_str::<CircuitBreakerConfig>(text) {
                let before = breaker.config();
                if breaker.reconfigure(config).is_err() {
                    assert_eq!(breaker.config(), before, "a refused config changes nothing");
                }
            }
        }
        Action::SnapshotRoundTrip => {
            let snapshot = breaker.snapshot();
            let text = serde_json::to_string(&snapshot).unwrap();
            let back = serde_json::from_str(&text).unwrap();
            let restored = CircuitBreaker::builder()
                .config(breaker.config())
                .clock(clock.clone())
                .restore(back)
                .build();
            if let Ok(r) = restored {
                // A half-open round's probes die with the process: it comes
                // back open, probing again at once.
                let expected = match breaker.state() {
                    State::HalfOpen => State::Open,
                    s => s,
                };
                assert_eq!(r.state(), expected, "{snapshot:?}");
            }
        }
    }
}

/// Runs `actions`, checking the window's consistency after each.
fn drive(
    breaker: &CircuitBreaker,
    clock: &ManualClock,
    actions: &[Action],
) -> Result<(), TestCaseError> {
    for a in actions {
        run(breaker, clock, a);
        let m = breaker.metrics();
        prop_assert!(m.window.failures <= m.window.calls, "{m:?}");
        prop_assert!(m.window.slow <= m.window.calls, "{m:?}");
    }
    Ok(())
}

/// With `ROBUSTNESS_STATS` set (and `--nocapture`), prints what became of
/// each generated config, to check that the generator reaches the breaker
/// often enough: `... | sort | uniq -c`.
fn stats(line: impl FnOnce() -> String) {
    if std::env::var_os("ROBUSTNESS_STATS").is_some() {
        eprintln!("{}", line());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn no_config_and_no_call_sequence_panics(
        text in prop_oneof![config_text(false), config_text(true)],
        actions in prop::collection::vec(action(), 0..120),
    ) {
        let parsed = toml::from_str::<CircuitBreakerConfig>(&text);
        stats(|| match &parsed {
            Ok(_) => "PARSED".to_owned(),
            Err(e) => format!("UNPARSED {}", e.message()),
        });
        let Ok(config) = parsed else {
            return Ok(());
        };
        let clock = ManualClock::new();
        let built = CircuitBreaker::builder()
            .config(config)
            .clock(clock.clone())
            .seed(1)
            .build();
        stats(|| match &built {
            Ok(_) => "BUILT".to_owned(),
            Err(e) => format!("REFUSED {e}"),
        });
        let Ok(breaker) = built else {
            return Ok(());
        };
        drive(&breaker, &clock, &actions)?;
    }

    /// A snapshot file is input too: a corrupted or hand-edited one (counts
    /// beyond the window, failures above calls, deadlines in 1970 or in the
    /// far future, an absurd backoff round or learned threshold) restores
    /// without panicking, and the breaker then behaves.
    #[test]
    fn no_snapshot_panics_a_restore(
        text in config_text(false),
        state in prop::sample::select(State::ALL.to_vec()),
        counts in prop::array::uniform4(prop_oneof![0..200u64, Just(u64::MAX)]),
        open_until in prop::option::of(prop_oneof![
            Just(0u64),
            Just(1_700_000_000u64),
            Just(4_000_000_000u64),
            Just(u64::MAX / 4),
        ]),
        backoff_round in prop_oneof![0..10u64, Just(u64::MAX)],
        learned in prop::option::of(prop_oneof![
            (0..5_000u64).prop_map(Duration::from_millis),
            Just(Duration::MAX),
        ]),
        actions in prop::collection::vec(action(), 0..60),
    ) {
        let Ok(config) = toml::from_str::<CircuitBreakerConfig>(&text) else {
            return Ok(());
        };
        let snapshot = Snapshot {
            name: "restored".into(),
            state,
            window: WindowSnapshot {
                calls: counts[0],
                failures: counts[1],
                slow: counts[2],
                slow_failures: counts[3],
            },
            open_until: open_until
                .and_then(|s| SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(s))),
            backoff_round,
            config_version: 7,
            learned_slow_call: learned,
        };
        let clock = ManualClock::new();
        let Ok(breaker) = CircuitBreaker::builder()
            .config(config)
            .clock(clock.clone())
            .restore(snapshot)
            .build()
        else {
            return Ok(());
        };
        drive(&breaker, &clock, &actions)?;
    }
}
