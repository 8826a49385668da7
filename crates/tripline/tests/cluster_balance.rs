//! Endpoint selection: the four balancers, breaker admission per endpoint,
//! health and panic mode, runtime changes of the endpoint set, and the
//! invariant that nothing unroutable is chosen outside panic mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tripline::breaker::OpenDuration;
use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, EndpointOutcome};
use tripline::{CircuitBreakerConfig, State, WindowConfig};

fn breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "t".into(),
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 3,
        failure_rate_threshold: 0.5,
        open_duration: OpenDuration::Fixed(Duration::from_secs(5)),
        half_open: tripline::HalfOpenPolicy::Consecutive { successes: 1 },
        ..Default::default()
    }
}

fn cluster_with(n: usize, balancer: Balancer, clock: &ManualClock, panic: u32) -> Cluster {
    Cluster::builder()
        .name("t")
        .balancer(balancer)
        .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("10.0.0.{i}:80"))))
        .breaker(breaker())
        .panic_threshold_percent(panic)
        .clock(clock.clone())
        .seed(42)
        .build()
        .unwrap()
}

fn cluster(n: usize, balancer: Balancer, clock: &ManualClock) -> Cluster {
    cluster_with(n, balancer, clock, 50)
}

/// Selects, records `outcome`, returns the endpoint's id.
fn pick(c: &Cluster, outcome: EndpointOutcome) -> String {
    let lease = c.select().unwrap();
    let id = lease.endpoint().id().to_string();
    lease.record(outcome);
    id
}

#[test]
fn round_robin_takes_each_endpoint_in_turn() {
    let clock = ManualClock::new();
    let c = cluster(3, Balancer::RoundRobin, &clock);
    let order: Vec<String> = (0..6).map(|_| pick(&c, EndpointOutcome::Success)).collect();
    assert_eq!(order, ["e0", "e1", "e2", "e0", "e1", "e2"]);
}

#[test]
fn weighted_round_robin_gives_turns_by_weight_spread_out() {
    let clock = ManualClock::new();
    let build = |weights: &[(&str, u32)]| {
        let mut builder = Cluster::builder()
            .balancer(Balancer::WeightedRoundRobin)
            .breaker(breaker())
            .clock(clock.clone());
        for (id, w) in weights {
            builder = builder.endpoint(EndpointConfig::new(*id, *id).weight(*w));
        }
        builder.build().unwrap()
    };
    // nginx's example: 5, 1, 1 go a a b a c a a, not a a a a a b c.
    let c = build(&[("a", 5), ("b", 1), ("c", 1)]);
    let turns: Vec<String> = (0..14)
        .map(|_| pick(&c, EndpointOutcome::Success))
        .collect();
    assert_eq!(turns, ["a", "a", "b", "a", "c", "a", "a"].repeat(2));
    // Weights beyond the schedule's size keep their proportions.
    let c = build(&[("heavy", 3000), ("light", 1000)]);
    let mut counts = HashMap::new();
    for _ in 0..4000 {
        *counts
            .entry(pick(&c, EndpointOutcome::Success))
            .or_insert(0) += 1;
    }
    assert_eq!(
        (counts["heavy"], counts["light"]),
        (3000, 1000),
        "{counts:?}"
    );
    // Equal weights are plain round robin.
    let c = build(&[("x", 7), ("y", 7)]);
    let turns: Vec<String> = (0..4).map(|_| pick(&c, EndpointOutcome::Success)).collect();
    assert_eq!(turns, ["x", "y", "x", "y"]);
}

#[test]
fn weighted_random_follows_the_weights_and_is_reproducible() {
    let clock = ManualClock::new();
    let build = || {
        Cluster::builder()
            .balancer(Balancer::WeightedRandom)
            .endpoint(EndpointConfig::new("heavy", "h").weight(3))
            .endpoint(EndpointConfig::new("light", "l").weight(1))
            .clock(clock.clone())
            .seed(7)
            .build()
            .unwrap()
    };
    let (a, b) = (build(), build());
    let mut counts = HashMap::new();
    for _ in 0..8000 {
        let x = pick(&a, EndpointOutcome::Success);
        assert_eq!(
            x,
            pick(&b, EndpointOutcome::Success),
            "same seed, same draws"
        );
        *counts.entry(x).or_insert(0u32) += 1;
    }
    let heavy = f64::from(counts["heavy"]) / 8000.0;
    assert!(
        (0.72..0.78).contains(&heavy),
        "3:1 weights gave {heavy:.3} to heavy"
    );
}

#[test]
fn least_outstanding_picks_an_endpoint_with_the_fewest_in_flight() {
    let clock = ManualClock::new();
    let c = cluster(3, Balancer::LeastOutstanding, &clock);
    let mut held = Vec::new();
    for _ in 0..9 {
        let min = c.endpoints().iter().map(|e| e.outstanding()).min().unwrap();
        let l = c.select().unwrap();
        assert_eq!(
            l.endpoint().outstanding(),
            min + 1,
            "chose a least loaded endpoint"
        );
        held.push(l);
    }
    let loads: Vec<u32> = c.endpoints().iter().map(|e| e.outstanding()).collect();
    assert_eq!(loads, [3, 3, 3], "held calls spread evenly");
    drop(held);
    assert!(
        c.endpoints().iter().all(|e| e.outstanding() == 0),
        "leases give back their place"
    );
}

#[test]
fn power_of_two_choices_avoids_the_loaded_endpoint() {
    let clock = ManualClock::new();
    let c = cluster(2, Balancer::PowerOfTwoChoices, &clock);
    // With two endpoints p2c compares both: the loaded one is never chosen.
    let busy = loop {
        let l = c.select().unwrap();
        if l.endpoint().id().as_str() == "e0" {
            break l;
        }
    };
    for _ in 0..50 {
        assert_eq!(pick(&c, EndpointOutcome::Success), "e1");
    }
    drop(busy);
}

#[test]
fn an_open_breaker_is_skipped_then_probed_after_its_wait() {
    let clock = ManualClock::new();
    let c = cluster(2, Balancer::RoundRobin, &clock);
    let e0 = c.endpoint("e0").unwrap();
    for _ in 0..3 {
        let permit = e0.breaker().try_acquire().unwrap();
        permit.record(tripline::Outcome::Failure, Duration::ZERO);
    }
    assert_eq!(e0.breaker().state(), State::Open);
    for _ in 0..6 {
        assert_eq!(pick(&c, EndpointOutcome::Success), "e1", "open: skipped");
    }
    clock.advance(Duration::from_secs(5));
    // The wait is over: selection asks the breaker, which admits a probe.
    let probes: Vec<String> = (0..2).map(|_| pick(&c, EndpointOutcome::Success)).collect();
    assert!(probes.contains(&"e0".to_string()), "probed: {probes:?}");
    assert_eq!(e0.breaker().state(), State::Closed, "the probe succeeded");
}

#[test]
fn an_empty_cluster_and_an_all_open_cluster_are_clear_errors() {
    let clock = ManualClock::new();
    let empty = Cluster::builder()
        .name("orders")
        .clock(clock.clone())
        .build()
        .unwrap();
    let err = empty.select().unwrap_err();
    assert!(err.is_empty_cluster());
    assert_eq!(err.to_string(), "cluster `orders` has no endpoints");

    let c = cluster(3, Balancer::RoundRobin, &clock);
    for e in c.endpoints() {
        e.breaker().force_open();
    }
    let err = c.select().unwrap_err();
    assert_eq!((err.endpoints, err.open), (3, 3));
    assert_eq!(
        err.to_string(),
        "no endpoint of cluster `t` can take the call: 3 endpoint(s), 3 with an open circuit \
         breaker, 0 ejected or unhealthy, 0 already tried"
    );
}

#[test]
fn endpoints_change_at_runtime_and_keep_their_state() {
    let clock = ManualClock::new();
    let c = cluster(2, Balancer::RoundRobin, &clock);
    c.endpoint("e0").unwrap().breaker().force_open();
    c.set_endpoints(vec![
        EndpointConfig::new("e0", "10.0.0.0:80").weight(5),
        EndpointConfig::new("e9", "10.0.0.9:80"),
    ])
    .unwrap();
    let ids: Vec<String> = c.endpoints().iter().map(|e| e.id().to_string()).collect();
    assert_eq!(ids, ["e0", "e9"]);
    let e0 = c.endpoint("e0").unwrap();
    assert_eq!(e0.breaker().state(), State::ForcedOpen, "kept its breaker");
    assert_eq!(e0.weight(), 5, "weight updated in place");
    assert_eq!(e0.breaker().name(), "t:e0");
    // A known id at a new address is a new instance: a fresh breaker.
    c.set_endpoints(vec![EndpointConfig::new("e0", "10.9.9.9:80")])
        .unwrap();
    assert_eq!(c.endpoint("e0").unwrap().breaker().state(), State::Closed);

    c.add_endpoint(EndpointConfig::new("e1", "x")).unwrap();
    assert!(c.remove_endpoint("e0"));
    assert!(!c.remove_endpoint("e0"));
    c.set_weight("e1", 7).unwrap();
    assert_eq!(c.endpoint("e1").unwrap().weight(), 7);
    assert_eq!(c.len(), 1);
}

#[test]
fn invalid_endpoint_updates_change_nothing() {
    let clock = ManualClock::new();
    let c = cluster(2, Balancer::RoundRobin, &clock);
    let dup = c
        .set_endpoints(vec![
            EndpointConfig::new("a", "x"),
            EndpointConfig::new("a", "y"),
        ])
        .unwrap_err();
    assert_eq!(
        dup.to_string(),
        "invalid cluster config: `endpoints.id` must be unique, `a` appears twice"
    );
    let zero = c
        .add_endpoint(EndpointConfig::new("z", "x").weight(0))
        .unwrap_err();
    assert_eq!(zero.field, "endpoints.weight");
    assert!(zero.to_string().contains("got 0 (endpoint `z`)"));
    assert_eq!(
        c.add_endpoint(EndpointConfig::new("e0", "again"))
            .unwrap_err()
            .field,
        "endpoints.id"
    );
    assert_eq!(c.set_weight("nope", 2).unwrap_err().field, "endpoints.id");
    assert_eq!(c.len(), 2);
}

#[test]
fn unhealthy_endpoints_are_skipped_until_panic_mode() {
    let clock = ManualClock::new();
    let c = cluster(4, Balancer::RoundRobin, &clock);
    assert!(c.mark_unhealthy("e0", true));
    assert!(!c.mark_unhealthy("nope", true));
    for _ in 0..8 {
        assert_ne!(pick(&c, EndpointOutcome::Success), "e0");
    }
    // 2 of 4 healthy is not below 50%; 1 of 4 is: panic, spread over all.
    c.mark_unhealthy("e1", true);
    assert!(!c.is_panicking());
    c.mark_unhealthy("e2", true);
    assert!(c.is_panicking());
    let seen: std::collections::HashSet<String> =
        (0..8).map(|_| pick(&c, EndpointOutcome::Success)).collect();
    assert_eq!(seen.len(), 4, "panic spreads traffic over every endpoint");
    c.mark_unhealthy("e2", false);
    assert!(!c.is_panicking());
    let h = c.health();
    assert_eq!(
        (h.endpoints, h.routable, h.ejected, h.panic),
        (4, 2, 0, false)
    );
}

proptest! {
    /// Outside panic mode no balancer ever picks an unroutable endpoint;
    /// when nothing is routable, selection fails instead.
    #[test]
    fn no_balancer_picks_an_unroutable_endpoint(
        n in 1usize..12,
        unhealthy in proptest::collection::vec(any::<bool>(), 12),
        balancer in prop_oneof![
            Just(Balancer::RoundRobin),
            Just(Balancer::WeightedRandom),
            Just(Balancer::LeastOutstanding),
            Just(Balancer::PowerOfTwoChoices),
            Just(Balancer::WeightedRoundRobin),
        ],
        held in 0usize..4,
    ) {
        let clock = ManualClock::new();
        let c = cluster_with(n, balancer, &clock, 0);
        for (i, u) in unhealthy.iter().take(n).enumerate() {
            c.mark_unhealthy(&format!("e{i}"), *u);
        }
        let routable = unhealthy.iter().take(n).filter(|u| !**u).count();
        let mut leases = Vec::new();
        for _ in 0..(20 + held) {
            match c.select() {
                Ok(l) => {
                    prop_assert!(l.endpoint().is_routable(), "picked {:?}", l.endpoint());
                    if leases.len() < held { leases.push(l) } else { l.record(EndpointOutcome::Success) }
                }
                Err(e) => {
                    prop_assert_eq!(routable, 0);
                    prop_assert_eq!(e.ejected, n);
                }
            }
        }
    }

    /// With a panic threshold, an unroutable endpoint is picked only while
    /// the cluster is panicking.
    #[test]
    fn unroutable_endpoints_are_picked_only_in_panic_mode(
        n in 1usize..10,
        unhealthy in proptest::collection::vec(any::<bool>(), 10),
        threshold in 0u32..=100,
    ) {
        let clock = ManualClock::new();
        let c = cluster_with(n, Balancer::PowerOfTwoChoices, &clock, threshold);
        for (i, u) in unhealthy.iter().take(n).enumerate() {
            c.mark_unhealthy(&format!("e{i}"), *u);
        }
        let healthy = unhealthy.iter().take(n).filter(|u| !**u).count();
        prop_assert_eq!(c.is_panicking(), (healthy as u32) * 100 < threshold * n as u32);
        for _ in 0..20 {
            if let Ok(l) = c.select() {
                prop_assert!(l.endpoint().is_routable() || c.is_panicking());
            }
        }
    }
}
