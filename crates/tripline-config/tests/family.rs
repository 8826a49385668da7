//! A registry family managed by the applier: one document table named
//! like the family reconfigures every breaker on its template, state kept.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::time::Duration;

use common::doc;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreakerConfig, ManualClock, State, WindowConfig};
use tripline_config::{Applier, ApplyError, Origin, OverrideHolder};

fn tenants() -> BreakerRegistry<u32> {
    BreakerRegistry::builder(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: "tenants".into(),
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 4,
            ..Default::default()
        },
        ..Default::default()
    })
    .clock(ManualClock::new())
    .build()
    .unwrap()
}

#[test]
fn a_document_reconfigures_a_whole_family_keeping_each_breakers_state() {
    let registry = tenants();
    let applier = Applier::builder().manage_family(registry.clone()).build();
    let tripped = registry.get(&1).unwrap();
    for _ in 0..4 {
        let _ = tripped.call(|| Err::<(), _>("down"));
    }
    assert_eq!(tripped.state(), State::Open);

    let record = applier
        .apply(
            doc("", "tenants", 8, 0.5).as_bytes(),
            Origin::new("api", None),
        )
        .unwrap();
    let fields: Vec<_> = record.changes.iter().map(|c| c.field.as_str()).collect();
    assert!(fields.contains(&"minimum_calls"), "{fields:?}");
    assert_eq!(tripped.config().minimum_calls, 8);
    assert_eq!(tripped.state(), State::Open, "state kept");
    assert_eq!(
        registry.get(&2).unwrap().config().minimum_calls,
        8,
        "new keys too"
    );

    // Refused whole: the family keeps its last good template.
    assert!(
        applier
            .apply(
                doc("", "tenants", 0, 0.5).as_bytes(),
                Origin::new("api", None)
            )
            .is_err()
    );
    assert_eq!(registry.family_config().minimum_calls, 8);

    applier
        .apply(
            doc("", "tenants", 12, 0.5).as_bytes(),
            Origin::new("api", None),
        )
        .unwrap();
    applier.rollback(1).unwrap();
    assert_eq!(tripped.config().minimum_calls, 8);

    // The family's breakers are the registry's to hand out.
    assert!(applier.breaker("tenants").is_none());
    assert!(matches!(
        applier.force_open("nobody"),
        Err(ApplyError::UnknownBreaker(_))
    ));
    assert_eq!(applier.status().sample.trips, 1);
}

#[test]
fn a_local_override_of_a_family_holds_every_breaker_present_and_future() {
    let registry = tenants();
    let applier = Applier::builder().manage_family(registry.clone()).build();
    let one = registry.get(&1).unwrap();
    applier.force_open("tenants").unwrap();
    assert_eq!(applier.overrides(), ["tenants"]);
    assert_eq!(one.state(), State::ForcedOpen);
    assert_eq!(
        registry.get(&2).unwrap().state(),
        State::ForcedOpen,
        "a new key"
    );
    // A pushed document changes the template, never the hold.
    applier
        .apply(
            doc("", "tenants", 8, 0.5).as_bytes(),
            Origin::new("api", None),
        )
        .unwrap();
    assert_eq!(one.state(), State::ForcedOpen);
    applier.clear_override("tenants").unwrap();
    assert_eq!(one.state(), State::Closed);
    assert_eq!(registry.get(&3).unwrap().state(), State::Closed);
    assert!(applier.overrides().is_empty());
}

#[test]
fn a_fleet_override_of_a_family_holds_it_until_its_until() {
    let clock = ManualClock::new();
    let epoch = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let registry = tenants();
    let applier = Applier::builder()
        .clock(clock.clone())
        .wall_epoch(epoch)
        .manage_family(registry.clone())
        .build();
    let one = registry.get(&1).unwrap();
    let until = humantime::format_rfc3339_seconds(epoch + Duration::from_secs(60));
    let document = format!(
        "[[breaker]]\nname = \"tenants\"\nminimum_calls = 4\n\n[[override]]\nbreaker = \"tenants\"\n\
         state = \"disabled\"\nuntil = \"{until}\"\nreason = \"noisy tenant probe\"\n"
    );
    applier
        .apply(document.as_bytes(), Origin::new("etcd", None))
        .unwrap();
    assert_eq!(one.state(), State::Disabled);
    assert_eq!(registry.get(&2).unwrap().state(), State::Disabled);
    let status = applier.managed_status("tenants").unwrap();
    assert_eq!(status.holds, Some(OverrideHolder::Fleet));
    assert!(status.family);
    clock.advance(Duration::from_secs(60));
    applier.tick();
    assert_eq!(registry.family_hold(), None);
    assert_eq!(one.state(), State::Closed, "ended at until");
    assert_eq!(registry.get(&3).unwrap().state(), State::Closed);
}
