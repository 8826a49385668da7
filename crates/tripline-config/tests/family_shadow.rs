//! A rollout's shadow judges a changed registry family key by key: each
//! member key seen gets a metrics-only twin of its own on the new rules,
//! as the live members judge their own key's traffic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::time::Duration;

use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock, Outcome, WindowConfig};
use tripline_config::{Applier, AuditAction, FamilyShadow, MAX_FAMILY_TWINS, Origin};

fn family(name: &str, clock: &ManualClock) -> BreakerRegistry<u32> {
    BreakerRegistry::builder(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: name.into(),
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 10,
            failure_rate_threshold: 0.9,
            ..Default::default()
        },
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap()
}

fn solo(clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "solo".into(),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Starts a 60 s shadow of stricter rules (4 calls, 50 %) for `names`.
fn shadow(applier: &Applier, names: &[&str]) {
    let tables: Vec<String> = names.iter().map(|n| common::breaker(n, 4, 0.5)).collect();
    let text = format!(
        "rollout = {{ percent = 100, shadow = \"60s\", bake = \"1m\" }}\n{}",
        tables.join("\n")
    );
    applier
        .apply(text.as_bytes(), Origin::new("api", None))
        .unwrap();
    assert!(applier.is_shadowing());
}

/// Ends the shadow and returns its report.
fn report(
    applier: &Applier,
    clock: &ManualClock,
) -> (Vec<(String, u64)>, Vec<String>, Vec<FamilyShadow>) {
    clock.advance(Duration::from_secs(61));
    applier.tick();
    applier
        .audit()
        .into_iter()
        .find_map(|r| match r.action {
            AuditAction::ShadowReport {
                would_trip,
                not_judged,
                families,
            } => Some((would_trip, not_judged, families)),
            _ => None,
        })
        .expect("a shadow report")
}

fn feed(applier: &Applier, family: &str, key: &str, outcome: Outcome, n: usize) {
    for _ in 0..n {
        applier.observe_member(family, key, outcome, Duration::ZERO);
    }
}

#[test]
fn each_key_of_a_family_is_judged_on_its_own_traffic() {
    let clock = ManualClock::new();
    let applier = Applier::builder()
        .clock(clock.clone())
        .manage(solo(&clock))
        .manage_family(family("tenants", &clock))
        .build();
    shadow(&applier, &["tenants", "solo"]);
    // One failing tenant among healthy ones: mixed into one twin the
    // family's failure rate (4 of 16 = 25 %) would stay under 50 %; judged
    // per key, acme's own breaker would trip.
    feed(&applier, "tenants", "acme", Outcome::Failure, 4);
    feed(&applier, "tenants", "globex", Outcome::Success, 6);
    feed(&applier, "tenants", "initech", Outcome::Success, 6);
    for _ in 0..4 {
        applier.observe("solo", Outcome::Failure, Duration::ZERO);
        // A family's name is not a single breaker's: a no-op, not an error.
        applier.observe("tenants", Outcome::Failure, Duration::ZERO);
    }

    let (would_trip, not_judged, families) = report(&applier, &clock);
    assert_eq!(would_trip, [("solo".to_owned(), 1)]);
    assert!(
        not_judged.is_empty(),
        "the family saw traffic: {not_judged:?}"
    );
    assert_eq!(
        families,
        [FamilyShadow {
            family: "tenants".into(),
            keys_judged: 3,
            keys_would_trip: 1,
            would_trip: 1,
            top_keys: vec![("acme".into(), 1)],
            unjudged_outcomes: 0,
        }]
    );
    // The shadow changed nothing live: the live members still run the
    // lax rules until the canary step applies the document.
    assert!(!applier.is_shadowing());
}

#[test]
fn a_changed_family_no_outcome_reached_is_named_as_not_judged() {
    let clock = ManualClock::new();
    let applier = Applier::builder()
        .clock(clock.clone())
        .manage_family(family("tenants", &clock))
        .manage_family(family("endpoints", &clock))
        .build();
    shadow(&applier, &["tenants", "endpoints"]);
    feed(&applier, "tenants", "acme", Outcome::Success, 5);

    let (would_trip, not_judged, families) = report(&applier, &clock);
    assert!(would_trip.is_empty());
    assert_eq!(not_judged, ["endpoints"]);
    assert_eq!(families.len(), 1);
    assert_eq!(families[0].keys_judged, 1);
    assert_eq!(families[0].keys_would_trip, 0);
}

#[test]
fn twins_per_family_are_bounded_and_the_excess_is_counted() {
    let clock = ManualClock::new();
    let applier = Applier::builder()
        .clock(clock.clone())
        .manage_family(family("tenants", &clock))
        .build();
    shadow(&applier, &["tenants"]);
    for key in 0..MAX_FAMILY_TWINS + 5 {
        feed(&applier, "tenants", &key.to_string(), Outcome::Failure, 1);
    }
    // Keys already judged keep being judged when the table is full.
    feed(&applier, "tenants", "0", Outcome::Failure, 3);

    let (_, _, families) = report(&applier, &clock);
    let tenants = &families[0];
    assert_eq!(tenants.keys_judged, MAX_FAMILY_TWINS as u64);
    assert_eq!(tenants.unjudged_outcomes, 5);
    assert_eq!(tenants.keys_would_trip, 1, "only key 0 reached 4 calls");
    assert_eq!(tenants.top_keys, [("0".to_owned(), 1)]);
}
