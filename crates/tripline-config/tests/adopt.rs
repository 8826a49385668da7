//! Breakers their owner rebuilds while the applier runs (a proxy's
//! reload): pushed parameters outlive the rebuild, and a shadow-free
//! applier is cheap to ask.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::time::Duration;

use common::doc;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock, Outcome, State};
use tripline_config::{Applier, AuditAction, Origin};

fn origin() -> Origin {
    Origin::new("etcd", Some("3".into()))
}

fn owned(name: &str, minimum_calls: u32, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: name.to_owned(),
            minimum_calls,
            ..CircuitBreakerConfig::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn a_rebuilt_breaker_is_given_the_pushed_config_and_managed_from_then_on() {
    let clock = ManualClock::new();
    let first = owned("api", 50, &clock);
    let applier = Applier::builder()
        .clock(clock.clone())
        .manage(first.clone())
        .build();
    applier
        .apply(doc("", "api", 7, 0.3).as_bytes(), origin())
        .unwrap();
    assert_eq!(first.config().minimum_calls, 7);
    assert_eq!(applier.pushed_config("api").unwrap().minimum_calls, 7);
    assert!(applier.pushed_config("other").is_none());

    // The owner rebuilds it from its own config: adopting puts it on the pushed one.
    let rebuilt = owned("api", 50, &clock);
    applier.adopt_breaker(rebuilt.clone()).unwrap();
    assert_eq!(rebuilt.config().minimum_calls, 7);
    assert!(applier.breaker("api").unwrap().ptr_eq(&rebuilt));
    // Later documents reach the rebuilt one, not the dropped one.
    applier
        .apply(doc("", "api", 9, 0.3).as_bytes(), origin())
        .unwrap();
    assert_eq!(rebuilt.config().minimum_calls, 9);
    assert_eq!(first.config().minimum_calls, 7);

    // A name no document configured keeps its owner's config.
    let fresh = owned("fresh", 50, &clock);
    applier.adopt_breaker(fresh.clone()).unwrap();
    assert_eq!(fresh.config().minimum_calls, 50);
    applier.release("fresh");
    assert!(applier.breaker("fresh").is_none());
}

#[test]
fn an_override_survives_adoption_and_a_family_takes_the_pushed_template() {
    let clock = ManualClock::new();
    let applier = Applier::builder().clock(clock.clone()).build();
    let api = owned("api", 50, &clock);
    applier.adopt_breaker(api.clone()).unwrap();
    applier.force_open("api").unwrap();
    applier.adopt_breaker(api.clone()).unwrap();
    assert_eq!(applier.overrides(), vec!["api".to_owned()]);
    applier
        .apply(doc("", "api", 7, 0.3).as_bytes(), origin())
        .unwrap();
    assert_eq!(api.state(), State::ForcedOpen);

    applier
        .apply(doc("", "tenants", 12, 0.4).as_bytes(), origin())
        .unwrap();
    let registry = BreakerRegistry::<u32>::builder(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: "tenants".to_owned(),
            ..CircuitBreakerConfig::default()
        },
        ..RegistryConfig::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap();
    let before = registry.get(&1).unwrap();
    applier.adopt_family(registry.clone()).unwrap();
    assert_eq!(before.config().minimum_calls, 12);
    assert_eq!(registry.get(&2).unwrap().config().minimum_calls, 12);
}

#[test]
fn observing_without_a_shadow_is_a_no_op_and_says_so() {
    let clock = ManualClock::new();
    let applier = Applier::builder().clock(clock.clone()).build();
    applier
        .apply(doc("", "a", 10, 0.9).as_bytes(), origin())
        .unwrap();
    assert!(!applier.is_shadowing());
    applier.observe("a", Outcome::Failure, Duration::ZERO);

    let rollout = "rollout = { percent = 100, shadow = \"60s\", bake = \"5m\" }";
    applier
        .apply(doc(rollout, "a", 4, 0.3).as_bytes(), origin())
        .unwrap();
    assert!(applier.is_shadowing());
    for _ in 0..4 {
        applier.observe("a", Outcome::Failure, Duration::ZERO);
    }
    clock.advance(Duration::from_secs(61));
    applier.tick();
    assert!(!applier.is_shadowing(), "the shadow ended with its report");
    let report = applier
        .audit()
        .into_iter()
        .find_map(|r| match r.action {
            AuditAction::ShadowReport { would_trip, .. } => Some(would_trip),
            _ => None,
        })
        .unwrap();
    assert_eq!(report, vec![("a".to_owned(), 1)]);
}

/// `managed_status` tells an operator's view what the applier knows of a
/// name: whether it manages it, as one breaker or a family, which pushed
/// version (source, revision) configured it, and whether a force-open is
/// recorded — which later pushes keep.
#[test]
fn managed_status_names_the_pushed_version_and_the_override_of_each_name() {
    let clock = ManualClock::new();
    let api = owned("api", 50, &clock);
    let applier = Applier::builder()
        .clock(clock.clone())
        .manage(api.clone())
        .build();
    assert!(applier.managed_status("nobody").is_none(), "not managed");
    let before = applier.managed_status("api").unwrap();
    assert_eq!(before.name, "api");
    assert!(!before.family);
    assert_eq!(before.pushed, None, "runs its owner's config");
    assert!(!before.overridden);

    applier
        .apply(doc("", "api", 7, 0.3).as_bytes(), origin())
        .unwrap();
    applier
        .apply(
            doc("", "other", 7, 0.3).as_bytes(),
            Origin::new("file", None),
        )
        .unwrap();
    let pushed = applier.managed_status("api").unwrap().pushed.unwrap();
    assert_eq!(pushed.version, 1, "the version that document became");
    assert_eq!(pushed.source, "etcd");
    assert_eq!(pushed.revision.as_deref(), Some("3"));
    let other = applier.managed_status("other").unwrap().pushed.unwrap();
    assert_eq!((other.version, other.source.as_str()), (2, "file"));

    applier.force_open("api").unwrap();
    applier
        .apply(doc("", "api", 8, 0.3).as_bytes(), origin())
        .unwrap();
    let status = applier.managed_status("api").unwrap();
    assert!(status.overridden, "a push keeps the override");
    assert_eq!(status.pushed.unwrap().version, 3);
    assert_eq!(api.state(), State::ForcedOpen);
    applier.clear_override("api").unwrap();
    assert!(!applier.managed_status("api").unwrap().overridden);

    // A rollback configures the name again, as version 4 from `rollback`.
    applier.rollback(1).unwrap();
    let rolled = applier.managed_status("api").unwrap().pushed.unwrap();
    assert_eq!((rolled.version, rolled.source.as_str()), (4, "rollback"));
    assert_eq!(rolled.revision.as_deref(), Some("v1"));

    // A family is managed under its family name.
    let registry = BreakerRegistry::<u32>::builder(RegistryConfig {
        breaker: CircuitBreakerConfig {
            name: "tenants".into(),
            ..CircuitBreakerConfig::default()
        },
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap();
    applier.adopt_family(registry).unwrap();
    let family = applier.managed_status("tenants").unwrap();
    assert!(family.family);
    assert_eq!(family.pushed, None);
}
