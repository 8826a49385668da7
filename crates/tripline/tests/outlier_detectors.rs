//! Outlier detectors on a ManualClock: consecutive failures, gateway and
//! local-origin streaks, success rate, failure percentage, detect-only
//! enforcement, ejection time and its backoff, jitter, and returns.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, EndpointOutcome};
use tripline::outlier::{
    ClusterEvent, ClusterEventKind, ClusterSubscription, ConsecutiveConfig, Detector,
    DetectorStats, FailurePercentageConfig, OutlierConfig, SkipReason, SuccessRateConfig,
};
use tripline::{CircuitBreakerConfig, WindowConfig};

type Events = Arc<Mutex<Vec<ClusterEvent>>>;

/// Detectors all off: each test switches on what it examines.
fn quiet() -> OutlierConfig {
    OutlierConfig {
        interval: Duration::from_secs(10),
        base_ejection_time: Duration::from_secs(30),
        max_ejection_percent: 100,
        consecutive_failures: None,
        consecutive_gateway_failures: None,
        consecutive_local_origin_failures: None,
        success_rate: None,
        failure_percentage: None,
        ..Default::default()
    }
}

/// Endpoints `e0..`, round robin, breakers that never trip (the detectors
/// are under test), no panic mode.
fn cluster(
    n: usize,
    outlier: OutlierConfig,
    clock: &ManualClock,
    seed: u64,
) -> (Cluster, Events, ClusterSubscription) {
    let c = Cluster::builder()
        .name("svc")
        .balancer(Balancer::RoundRobin)
        .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 30_000 },
            minimum_calls: 30_000,
            ..Default::default()
        })
        .outlier(outlier)
        .panic_threshold_percent(0)
        .clock(clock.clone())
        .seed(seed)
        .build()
        .unwrap();
    let events: Events = Arc::default();
    let sink = events.clone();
    let sub = c.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    (c, events, sub)
}

/// `calls` selections, each recorded with `outcome(endpoint id)`.
fn drive(c: &Cluster, calls: usize, mut outcome: impl FnMut(&str) -> EndpointOutcome) {
    for _ in 0..calls {
        let lease = c.select().unwrap();
        let o = outcome(lease.endpoint().id().as_str());
        lease.record(o);
    }
}

fn ejections(events: &Events) -> Vec<(String, Detector, DetectorStats, Duration)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            ClusterEventKind::Ejected {
                endpoint,
                detector,
                stats,
                duration,
                ..
            } => Some((endpoint.to_string(), *detector, *stats, *duration)),
            _ => None,
        })
        .collect()
}

fn consecutive(threshold: u32) -> Option<ConsecutiveConfig> {
    Some(ConsecutiveConfig {
        threshold,
        enforcing_percent: 100,
    })
}

#[test]
fn consecutive_failures_eject_at_once_and_the_endpoint_is_skipped() {
    let clock = ManualClock::new();
    let (c, events, _s) = cluster(
        3,
        OutlierConfig {
            consecutive_failures: consecutive(3),
            ..quiet()
        },
        &clock,
        1,
    );
    let before = tripline::clock::system_time_after(Duration::ZERO);
    drive(&c, 9, |id| {
        if id == "e1" {
            EndpointOutcome::UpstreamFailure
        } else {
            EndpointOutcome::Success
        }
    });
    let after = tripline::clock::system_time_after(Duration::ZERO);
    assert!(c.endpoint("e1").unwrap().is_ejected());
    let ev = events.lock().unwrap()[0].clone();
    assert_eq!(&*ev.cluster, "svc");
    // The wall-clock time is the ejection's own, whatever the virtual
    // clock says: what an admin page shows beside its logs.
    assert!(before <= ev.wall && ev.wall <= after, "{:?}", ev.wall);
    match ev.kind {
        ClusterEventKind::Ejected {
            endpoint,
            detector,
            stats,
            duration,
            multiplier,
            ejected,
            total,
        } => {
            assert_eq!(endpoint.as_str(), "e1");
            assert_eq!(detector, Detector::ConsecutiveFailures);
            assert_eq!(
                stats,
                DetectorStats::Consecutive {
                    count: 3,
                    threshold: 3
                }
            );
            assert_eq!(
                (duration, multiplier, ejected, total),
                (Duration::from_secs(30), 1, 1, 3)
            );
        }
        other => panic!("{other:?}"),
    }
    let mut seen = Vec::new();
    drive(&c, 10, |id| {
        seen.push(id.to_string());
        EndpointOutcome::Success
    });
    assert!(!seen.contains(&"e1".to_string()), "ejected: routed around");
    assert_eq!(c.health().ejected, 1);
}

#[test]
fn a_success_breaks_the_streak() {
    let clock = ManualClock::new();
    let (c, events, _s) = cluster(
        2,
        OutlierConfig {
            consecutive_failures: consecutive(3),
            ..quiet()
        },
        &clock,
        1,
    );
    let mut n = 0;
    drive(&c, 60, |id| {
        if id != "e1" {
            return EndpointOutcome::Success;
        }
        n += 1;
        if n % 3 == 0 {
            EndpointOutcome::Success
        } else {
            EndpointOutcome::UpstreamFailure
        }
    });
    assert!(events.lock().unwrap().is_empty());
    assert_eq!(c.endpoint("e1").unwrap().outlier_counts().failures, 20);
}

#[test]
fn gateway_failures_have_their_own_streak() {
    let clock = ManualClock::new();
    let config = OutlierConfig {
        consecutive_failures: consecutive(5),
        consecutive_gateway_failures: consecutive(2),
        ..quiet()
    };
    let (c, events, _s) = cluster(3, config, &clock, 1);
    drive(&c, 6, |id| match id {
        "e1" => EndpointOutcome::GatewayFailure,
        "e2" => EndpointOutcome::UpstreamFailure,
        _ => EndpointOutcome::Success,
    });
    let ej = ejections(&events);
    assert_eq!(ej.len(), 1, "{ej:?}");
    assert_eq!(
        (ej[0].0.as_str(), ej[0].1),
        ("e1", Detector::ConsecutiveGatewayFailures)
    );
    assert!(
        !c.endpoint("e2").unwrap().is_ejected(),
        "two 500s: below 5, and not gateway errors"
    );
}

#[test]
fn local_origin_errors_are_split_from_upstream_errors() {
    let clock = ManualClock::new();
    let split = OutlierConfig {
        split_external_local_origin_errors: true,
        consecutive_failures: consecutive(2),
        consecutive_local_origin_failures: consecutive(3),
        ..quiet()
    };
    let (c, events, _s) = cluster(2, split.clone(), &clock, 1);
    drive(&c, 4, |id| {
        if id == "e0" {
            EndpointOutcome::ConnectFailure
        } else {
            EndpointOutcome::Success
        }
    });
    assert!(
        events.lock().unwrap().is_empty(),
        "2 local-origin errors: not an upstream streak"
    );
    drive(&c, 2, |id| {
        if id == "e0" {
            EndpointOutcome::LocalOriginFailure
        } else {
            EndpointOutcome::Success
        }
    });
    let ej = ejections(&events);
    assert_eq!(ej[0].1, Detector::ConsecutiveLocalOriginFailures);
    let counts = c.endpoint("e0").unwrap().outlier_counts();
    assert_eq!(
        (
            counts.local_origin_requests,
            counts.local_origin_failures,
            counts.failures
        ),
        (3, 3, 0)
    );

    // Unsplit, the same errors are gateway-like failures of the endpoint.
    let (c, events, _s) = cluster(
        2,
        OutlierConfig {
            split_external_local_origin_errors: false,
            ..split
        },
        &clock,
        1,
    );
    drive(&c, 4, |id| {
        if id == "e0" {
            EndpointOutcome::ConnectFailure
        } else {
            EndpointOutcome::Success
        }
    });
    assert_eq!(ejections(&events)[0].1, Detector::ConsecutiveFailures);
    assert!(c.endpoint("e0").unwrap().is_ejected());
}

#[test]
fn success_rate_ejects_the_endpoint_below_mean_minus_k_sigma() {
    let clock = ManualClock::new();
    let sr = SuccessRateConfig {
        minimum_hosts: 5,
        request_volume: 10,
        stdev_factor: 1.0,
        ..Default::default()
    };
    let (c, events, _s) = cluster(
        5,
        OutlierConfig {
            success_rate: Some(sr),
            ..quiet()
        },
        &clock,
        1,
    );
    let mut n = 0;
    drive(&c, 100, |id| {
        if id != "e3" {
            return EndpointOutcome::Success;
        }
        n += 1;
        if n % 2 == 0 {
            EndpointOutcome::UpstreamFailure
        } else {
            EndpointOutcome::Success
        }
    });
    assert!(events.lock().unwrap().is_empty(), "no pass yet");
    clock.advance(Duration::from_secs(10));
    drive(&c, 1, |_| EndpointOutcome::Success); // the first call after the interval runs the pass
    let ej = ejections(&events);
    assert_eq!(ej.len(), 1, "{ej:?}");
    assert_eq!((ej[0].0.as_str(), ej[0].1), ("e3", Detector::SuccessRate));
    match ej[0].2 {
        DetectorStats::SuccessRate {
            success_rate,
            mean,
            stdev,
            threshold,
            requests,
            hosts,
        } => {
            assert_eq!(
                (success_rate, mean, stdev, threshold),
                (50.0, 90.0, 20.0, 70.0)
            );
            assert_eq!((requests, hosts), (20, 5));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn success_rate_needs_enough_hosts_with_enough_volume() {
    let clock = ManualClock::new();
    let sr = SuccessRateConfig {
        minimum_hosts: 5,
        request_volume: 30,
        stdev_factor: 1.0,
        ..Default::default()
    };
    let (c, events, _s) = cluster(
        5,
        OutlierConfig {
            success_rate: Some(sr),
            ..quiet()
        },
        &clock,
        1,
    );
    // 20 requests each: below the volume, nobody is judged.
    drive(&c, 100, |id| {
        if id == "e3" {
            EndpointOutcome::UpstreamFailure
        } else {
            EndpointOutcome::Success
        }
    });
    clock.advance(Duration::from_secs(10));
    c.analyze();
    assert!(events.lock().unwrap().is_empty());
    // Four endpoints with volume: fewer than minimum_hosts.
    let (c, events, _s) = cluster(
        4,
        OutlierConfig {
            success_rate: Some(sr),
            ..quiet()
        },
        &clock,
        1,
    );
    drive(&c, 160, |id| {
        if id == "e3" {
            EndpointOutcome::UpstreamFailure
        } else {
            EndpointOutcome::Success
        }
    });
    c.analyze();
    assert!(events.lock().unwrap().is_empty());
}

#[test]
fn failure_percentage_ejects_at_the_threshold() {
    let clock = ManualClock::new();
    let fp = FailurePercentageConfig {
        threshold_percent: 50,
        minimum_hosts: 3,
        request_volume: 10,
        ..Default::default()
    };
    let (c, events, _s) = cluster(
        3,
        OutlierConfig {
            failure_percentage: Some(fp),
            ..quiet()
        },
        &clock,
        1,
    );
    let mut n = 0;
    drive(&c, 30, |id| {
        if id != "e0" {
            return EndpointOutcome::Success;
        }
        n += 1;
        if n <= 6 {
            EndpointOutcome::GatewayFailure
        } else {
            EndpointOutcome::Success
        }
    });
    c.analyze();
    let ej = ejections(&events);
    assert_eq!(ej.len(), 1);
    assert_eq!(
        ej[0].2,
        DetectorStats::FailurePercentage {
            failure_percent: 60.0,
            threshold: 50,
            requests: 10
        }
    );
}

#[test]
fn enforcing_zero_detects_without_ejecting() {
    let clock = ManualClock::new();
    let config = OutlierConfig {
        consecutive_failures: Some(ConsecutiveConfig {
            threshold: 2,
            enforcing_percent: 0,
        }),
        ..quiet()
    };
    let (c, events, _s) = cluster(2, config, &clock, 1);
    drive(&c, 8, |id| {
        if id == "e0" {
            EndpointOutcome::UpstreamFailure
        } else {
            EndpointOutcome::Success
        }
    });
    assert!(!c.endpoint("e0").unwrap().is_ejected());
    let ev = events.lock().unwrap();
    assert_eq!(
        ev.len(),
        2,
        "detected at 2 and again at 4 failures in a row"
    );
    assert!(ev.iter().all(|e| matches!(
        e.kind,
        ClusterEventKind::Detected {
            skipped: SkipReason::NotEnforced,
            detector: Detector::ConsecutiveFailures,
            ..
        }
    )));
}

#[test]
fn partial_enforcement_ejects_about_that_share() {
    let clock = ManualClock::new();
    let mut ejected = 0;
    for seed in 0..200 {
        let config = OutlierConfig {
            consecutive_failures: Some(ConsecutiveConfig {
                threshold: 1,
                enforcing_percent: 30,
            }),
            ..quiet()
        };
        let (c, _, _s) = cluster(1, config, &clock, seed);
        drive(&c, 1, |_| EndpointOutcome::UpstreamFailure);
        ejected += usize::from(c.endpoint("e0").unwrap().is_ejected());
    }
    assert!(
        (40..=80).contains(&ejected),
        "30% of 200 detections: {ejected}"
    );
}

/// Fails `e0` until it is ejected, then waits for its return.
fn eject_and_return(c: &Cluster, clock: &ManualClock) {
    while !c.endpoint("e0").unwrap().is_ejected() {
        drive(c, 1, |id| {
            if id == "e0" {
                EndpointOutcome::UpstreamFailure
            } else {
                EndpointOutcome::Success
            }
        });
    }
    while c.endpoint("e0").unwrap().is_ejected() {
        clock.advance(Duration::from_secs(10));
        c.analyze();
    }
}

#[test]
fn ejection_time_grows_with_each_ejection_in_a_row_up_to_the_cap() {
    let clock = ManualClock::new();
    let config = OutlierConfig {
        base_ejection_time: Duration::from_secs(10),
        max_ejection_time: Duration::from_secs(25),
        consecutive_failures: consecutive(2),
        ..quiet()
    };
    let (c, events, _s) = cluster(2, config, &clock, 1);
    for _ in 0..4 {
        eject_and_return(&c, &clock);
    }
    let durations: Vec<u64> = ejections(&events).iter().map(|e| e.3.as_secs()).collect();
    assert_eq!(durations, [10, 20, 25, 25]);
    let returned: Vec<Duration> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e.kind {
            ClusterEventKind::Returned { ejected_for, .. } => Some(ejected_for),
            _ => None,
        })
        .collect();
    assert_eq!(
        returned[0],
        Duration::from_secs(10),
        "returned at the first pass after its time"
    );
    assert_eq!(c.endpoint("e0").unwrap().ejections(), 4);
}

#[test]
fn the_multiplier_decays_while_the_endpoint_behaves() {
    let clock = ManualClock::new();
    let config = OutlierConfig {
        base_ejection_time: Duration::from_secs(10),
        max_ejection_time: Duration::from_secs(100),
        consecutive_failures: consecutive(2),
        ..quiet()
    };
    let (c, events, _s) = cluster(2, config, &clock, 1);
    eject_and_return(&c, &clock);
    eject_and_return(&c, &clock); // 20 s: multiplier 2
    for _ in 0..3 {
        clock.advance(Duration::from_secs(10));
        c.analyze(); // healthy passes: 2 → 0
    }
    eject_and_return(&c, &clock);
    let durations: Vec<u64> = ejections(&events).iter().map(|e| e.3.as_secs()).collect();
    assert_eq!(durations, [10, 20, 10]);
}

#[test]
fn ejection_jitter_is_bounded_and_seeded() {
    let clock = ManualClock::new();
    let config = OutlierConfig {
        max_ejection_time_jitter: Duration::from_secs(5),
        consecutive_failures: consecutive(1),
        ..quiet()
    };
    let run = |seed| {
        let (c, events, _s) = cluster(8, config.clone(), &clock, seed);
        drive(&c, 8, |_| EndpointOutcome::UpstreamFailure);
        ejections(&events).iter().map(|e| e.3).collect::<Vec<_>>()
    };
    let (a, b, other) = (run(3), run(3), run(4));
    assert_eq!(a.len(), 8);
    assert_eq!(a, b, "same seed, same jitter");
    assert_ne!(a, other);
    for d in &a {
        assert!(
            *d >= Duration::from_secs(30) && *d <= Duration::from_secs(35),
            "{d:?}"
        );
    }
    let distinct: std::collections::HashSet<_> = a.iter().collect();
    assert!(
        distinct.len() > 4,
        "endpoints ejected together return apart: {a:?}"
    );
}

#[test]
fn returns_happen_at_the_lazy_pass_on_the_next_call() {
    let clock = ManualClock::new();
    let (c, events, _s) = cluster(
        2,
        OutlierConfig {
            consecutive_failures: consecutive(1),
            ..quiet()
        },
        &clock,
        1,
    );
    drive(&c, 1, |_| EndpointOutcome::UpstreamFailure);
    assert!(c.endpoint("e0").unwrap().is_ejected());
    clock.advance(Duration::from_secs(29));
    drive(&c, 1, |_| EndpointOutcome::Success);
    assert!(c.endpoint("e0").unwrap().is_ejected(), "29 s of 30");
    clock.advance(Duration::from_secs(1));
    drive(&c, 1, |_| EndpointOutcome::Success);
    assert!(
        c.endpoint("e0").unwrap().is_ejected(),
        "the next pass is due at 40 s"
    );
    clock.advance(Duration::from_secs(10));
    drive(&c, 1, |_| EndpointOutcome::Success);
    assert!(!c.endpoint("e0").unwrap().is_ejected());
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        &e.kind,
        ClusterEventKind::Returned { endpoint, ejected_for } if endpoint.as_str() == "e0" && *ejected_for == Duration::from_secs(40)
    )));
}
