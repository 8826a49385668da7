//! The ejection cap (`max_ejection_percent`, rounding down,
//! `always_eject_one`) with 2, 3 and 10 endpoints, and panic mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::cluster::{Cluster, EndpointConfig, EndpointOutcome};
use tripline::outlier::{
    ClusterEvent, ClusterEventKind, ConsecutiveConfig, OutlierConfig, PanicStats, SkipReason,
    ejection_cap,
};
use tripline::{CircuitBreakerConfig, WindowConfig};

fn cluster(n: usize, percent: u32, always_one: bool, panic: u32, clock: &ManualClock) -> Cluster {
    Cluster::builder()
        .name("svc")
        .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 30_000 },
            minimum_calls: 30_000,
            ..Default::default()
        })
        .outlier(OutlierConfig {
            max_ejection_percent: percent,
            always_eject_one: always_one,
            consecutive_failures: Some(ConsecutiveConfig {
                threshold: 1,
                enforcing_percent: 100,
            }),
            consecutive_gateway_failures: None,
            success_rate: None,
            ..Default::default()
        })
        .panic_threshold_percent(panic)
        .clock(clock.clone())
        .seed(9)
        .build()
        .unwrap()
}

fn record(c: &Cluster, outcome: EndpointOutcome) -> String {
    let lease = c.select().unwrap();
    let id = lease.endpoint().id().to_string();
    lease.record(outcome);
    id
}

#[test]
fn the_cap_rounds_down_with_2_3_and_10_endpoints() {
    // (endpoints, max_ejection_percent, always_eject_one) → most ejected
    let table = [
        (2, 50, false, 1),
        (2, 10, false, 0),
        (2, 10, true, 1),
        (2, 100, false, 2),
        (3, 50, false, 1),
        (3, 10, false, 0),
        (3, 10, true, 1),
        (3, 67, false, 2),
        (3, 100, false, 3),
        (10, 10, false, 1),
        (10, 50, false, 5),
        (10, 55, false, 5),
        (10, 0, true, 1),
        (10, 100, false, 10),
    ];
    for (n, percent, always_one, cap) in table {
        assert_eq!(
            ejection_cap(n, percent, always_one),
            cap,
            "{n} endpoints at {percent}%"
        );
        let clock = ManualClock::new();
        let c = cluster(n, percent, always_one, 0, &clock);
        let events: Arc<Mutex<Vec<ClusterEvent>>> = Arc::default();
        let sink = events.clone();
        let _sub = c.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
        // Every endpoint fails, more than once each.
        for _ in 0..3 * n {
            // Once everything that may be ejected is, selection may fail.
            let _ = c
                .select()
                .map(|l| l.record(EndpointOutcome::UpstreamFailure));
        }
        assert_eq!(
            c.health().ejected,
            cap,
            "{n} endpoints at {percent}% (always one: {always_one})"
        );
        let capped = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e.kind, ClusterEventKind::Detected { skipped: SkipReason::MaxEjectionPercent { cap: k }, .. } if k == cap))
            .count();
        assert!(
            cap == n || capped > 0,
            "detections beyond the cap are reported"
        );
    }
}

#[test]
fn panic_mode_is_entered_and_left_with_events() {
    let clock = ManualClock::new();
    let c = cluster(4, 100, false, 50, &clock);
    let events: Arc<Mutex<Vec<ClusterEvent>>> = Arc::default();
    let sink = events.clone();
    let _sub = c.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    // Eject e0 and e1: 2 of 4 healthy is not below 50 %.
    for _ in 0..2 {
        record(&c, EndpointOutcome::UpstreamFailure);
    }
    assert_eq!(c.health().ejected, 2);
    assert!(!c.is_panicking());
    // A third: 1 of 4 healthy, below 50 %: panic.
    record(&c, EndpointOutcome::UpstreamFailure);
    assert!(c.is_panicking());
    let entered = PanicStats {
        healthy: 1,
        total: 4,
        threshold_percent: 50,
    };
    let last = events.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.kind, ClusterEventKind::PanicEntered(entered));
    // Health is ignored: traffic reaches every endpoint, ejected or not.
    let reached: std::collections::HashSet<String> = (0..8)
        .map(|_| record(&c, EndpointOutcome::Success))
        .collect();
    assert_eq!(reached.len(), 4);
    // Ejections end: health counts again.
    clock.advance(Duration::from_secs(30));
    c.analyze();
    assert!(!c.is_panicking());
    let h = c.health();
    assert_eq!((h.ejected, h.routable, h.panic), (0, 4, false));
    let left = events
        .lock()
        .unwrap()
        .iter()
        .find_map(|e| match e.kind {
            ClusterEventKind::PanicLeft(s) => Some(s),
            _ => None,
        })
        .unwrap();
    assert!(left.healthy * 100 >= 50 * left.total);
}

#[test]
fn a_zero_panic_threshold_never_panics() {
    let clock = ManualClock::new();
    let c = cluster(3, 100, false, 0, &clock);
    for _ in 0..3 {
        record(&c, EndpointOutcome::UpstreamFailure);
    }
    assert_eq!(c.health().ejected, 3);
    assert!(!c.is_panicking());
    let err = c.select().unwrap_err();
    assert_eq!((err.ejected, err.endpoints), (3, 3), "{err}");
}

proptest! {
    /// Whatever the traffic, the clock and the endpoint changes, the
    /// ejected count never exceeds the cap for the current cluster size.
    #[test]
    fn ejections_never_exceed_the_cap(
        n in 1usize..12,
        percent in 0u32..=100,
        always_one in any::<bool>(),
        steps in proptest::collection::vec((0u8..4, 0u64..40), 1..60),
    ) {
        let clock = ManualClock::new();
        let c = cluster(n, percent, always_one, 50, &clock);
        for (action, secs) in steps {
            match action {
                0 => { let _ = c.select().map(|l| l.record(EndpointOutcome::UpstreamFailure)); }
                1 => { let _ = c.select().map(|l| l.record(EndpointOutcome::Success)); }
                2 => { clock.advance(std::time::Duration::from_secs(secs)); c.analyze(); }
                _ => {
                    // Discovery shrinks or regrows the cluster.
                    let k = 1 + (secs as usize % n);
                    c.set_endpoints((0..k).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))).collect()).unwrap();
                }
            }
            let h = c.health();
            let ejected_now = c.endpoints().iter().filter(|e| e.is_ejected()).count();
            prop_assert_eq!(h.ejected, ejected_now);
            // Shrinking the cluster can leave more ejected than the new
            // cap allows until they return; no *new* ejection happens then.
            let cap = ejection_cap(c.len(), percent, always_one);
            prop_assert!(h.ejected <= cap.max(ejection_cap(n, percent, always_one)));
        }
    }

    /// On a fixed cluster the cap holds exactly.
    #[test]
    fn ejections_never_exceed_the_cap_of_a_fixed_cluster(
        n in 1usize..12,
        percent in 0u32..=100,
        always_one in any::<bool>(),
        steps in proptest::collection::vec((0u8..3, 0u64..40), 1..80),
    ) {
        let clock = ManualClock::new();
        let c = cluster(n, percent, always_one, 50, &clock);
        for (action, secs) in steps {
            match action {
                0 => { let _ = c.select().map(|l| l.record(EndpointOutcome::UpstreamFailure)); }
                1 => { let _ = c.select().map(|l| l.record(EndpointOutcome::Success)); }
                _ => { clock.advance(std::time::Duration::from_secs(secs)); c.analyze(); }
            }
            prop_assert!(c.health().ejected <= ejection_cap(n, percent, always_one));
        }
    }
}

/// Calls on several threads while discovery changes the endpoints and
/// analysis passes run: the health counts stay exact and within the cap.
#[test]
fn health_counts_stay_exact_under_concurrent_calls_and_updates() {
    let clock = ManualClock::new();
    let c = cluster(8, 50, false, 50, &clock);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let c = c.clone();
            s.spawn(move || {
                for i in 0..4000u64 {
                    let fail = (i * 7 + t) % 5 < 2;
                    if let Ok(l) = c.select() {
                        l.record(if fail {
                            EndpointOutcome::UpstreamFailure
                        } else {
                            EndpointOutcome::Success
                        });
                    }
                }
            });
        }
        let c = c.clone();
        let clock = clock.clone();
        s.spawn(move || {
            for k in 0..300usize {
                let n = 4 + k % 5;
                c.set_endpoints(
                    (0..n)
                        .map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80")))
                        .collect(),
                )
                .unwrap();
                clock.advance(Duration::from_secs(7));
                c.analyze();
            }
        });
    });
    let h = c.health();
    let flagged = c.endpoints().iter().filter(|e| e.is_ejected()).count();
    assert_eq!(h.ejected, flagged);
    assert_eq!(h.routable, c.len() - flagged);
    assert!(h.ejected <= ejection_cap(8, 50, false));
}
