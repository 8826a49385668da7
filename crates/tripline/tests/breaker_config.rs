//! Bad input: every impossible value is refused with an error naming the
//! field and the constraint; soft contradictions come back as warnings;
//! unknown keys are refused by the parser.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::breaker::{Backoff, Jitter, OpenDuration};
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, WindowConfig};

fn refused(config: CircuitBreakerConfig, field: &str, needle: &str) {
    let err = CircuitBreaker::try_new(config).expect_err(field);
    assert_eq!(err.field, field, "{err}");
    let text = err.to_string();
    assert!(text.contains(field) && text.contains(needle), "{text}");
}

fn base() -> CircuitBreakerConfig {
    CircuitBreakerConfig::default()
}

#[test]
fn impossible_values_are_refused_naming_the_field() {
    refused(
        CircuitBreakerConfig {
            window: WindowConfig::Count { size: 0 },
            ..base()
        },
        "window.size",
        "between 1 and 30000, got 0",
    );
    refused(
        CircuitBreakerConfig {
            window: WindowConfig::Count { size: 1_000_000 },
            ..base()
        },
        "window.size",
        "got 1000000",
    );
    refused(
        CircuitBreakerConfig {
            window: WindowConfig::Time {
                length: Duration::from_millis(500),
                buckets: 10,
            },
            ..base()
        },
        "window.length",
        "between 1s and 1h",
    );
    refused(
        CircuitBreakerConfig {
            window: WindowConfig::Time {
                length: Duration::from_secs(10),
                buckets: 0,
            },
            ..base()
        },
        "window.buckets",
        "got 0",
    );
    refused(
        CircuitBreakerConfig {
            minimum_calls: 0,
            ..base()
        },
        "minimum_calls",
        "got 0",
    );
    for bad in [0.0, -0.1, 1.5, f64::NAN] {
        refused(
            CircuitBreakerConfig {
                failure_rate_threshold: bad,
                ..base()
            },
            "failure_rate_threshold",
            "fraction in (0, 1]",
        );
        refused(
            CircuitBreakerConfig {
                slow_call_rate_threshold: bad,
                ..base()
            },
            "slow_call_rate_threshold",
            "(0, 1]",
        );
    }
    refused(
        CircuitBreakerConfig {
            slow_call_duration: Some(Duration::ZERO),
            ..base()
        },
        "slow_call_duration",
        "got 0s",
    );
    refused(
        CircuitBreakerConfig {
            open_duration: OpenDuration::Fixed(Duration::ZERO),
            ..base()
        },
        "open_duration",
        "got 0s",
    );
    refused(
        CircuitBreakerConfig {
            open_duration: OpenDuration::Fixed(Duration::from_secs(10 * 86_400)),
            ..base()
        },
        "open_duration",
        "1day",
    );
    let backoff = |multiplier, max, jitter| Backoff {
        initial: Duration::from_secs(5),
        multiplier,
        max,
        jitter,
    };
    refused(
        CircuitBreakerConfig {
            open_duration: OpenDuration::Backoff(backoff(
                0.5,
                Duration::from_secs(60),
                Jitter::None,
            )),
            ..base()
        },
        "open_duration.multiplier",
        "between 1 and 100, got 0.5",
    );
    refused(
        CircuitBreakerConfig {
            open_duration: OpenDuration::Backoff(backoff(
                2.0,
                Duration::from_secs(1),
                Jitter::None,
            )),
            ..base()
        },
        "open_duration.max",
        "at least initial (5s)",
    );
    refused(
        CircuitBreakerConfig {
            open_duration: OpenDuration::Backoff(backoff(
                2.0,
                Duration::from_secs(60),
                Jitter::Proportional(1.5),
            )),
            ..base()
        },
        "open_duration.jitter",
        "got 1.5",
    );
    refused(
        CircuitBreakerConfig {
            half_open: HalfOpenPolicy::Consecutive { successes: 0 },
            ..base()
        },
        "half_open.successes",
        "got 0",
    );
    refused(
        CircuitBreakerConfig {
            half_open: HalfOpenPolicy::Permits {
                calls: 3,
                failure_rate_threshold: 2.0,
            },
            ..base()
        },
        "half_open.failure_rate_threshold",
        "got 2",
    );
    refused(
        CircuitBreakerConfig {
            max_half_open_duration: Some(Duration::ZERO),
            ..base()
        },
        "max_half_open_duration",
        "got 0s",
    );
    refused(
        CircuitBreakerConfig {
            name: String::new(),
            ..base()
        },
        "name",
        "must not be empty",
    );
    refused(
        CircuitBreakerConfig {
            expected_calls_per_second: Some(-1.0),
            ..base()
        },
        "expected_calls_per_second",
        "positive",
    );
}

#[test]
fn adaptive_features_refuse_contradictions() {
    use tripline::breaker::{Cooldown, SlowCallBaseline, WarmUp, WarmUpMode};
    let ramp = |steps: Vec<f64>| CircuitBreakerConfig {
        half_open: HalfOpenPolicy::Ramp {
            steps,
            step_duration: Duration::from_secs(1),
            failure_rate_threshold: 0.2,
            minimum_calls_per_step: 1,
        },
        ..base()
    };
    refused(
        ramp(vec![0.1, 0.05, 1.0]),
        "half_open.steps",
        "must increase strictly, but step 1 (0.05) is not above step 0 (0.1)",
    );
    refused(ramp(vec![0.1, 0.5]), "half_open.steps", "must end at 1.0");
    refused(ramp(vec![]), "half_open.steps", "1 to 32");
    refused(ramp(vec![-0.1, 1.0]), "half_open.steps", "(0, 1]");
    refused(
        CircuitBreakerConfig {
            cooldown: Some(Cooldown {
                duration: Duration::from_secs(30),
                failure_rate_threshold: 0.8,
            }),
            ..base()
        },
        "cooldown.failure_rate_threshold",
        "must not be looser than failure_rate_threshold (0.5), got 0.8",
    );
    refused(
        CircuitBreakerConfig {
            warm_up: Some(WarmUp {
                duration: Duration::ZERO,
                mode: WarmUpMode::NoTrip,
            }),
            ..base()
        },
        "warm_up.duration",
        "got 0s",
    );
    let baseline = SlowCallBaseline {
        baseline_quantile: 0.99,
        factor: 3.0,
        floor: Duration::from_millis(50),
        ceiling: Duration::from_secs(2),
        max_step: 0.1,
        min_samples: 100,
    };
    refused(
        CircuitBreakerConfig {
            slow_call: Some(baseline),
            slow_call_duration: Some(Duration::from_secs(1)),
            ..base()
        },
        "slow_call",
        "cannot be combined with slow_call_duration",
    );
    refused(
        CircuitBreakerConfig {
            slow_call: Some(SlowCallBaseline {
                baseline_quantile: 1.0,
                ..baseline
            }),
            ..base()
        },
        "slow_call.baseline_quantile",
        "(0, 1)",
    );
    refused(
        CircuitBreakerConfig {
            slow_call: Some(SlowCallBaseline {
                ceiling: Duration::from_millis(10),
                ..baseline
            }),
            ..base()
        },
        "slow_call.ceiling",
        "must be above floor (50ms)",
    );
    refused(
        CircuitBreakerConfig {
            slow_probe_factor: 0.5,
            ..base()
        },
        "slow_probe_factor",
        "between 1 and 100",
    );
    refused(
        CircuitBreakerConfig {
            min_state_duration: Some(Duration::ZERO),
            ..base()
        },
        "min_state_duration",
        "got 0s",
    );
    let toml_ok: CircuitBreakerConfig = toml::from_str(
        r#"
        min_state_duration = "2s"
        cooldown = { duration = "30s", failure_rate_threshold = 0.3 }
        warm_up = { duration = "20s", mode = "relaxed" }
        slow_call = { baseline_quantile = 0.99, factor = 3.0, floor = "50ms", ceiling = "2s" }
        half_open = { policy = "ramp", steps = [0.01, 0.05, 0.1, 0.3, 1.0], step_duration = "1s", failure_rate_threshold = 0.2 }
        "#,
    )
    .unwrap();
    assert!(toml_ok.validate().is_ok());
    assert_eq!(toml_ok.slow_call.unwrap().max_step, 0.1, "defaults apply");
}

#[test]
fn soft_contradictions_are_warnings() {
    let warnings = |c: CircuitBreakerConfig| {
        CircuitBreaker::builder()
            .config(c)
            .build_with_warnings()
            .unwrap()
            .1
    };
    let w = warnings(CircuitBreakerConfig {
        minimum_calls: 5,
        half_open: HalfOpenPolicy::Permits {
            calls: 10,
            failure_rate_threshold: 0.2,
        },
        ..base()
    });
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].field, "half_open");
    assert!(
        w[0].to_string()
            .contains("10 half-open probes exceed minimum_calls = 5"),
        "{}",
        w[0]
    );

    let w = warnings(CircuitBreakerConfig {
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 20,
        ..base()
    });
    assert_eq!(w[0].field, "minimum_calls");
    assert!(w[0].message.contains("can never trip"));

    let time = WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 10,
    };
    let w = warnings(CircuitBreakerConfig {
        window: time,
        minimum_calls: 20,
        expected_calls_per_second: Some(1.0),
        ..base()
    });
    assert!(
        w[0].message
            .contains("~10 calls, fewer than minimum_calls = 20"),
        "{}",
        w[0]
    );
    let w = warnings(CircuitBreakerConfig {
        window: time,
        minimum_calls: 20,
        expected_calls_per_second: Some(3.0),
        ..base()
    });
    assert_eq!(w[0].field, "window.length");
    assert!(
        warnings(CircuitBreakerConfig {
            window: time,
            minimum_calls: 20,
            expected_calls_per_second: Some(100.0),
            ..base()
        })
        .is_empty()
    );
    assert!(warnings(base()).is_empty(), "defaults are clean");
}

#[test]
fn toml_vocabulary_round_trips_and_refuses_unknown_keys() {
    let config: CircuitBreakerConfig = toml::from_str(
        r#"
        name = "eta"
        window = { kind = "time", length = "30s", buckets = 15 }
        minimum_calls = 25
        failure_rate_threshold = 0.4
        slow_call_duration = "800ms"
        slow_call_rate_threshold = 0.6
        open_duration = { initial = "2s", multiplier = 3.0, max = "1m", jitter = "equal" }
        half_open = { policy = "consecutive", successes = 3 }
        max_half_open_duration = "45s"
        "#,
    )
    .unwrap();
    assert_eq!(
        config.window,
        WindowConfig::Time {
            length: Duration::from_secs(30),
            buckets: 15
        }
    );
    assert_eq!(config.slow_call_duration, Some(Duration::from_millis(800)));
    assert_eq!(
        config.open_duration,
        OpenDuration::Backoff(Backoff {
            initial: Duration::from_secs(2),
            multiplier: 3.0,
            max: Duration::from_secs(60),
            jitter: Jitter::Equal
        })
    );
    let text = toml::to_string(&config).unwrap();
    let back: CircuitBreakerConfig = toml::from_str(&text).unwrap();
    assert_eq!(back, config);
    let json: CircuitBreakerConfig =
        serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
    assert_eq!(json, config);

    for (doc, needle) in [
        (
            "minimum_calls = 5\nfailure_rate = 0.5",
            "unknown field `failure_rate`",
        ),
        (
            "window = { kind = \"count\", size = 10, length = \"1s\" }",
            "unknown field `length`",
        ),
        (
            "window = { kind = \"sliding\", size = 10 }",
            "unknown variant `sliding`",
        ),
        (
            "half_open = { policy = \"permits\", calls = 3 }",
            "missing field `failure_rate_threshold`",
        ),
        ("open_duration = \"5 parsecs\"", "is not a duration"),
        ("open_duration = \"-5s\"", "cannot be negative"),
        ("slow_call_duration = \"-5s\"", "cannot be negative"),
        (
            "open_duration = { initial = \"1s\", max = \"2s\", jitter = \"wild\" }",
            "wild",
        ),
        ("minimum_calls = -3", "minimum_calls"),
    ] {
        let err = toml::from_str::<CircuitBreakerConfig>(doc)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{doc:?}: {err}");
    }
}

#[test]
fn stripes_must_be_a_power_of_two() {
    for bad in [0usize, 3, 128] {
        let err = CircuitBreaker::builder().stripes(bad).build().unwrap_err();
        assert_eq!(err.field, "stripes");
        assert!(
            err.to_string().contains("power of two from 1 to 64"),
            "{err}"
        );
    }
    let one = CircuitBreaker::builder().stripes(1).build().unwrap();
    let four = CircuitBreaker::builder().stripes(4).build().unwrap();
    assert!(one.memory_footprint() < four.memory_footprint());
}
