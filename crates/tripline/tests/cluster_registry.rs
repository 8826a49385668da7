//! Endpoint breakers live in the keyed breaker registry: one per endpoint
//! id, created when an endpoint joins, removed when it leaves, fresh for a
//! new instance under a known id, and per-endpoint overrides from a
//! registry of the caller's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use tripline::clock::ManualClock;
use tripline::cluster::{Cluster, EndpointConfig, EndpointId};
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreakerConfig, State};

fn ids(c: &Cluster) -> Vec<String> {
    let mut v: Vec<String> = c
        .breakers()
        .metrics()
        .into_iter()
        .map(|(k, _)| k.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn endpoint_breakers_follow_the_endpoints_in_the_registry() {
    let clock = ManualClock::new();
    let c = Cluster::builder()
        .name("geo")
        .endpoints([
            EndpointConfig::new("a", "a:1"),
            EndpointConfig::new("b", "b:1"),
        ])
        .clock(clock)
        .build()
        .unwrap();
    assert_eq!(ids(&c), ["a", "b"]);
    assert_eq!(c.breakers().family(), "default");
    let a = c.endpoint("a").unwrap();
    assert!(
        c.breakers()
            .peek(&EndpointId::from("a"))
            .unwrap()
            .ptr_eq(a.breaker()),
        "the same breaker"
    );

    assert!(c.remove_endpoint("b"));
    assert_eq!(ids(&c), ["a"]);

    // `a` at a new address is a new instance: a fresh breaker, registered.
    a.breaker().force_open();
    c.set_endpoints(vec![EndpointConfig::new("a", "a:2")])
        .unwrap();
    let fresh = c.breakers().peek(&EndpointId::from("a")).unwrap();
    assert_eq!(fresh.state(), State::Closed);
    assert!(fresh.ptr_eq(c.endpoint("a").unwrap().breaker()));
    assert_eq!(c.breakers().len(), 1);
}

#[test]
fn a_registry_of_the_callers_gives_per_endpoint_overrides() {
    let clock = ManualClock::new();
    let registry = BreakerRegistry::<EndpointId>::builder(RegistryConfig {
        max_breakers: 100,
        overflow: OverflowPolicy::Reject,
        idle_ttl: None,
        breaker: CircuitBreakerConfig {
            name: "pay".into(),
            ..Default::default()
        },
    })
    .override_key(
        EndpointId::from("canary"),
        CircuitBreakerConfig {
            minimum_calls: 5,
            ..Default::default()
        },
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    let c = Cluster::builder()
        .endpoints([
            EndpointConfig::new("main", "m:1"),
            EndpointConfig::new("canary", "c:1"),
        ])
        .breaker_registry(registry.clone())
        .clock(clock)
        .build()
        .unwrap();
    assert_eq!(
        c.endpoint("canary")
            .unwrap()
            .breaker()
            .config()
            .minimum_calls,
        5
    );
    assert_eq!(
        c.endpoint("main").unwrap().breaker().config().minimum_calls,
        20
    );
    assert_eq!(c.endpoint("main").unwrap().breaker().name(), "pay:main");
    assert_eq!(registry.len(), 2, "the caller's registry holds them");
}

#[test]
fn a_full_registry_refuses_a_new_endpoint_and_changes_nothing() {
    let registry = BreakerRegistry::<EndpointId>::try_new(RegistryConfig {
        max_breakers: 1,
        overflow: OverflowPolicy::Reject,
        idle_ttl: None,
        ..Default::default()
    })
    .unwrap();
    let c = Cluster::builder()
        .endpoint(EndpointConfig::new("a", "a:1"))
        .breaker_registry(registry)
        .build()
        .unwrap();
    let err = c.add_endpoint(EndpointConfig::new("b", "b:1")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid cluster config: `breaker` for endpoint `b`: breaker registry is full \
         (max_breakers = 1): new keys are refused"
    );
    assert_eq!(c.len(), 1);
}
