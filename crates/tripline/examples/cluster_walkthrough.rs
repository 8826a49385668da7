//! A walkthrough on tripline: a three-node cluster with a
//! breaker per node and failover (`retries = 2`).
//!
//! 1. Nodes A and B are down, C is healthy: requests fail over to C while
//!    A's and B's breakers trip; then A and B are skipped outright.
//! 2. C goes down too: requests fail, C's breaker trips, and with every
//!    breaker open the cluster refuses at once — the local fallback answers.
//! 3. 5.5 s pass (on a `ManualClock`: no real waiting).
//! 4. C recovers: its half-open probes succeed and it closes; A's and B's
//!    probes fail and they reopen.
//!
//! Breakers as a typical Dubbo-style setup has them: 50 % failure rate over at least 5 calls
//! (a 10-call count window stands in for its 10 s window, which at this
//! pace holds the same calls), a 5 s open state, 3 consecutive successful
//! probes to close. Nodes fail deterministically instead of with the
//! seed's 80 % chance, so every run prints the same decisions.
//!
//! ```sh
//! cargo run -p tripline --example cluster_walkthrough
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::breaker::{EventKind, OpenDuration};
use tripline::clock::{Clock, ManualClock};
use tripline::cluster::{Cluster, ClusterError, EndpointConfig, Failover, FailoverConfig};
use tripline::{CircuitBreakerConfig, HalfOpenPolicy, State, WindowConfig};

/// The simulated nodes: which are up.
type Health = Arc<Mutex<HashMap<String, bool>>>;

fn main() {
    let clock = ManualClock::new();
    println!("=== 1. a three-node cluster: node-A down, node-B down, node-C healthy ===");
    let health: Health = Arc::new(Mutex::new(
        [("node-A", false), ("node-B", false), ("node-C", true)]
            .into_iter()
            .map(|(n, up)| (n.to_string(), up))
            .collect(),
    ));
    let cluster = Cluster::builder()
        .name("order-service")
        .endpoints(
            ["node-A", "node-B", "node-C"].map(|n| EndpointConfig::new(n, format!("{n}:8080"))),
        )
        .breaker(CircuitBreakerConfig {
            name: "order-service".into(),
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 5,
            failure_rate_threshold: 0.5,
            open_duration: OpenDuration::Fixed(Duration::from_secs(5)),
            half_open: HalfOpenPolicy::Consecutive { successes: 3 },
            ..Default::default()
        })
        .clock(clock.clone())
        .seed(3)
        .build()
        .expect("valid cluster");
    let failover = Failover::try_new(
        cluster.clone(),
        FailoverConfig {
            retries: 2,
            ..Default::default()
        },
    )
    .expect("valid failover");

    // Every breaker transition, as it happens.
    let _subscriptions: Vec<_> = cluster
        .endpoints()
        .iter()
        .map(|e| {
            e.breaker().subscribe(|event| {
                if let EventKind::Transition(t) = &event.kind {
                    println!(
                        "      [breaker {}] {} → {} ({}; window: {} calls, {} failed)",
                        event.breaker, t.from, t.to, t.reason, t.window.calls, t.window.failures
                    );
                }
            })
        })
        .collect();

    let request = |n: u32| {
        println!(
            "--- request #{n} at t={:.1}s: {} ---",
            clock.now().as_secs_f64(),
            states(&cluster, &clock)
        );
        let result = failover.call(|endpoint, attempt| {
            let id = endpoint.id().to_string();
            let up = health.lock().expect("health")[&id];
            let probe = if endpoint.breaker().state() == State::HalfOpen {
                " (half-open probe)"
            } else {
                ""
            };
            if up {
                println!("    attempt {} → {id}{probe}: ok", attempt.number());
                Ok(format!("OK from {id}, payload Req-Data-{n}"))
            } else {
                println!("    attempt {} → {id}{probe}: timed out", attempt.number());
                Err(format!("{id} timed out"))
            }
        });
        let answer = match result {
            Ok(v) => v,
            Err(e @ ClusterError::Unavailable(_)) => {
                println!("    no attempt: {e}");
                fallback()
            }
            Err(e) => {
                println!("    failover gave up: {e}");
                fallback()
            }
        };
        println!("    result: {answer}");
        clock.advance(Duration::from_millis(300));
    };

    println!("\n=== 2. requests while A and B are down: A's and B's breakers trip ===");
    for n in 1..=7 {
        request(n);
    }

    println!("\n=== 3. node-C fails too: every request falls back ===");
    health
        .lock()
        .expect("health")
        .insert("node-C".into(), false);
    for n in 8..=13 {
        request(n);
    }

    println!("\n=== 4. 5.5 s pass (ManualClock: no real wait) ===");
    clock.advance(Duration::from_millis(5500));
    println!(
        "    t={:.1}s: {}",
        clock.now().as_secs_f64(),
        states(&cluster, &clock)
    );

    println!("\n=== 5. node-C recovers: probes close its breaker; A's and B's probes fail ===");
    health.lock().expect("health").insert("node-C".into(), true);
    for n in 14..=17 {
        request(n);
    }
    println!("\nfinal: {}", states(&cluster, &clock));
    let s = failover.stats();
    println!(
        "failover: {} calls, {} attempts, {} failovers, stopped: {} with no endpoint left, {} at retries",
        s.calls, s.attempts, s.failovers, s.stopped_no_endpoint, s.stopped_retries
    );
}

/// The local degraded answer when the cluster cannot serve.
fn fallback() -> String {
    "Fallback: local static cache — system busy, please retry later".to_string()
}

/// Each node's breaker state, with the rest of its open time.
fn states(cluster: &Cluster, clock: &ManualClock) -> String {
    cluster
        .endpoints()
        .iter()
        .map(|e| {
            let b = e.breaker();
            match b.open_until_time() {
                Some(until) if b.state() == State::Open => {
                    let left = until.saturating_duration_since(clock.now());
                    if left.is_zero() {
                        // Transitions are lazy: the next call is the probe.
                        format!("{} open (wait over)", e.id())
                    } else {
                        format!("{} open ({:.1}s left)", e.id(), left.as_secs_f64())
                    }
                }
                _ => format!("{} {}", e.id(), b.state()),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
