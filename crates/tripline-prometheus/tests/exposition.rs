//! What a scrape says: every documented family and nothing else, labels
//! escaped, constant labels everywhere, detail levels, and no duplicate
//! series whatever is registered.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/fixture.rs"]
mod fixture;

use std::collections::BTreeSet;

use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig};
use tripline_prometheus::http::Format;
use tripline_prometheus::{Detail, ExportError, Exporter, SourceKind};

fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

fn series<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(family))
        .filter(|l| l[family.len()..].starts_with(['{', ' ']))
        .collect()
}

fn breaker(name: &str) -> CircuitBreaker {
    CircuitBreaker::try_new(fixture::breaker_config(name)).unwrap()
}

#[test]
fn every_documented_family_is_written_and_nothing_else() {
    let f = fixture::everything(Exporter::builder().compat(true).build().unwrap());
    let text = f.exporter.render(Format::PrometheusText).unwrap();
    let written = families(&text);
    let documented: BTreeSet<String> = f.exporter.metric_names().into_iter().collect();
    assert_eq!(written, documented);
    // OpenMetrics writes counters without `_total` in TYPE and ends in EOF.
    let om = f.exporter.render(Format::OpenMetrics).unwrap();
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE tripline_breaker_calls counter\n"));
    assert!(om.contains(r#"tripline_breaker_calls_total{name="payments",outcome="rejected"} 2"#));
}

#[test]
fn label_values_are_escaped_never_dropped() {
    let f = fixture::everything(Exporter::default());
    let text = f.exporter.render(Format::PrometheusText).unwrap();
    assert!(
        text.contains(r#"tripline_breaker_state_code{name="tenant:c\"quoted\\\nnewline"} 0"#),
        "{text}"
    );
}

#[test]
fn constant_labels_reach_every_series() {
    let f = fixture::everything(
        Exporter::builder()
            .label("service", "checkout")
            .compat(true)
            .build()
            .unwrap(),
    );
    let text = f.exporter.render(Format::PrometheusText).unwrap();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.contains(r#"service="checkout""#), "{line}");
    }
}

#[test]
fn names_prometheus_would_reject_are_refused_by_name() {
    let cases: [(Result<Exporter, ExportError>, &str); 4] = [
        (
            Exporter::builder().prefix("tripline-svc").build(),
            "tripline-svc",
        ),
        (
            Exporter::builder().label("zone.name", "a").build(),
            "zone.name",
        ),
        (Exporter::builder().label("name", "a").build(), "`name`"),
        (
            Exporter::builder().duration_buckets([0.5, 0.1]).build(),
            "increasing",
        ),
    ];
    for (result, named) in cases {
        let err = result.unwrap_err().to_string();
        assert!(err.contains(named), "{err}");
    }
}

#[test]
fn registering_twice_is_an_error_not_a_duplicate_series() {
    let exporter = Exporter::default();
    let b = breaker("orders");
    exporter.register_breaker(&b, Detail::Full).unwrap();
    let again = exporter
        .register_breaker(&b, Detail::Essential)
        .unwrap_err();
    assert_eq!(
        again,
        ExportError::AlreadyRegistered {
            kind: SourceKind::Breaker,
            name: "orders".into()
        }
    );
    assert!(
        exporter
            .register_breaker(&breaker("orders"), Detail::Full)
            .is_err()
    );

    let registry = BreakerRegistry::<String>::try_new(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: "rpc".into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    registry.get(&"search".to_string()).unwrap();
    exporter
        .register_registry(&registry, Detail::Essential)
        .unwrap();
    assert!(exporter.register_registry(&registry, Detail::Full).is_err());
    let clash = exporter.register_breaker(&breaker("rpc:search"), Detail::Full);
    assert!(clash.unwrap_err().to_string().contains("rpc:search"));
    let text = exporter.render(Format::PrometheusText).unwrap();
    assert_eq!(series(&text, "tripline_breaker_state_code").len(), 2);
}

#[test]
fn a_name_exported_twice_at_scrape_time_is_written_once() {
    let exporter = Exporter::default();
    exporter
        .register_breaker(&breaker("rpc:late"), Detail::Full)
        .unwrap();
    let registry = BreakerRegistry::<String>::try_new(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: "rpc".into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    exporter
        .register_registry(&registry, Detail::Essential)
        .unwrap();
    registry.get(&"late".to_string()).unwrap(); // made after registration
    let text = exporter.render(Format::PrometheusText).unwrap();
    assert_eq!(series(&text, "tripline_breaker_state_code").len(), 1);
    assert!(text.contains("tripline_exporter_skipped_duplicates 1"));
}

#[test]
fn registry_breakers_appear_and_disappear_with_it() {
    let exporter = Exporter::default();
    let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    exporter
        .register_registry(&registry, Detail::Essential)
        .unwrap();
    let code = |e: &Exporter| {
        let text = e.render(Format::PrometheusText).unwrap();
        series(&text, "tripline_breaker_state_code").len()
    };
    assert_eq!(code(&exporter), 0);
    registry.get(&1).unwrap().force_open();
    registry.get(&2).unwrap();
    assert_eq!(code(&exporter), 2);
    let text = exporter.render(Format::PrometheusText).unwrap();
    assert!(
        text.contains(r#"{name="default:1",from="closed",to="forced_open",reason="forced"} 1"#)
    );
    // Essential: three outcomes, no Full-only family.
    assert_eq!(series(&text, "tripline_breaker_calls_total").len(), 6);
    assert!(series(&text, "tripline_breaker_state").is_empty());
    registry.remove(&1);
    let text = exporter.render(Format::PrometheusText).unwrap();
    assert_eq!(series(&text, "tripline_breaker_state_code").len(), 1);
    assert!(!text.contains("default:1"), "{text}");
    assert!(exporter.unregister(SourceKind::Registry, "default"));
    assert!(!exporter.unregister(SourceKind::Registry, "default"));
    assert_eq!(code(&exporter), 0);
}

#[test]
fn aggregate_detail_writes_only_the_registry_counts() {
    let exporter = Exporter::default();
    let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    for k in 0..10 {
        registry.get(&k).unwrap();
    }
    exporter
        .register_registry(&registry, Detail::Aggregate)
        .unwrap();
    let text = exporter.render(Format::PrometheusText).unwrap();
    assert!(!text.contains("tripline_breaker_"), "{text}");
    assert!(text.contains(r#"tripline_registry_breakers{family="default",state="closed"} 10"#));
}

#[test]
fn the_global_exporter_is_one_per_process() {
    let b = breaker("global-test");
    tripline_prometheus::global()
        .register_breaker(&b, Detail::Full)
        .unwrap();
    let text = tripline_prometheus::global()
        .render(Format::PrometheusText)
        .unwrap();
    assert!(text.contains(r#"tripline_breaker_state_code{name="global-test"} 0"#));
    assert!(tripline_prometheus::global().unregister(SourceKind::Breaker, "global-test"));
}
