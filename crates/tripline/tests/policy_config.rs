//! Bad input is refused with an error naming the policy and the field;
//! configs read from TOML with durations as "5s" and refuse unknown keys.

use std::time::Duration;

use tripline::PolicyConfigError;
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::hedge::{HedgeConfig, HedgeDelay};
use tripline::pipeline::Pipeline;
use tripline::retry::{Retry, RetryConfig};
use tripline::timeout::TimeoutConfig;

fn field(r: Result<impl std::fmt::Debug, PolicyConfigError>) -> (&'static str, &'static str) {
    let e = r.expect_err("refused");
    assert!(e.to_string().contains(e.field), "{e}");
    (e.policy, e.field)
}

#[test]
fn bad_input_names_the_field() {
    let budget = |ratio: f64, min: f64| {
        RetryBudget::try_new(RetryBudgetConfig {
            ratio,
            min_retries_per_second: min,
            ..Default::default()
        })
    };
    assert_eq!(field(budget(-0.1, 1.0)), ("retry_budget", "ratio"));
    assert_eq!(field(budget(f64::NAN, 1.0)), ("retry_budget", "ratio"));
    assert_eq!(field(budget(f64::INFINITY, 1.0)), ("retry_budget", "ratio"));
    assert_eq!(
        field(budget(0.1, -1.0)),
        ("retry_budget", "min_retries_per_second")
    );
    assert_eq!(
        field(budget(0.1, f64::NAN)),
        ("retry_budget", "min_retries_per_second")
    );
    // Found by `pipeline_robustness.rs`: 1e300 overflowed the budget's sums.
    assert_eq!(
        field(budget(0.1, 1e300)),
        ("retry_budget", "min_retries_per_second")
    );
    assert_eq!(
        field(RetryBudget::try_new(RetryBudgetConfig {
            window: Duration::from_millis(10),
            ..Default::default()
        })),
        ("retry_budget", "window")
    );
    assert_eq!(
        field(Retry::try_new(RetryConfig {
            max_attempts: 0,
            ..Default::default()
        })),
        ("retry", "max_attempts")
    );
    assert_eq!(
        field(
            Pipeline::builder()
                .timeouts(TimeoutConfig {
                    per_attempt: Some(Duration::from_secs(3)),
                    overall: Some(Duration::from_secs(2)),
                    ..Default::default()
                })
                .build()
        ),
        ("timeout", "per_attempt")
    );
    assert_eq!(
        field(
            Pipeline::builder()
                .timeouts(TimeoutConfig {
                    overall: Some(Duration::from_millis(5)),
                    min_remaining: Duration::from_millis(5),
                    ..Default::default()
                })
                .build()
        ),
        ("timeout", "min_remaining")
    );
    assert_eq!(
        field(Bulkhead::try_new(BulkheadConfig {
            max_concurrent: 0,
            ..Default::default()
        })),
        ("bulkhead", "max_concurrent")
    );
    let hedge = |c: HedgeConfig| c.validate();
    assert_eq!(
        field(hedge(HedgeConfig {
            delay: HedgeDelay::Quantile {
                quantile: 1.5,
                min_samples: 10,
                initial: Duration::from_millis(5)
            },
            ..Default::default()
        })),
        ("hedge", "delay.quantile")
    );
}

#[cfg(feature = "serde")]
#[test]
fn configs_read_from_toml_and_refuse_unknown_keys() {
    let b: RetryBudgetConfig =
        toml::from_str("window = \"30s\"\nbuckets = 30\nratio = 0.1\nmin_retries_per_second = 0.5")
            .unwrap();
    assert_eq!(b.window, Duration::from_secs(30));
    assert!(b.validate().is_ok());
    let t: TimeoutConfig =
        toml::from_str("per_attempt = \"200ms\"\noverall = \"1s\"\nmin_remaining = \"20ms\"")
            .unwrap();
    assert_eq!(t.per_attempt, Some(Duration::from_millis(200)));
    let bh: BulkheadConfig =
        toml::from_str("max_concurrent = 10\nmax_queue = 5\nmax_wait = \"50ms\"").unwrap();
    assert!(bh.validate().is_ok());
    let h: HedgeConfig = toml::from_str(
        "max_hedges = 2\ndelay = { kind = \"quantile\", quantile = 0.95, min_samples = 50, initial = \"30ms\" }",
    )
    .unwrap();
    assert!(h.validate().is_ok());
    assert!(toml::from_str::<RetryBudgetConfig>("ratio = 0.1\nretry_percent = 20").is_err());
    assert!(toml::from_str::<TimeoutConfig>("timeout = \"1s\"").is_err());
    assert!(toml::from_str::<BulkheadConfig>("max_threads = 4").is_err());
    assert!(
        toml::from_str::<HedgeConfig>("delay = { kind = \"fixed\", delay = \"5ms\", jitter = 1 }")
            .is_err()
    );
}
