//! Registry configuration: the shared vocabulary (TOML/JSON, durations as
//! `"10m"`, unknown keys refused), impossible values refused naming the
//! field (nested breaker fields dotted), soft ones returned as warnings.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreakerConfig, WindowConfig};

fn refused(config: RegistryConfig, field: &str, needle: &str) {
    let err = BreakerRegistry::<String>::try_new(config).expect_err(field);
    assert_eq!(err.field, field, "{err}");
    let text = err.to_string();
    assert!(text.contains(field) && text.contains(needle), "{text}");
}

#[test]
fn defaults_are_valid() {
    let c = RegistryConfig::default();
    assert_eq!(c.max_breakers, 10_000);
    assert_eq!(c.overflow, OverflowPolicy::SharedOverflow);
    assert_eq!(c.idle_ttl, Some(Duration::from_secs(600)));
    assert!(c.validate().unwrap().is_empty());
}

#[test]
fn impossible_values_are_refused_naming_the_field() {
    refused(
        RegistryConfig {
            max_breakers: 0,
            ..Default::default()
        },
        "max_breakers",
        "must be at least 1, got 0",
    );
    refused(
        RegistryConfig {
            idle_ttl: Some(Duration::ZERO),
            ..Default::default()
        },
        "idle_ttl",
        "at least 1s",
    );
    refused(
        RegistryConfig {
            idle_ttl: Some(Duration::from_millis(500)),
            ..Default::default()
        },
        "idle_ttl",
        "got 500ms",
    );
    refused(
        RegistryConfig {
            breaker: CircuitBreakerConfig {
                minimum_calls: 0,
                ..Default::default()
            },
            ..Default::default()
        },
        "breaker.minimum_calls",
        "got 0",
    );
    refused(
        RegistryConfig {
            breaker: CircuitBreakerConfig {
                name: String::new(),
                ..Default::default()
            },
            ..Default::default()
        },
        "breaker.name",
        "must not be empty",
    );
    // A per-key override in the builder is checked up front, naming the key.
    let err = BreakerRegistry::<String>::builder(RegistryConfig::default())
        .override_key(
            "payments".to_owned(),
            CircuitBreakerConfig {
                failure_rate_threshold: 0.0,
                ..Default::default()
            },
        )
        .build()
        .unwrap_err();
    assert_eq!(
        err.field, "overrides[default:payments].failure_rate_threshold",
        "{err}"
    );
    // The edges are accepted.
    for ok in [
        RegistryConfig {
            max_breakers: 1,
            ..Default::default()
        },
        RegistryConfig {
            idle_ttl: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        RegistryConfig {
            idle_ttl: None,
            ..Default::default()
        },
    ] {
        BreakerRegistry::<u64>::try_new(ok.clone()).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
}

#[test]
fn soft_contradictions_are_warnings_with_dotted_fields() {
    let (_, warnings) = BreakerRegistry::<u64>::builder(RegistryConfig {
        idle_ttl: Some(Duration::from_secs(5)),
        breaker: CircuitBreakerConfig {
            window: WindowConfig::Time {
                length: Duration::from_secs(30),
                buckets: 10,
            },
            minimum_calls: 2, // fewer than the 5 default half-open probes
            ..Default::default()
        },
        ..Default::default()
    })
    .build_with_warnings()
    .unwrap();
    let fields: Vec<&str> = warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(fields, ["breaker.half_open", "idle_ttl"], "{warnings:?}");
    assert!(
        warnings[1].message.contains("shorter than the 30s window"),
        "{}",
        warnings[1]
    );
}

#[test]
fn toml_and_json_use_the_shared_vocabulary() {
    let c: RegistryConfig = toml::from_str(
        r#"
        max_breakers = 20000
        overflow = "reject"
        idle_ttl = "15m"

        [breaker]
        name = "rpc"
        window = { kind = "time", length = "10s", buckets = 10 }
        minimum_calls = 20
        "#,
    )
    .unwrap();
    assert_eq!(c.max_breakers, 20_000);
    assert_eq!(c.overflow, OverflowPolicy::Reject);
    assert_eq!(c.idle_ttl, Some(Duration::from_secs(900)));
    assert_eq!(c.breaker.name, "rpc");
    let r = BreakerRegistry::<String>::try_new(c.clone()).unwrap();
    assert_eq!(r.family(), "rpc");
    assert_eq!(r.family_config(), c.breaker);

    let shared: RegistryConfig = toml::from_str(r#"overflow = "shared_overflow""#).unwrap();
    assert_eq!(shared, RegistryConfig::default());

    let json = serde_json::to_string(&c).unwrap();
    assert!(
        json.contains(r#""idle_ttl":"15m""#) && json.contains(r#""overflow":"reject""#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<RegistryConfig>(&json).unwrap(), c);

    // No idle TTL: the key is absent or null.
    let never: RegistryConfig = serde_json::from_str(r#"{"idle_ttl": null}"#).unwrap();
    assert_eq!(never.idle_ttl, None);

    for bad in [
        "max_breaker = 10",            // misspelt key
        "overflow = \"drop\"",         // unknown policy
        "max_breakers = -1",           // not a count
        "[breaker]\nminimum_call = 3", // misspelt nested key
    ] {
        let err = toml::from_str::<RegistryConfig>(bad).expect_err(bad);
        let text = err.to_string();
        assert!(
            ["max_breaker", "drop", "max_breakers", "minimum_call"]
                .iter()
                .any(|n| text.contains(n)),
            "{bad}: {text}"
        );
    }
    // Parsed but impossible: refused when building.
    let zero: RegistryConfig = toml::from_str("max_breakers = 0").unwrap();
    assert_eq!(
        BreakerRegistry::<u64>::try_new(zero).unwrap_err().field,
        "max_breakers"
    );
}
