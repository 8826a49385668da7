//! Throttle configuration: the shared vocabulary (TOML/JSON, durations as
//! `"10s"`, unknown keys refused) and every impossible value refused with
//! an error naming the field.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, ThrottleWindow};

fn refused(config: AdaptiveThrottleConfig, field: &str, needle: &str) {
    let err = AdaptiveThrottle::try_new(config).expect_err(field);
    assert_eq!(err.field, field, "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("invalid throttle config")
            && text.contains(field)
            && text.contains(needle),
        "{text}"
    );
}

fn base() -> AdaptiveThrottleConfig {
    AdaptiveThrottleConfig::default()
}

fn window(length: Duration, buckets: u32) -> AdaptiveThrottleConfig {
    AdaptiveThrottleConfig {
        window: ThrottleWindow { length, buckets },
        ..base()
    }
}

#[test]
fn defaults_are_valid_and_documented() {
    let c = AdaptiveThrottleConfig::default();
    assert!(c.validate().is_ok());
    assert_eq!(c.k, 2.0);
    assert_eq!(c.max_rejection_probability, 0.9);
    assert_eq!(c.minimum_requests_per_second, 1.0);
    assert_eq!(c.window.length, Duration::from_secs(10));
    assert_eq!(c.window.buckets, 10);
}

#[test]
fn impossible_values_are_refused_naming_the_field() {
    refused(
        AdaptiveThrottleConfig {
            name: String::new(),
            ..base()
        },
        "name",
        "must not be empty",
    );
    refused(
        AdaptiveThrottleConfig { k: 0.5, ..base() },
        "k",
        "≥ 1, got 0.5",
    );
    refused(
        AdaptiveThrottleConfig {
            k: f64::NAN,
            ..base()
        },
        "k",
        "got NaN",
    );
    refused(
        AdaptiveThrottleConfig {
            k: f64::INFINITY,
            ..base()
        },
        "k",
        "finite",
    );
    refused(
        AdaptiveThrottleConfig {
            max_rejection_probability: 1.5,
            ..base()
        },
        "max_rejection_probability",
        "[0, 1], got 1.5",
    );
    refused(
        AdaptiveThrottleConfig {
            max_rejection_probability: -0.1,
            ..base()
        },
        "max_rejection_probability",
        "got -0.1",
    );
    refused(
        AdaptiveThrottleConfig {
            max_rejection_probability: f64::NAN,
            ..base()
        },
        "max_rejection_probability",
        "got NaN",
    );
    refused(
        AdaptiveThrottleConfig {
            minimum_requests_per_second: -1.0,
            ..base()
        },
        "minimum_requests_per_second",
        "≥ 0, got -1",
    );
    refused(
        AdaptiveThrottleConfig {
            minimum_requests_per_second: f64::INFINITY,
            ..base()
        },
        "minimum_requests_per_second",
        "finite",
    );
    refused(
        window(Duration::from_millis(500), 10),
        "window.length",
        "got 500ms",
    );
    refused(
        window(Duration::from_secs(7200), 10),
        "window.length",
        "got 2h",
    );
    refused(
        window(Duration::from_secs(10), 0),
        "window.buckets",
        "got 0",
    );
    refused(
        window(Duration::from_secs(10), 121),
        "window.buckets",
        "between 1 and 120",
    );
    // The edges are accepted.
    for ok in [
        AdaptiveThrottleConfig {
            k: 1.0,
            max_rejection_probability: 0.0,
            minimum_requests_per_second: 0.0,
            ..base()
        },
        AdaptiveThrottleConfig {
            max_rejection_probability: 1.0,
            ..base()
        },
        window(Duration::from_secs(1), 1),
        window(Duration::from_secs(3600), 120),
    ] {
        AdaptiveThrottle::try_new(ok.clone()).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
}

#[test]
fn toml_and_json_use_the_shared_vocabulary() {
    let c: AdaptiveThrottleConfig = toml::from_str(
        r#"
        name = "search"
        window = { length = "2m", buckets = 12 }
        k = 1.5
        max_rejection_probability = 0.8
        minimum_requests_per_second = 5
    "#,
    )
    .unwrap();
    assert_eq!(c.name, "search");
    assert_eq!(c.window.length, Duration::from_secs(120));
    assert_eq!(c.window.buckets, 12);
    assert_eq!(c.k, 1.5);
    assert_eq!(c.max_rejection_probability, 0.8);
    assert_eq!(c.minimum_requests_per_second, 5.0);

    // Omitted keys take the defaults.
    let partial: AdaptiveThrottleConfig = toml::from_str("k = 1.1").unwrap();
    assert_eq!(partial, AdaptiveThrottleConfig { k: 1.1, ..base() });

    // Round trip through JSON, durations as text.
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains(r#""length":"2m""#), "{json}");
    assert_eq!(
        serde_json::from_str::<AdaptiveThrottleConfig>(&json).unwrap(),
        c
    );

    // Unknown keys are refused, naming them.
    let err = toml::from_str::<AdaptiveThrottleConfig>("multiplier = 2.0").unwrap_err();
    assert!(err.to_string().contains("multiplier"), "{err}");
    let err = toml::from_str::<AdaptiveThrottleConfig>(
        "window = { length = \"10s\", buckets = 10, kind = \"time\" }",
    )
    .unwrap_err();
    assert!(err.to_string().contains("kind"), "{err}");
    // A parsed but impossible value is still refused at build time.
    let bad: AdaptiveThrottleConfig = toml::from_str("k = 0.9").unwrap();
    assert_eq!(AdaptiveThrottle::try_new(bad).unwrap_err().field, "k");
}
