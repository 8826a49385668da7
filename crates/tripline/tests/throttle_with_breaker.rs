//! Throttle then breaker, each on its own signal:
//! an overloaded backend is shed in proportion and never trips the breaker;
//! a dead backend trips the breaker and never moves the throttle; after
//! both episodes, traffic flows in full again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, State, WindowConfig};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Backend {
    Healthy,
    /// Processes `capacity` requests per tick and answers 429 to the rest.
    Overloaded {
        capacity: u32,
    },
    /// Connection refused.
    Down,
}

#[derive(Debug, Default, PartialEq)]
struct Tally {
    ok: u32,
    overloaded: u32,
    unreachable: u32,
    throttled: u32,
    circuit_open: u32,
}

struct Client {
    throttle: AdaptiveThrottle,
    breaker: CircuitBreaker,
}

impl Client {
    fn new(clock: &ManualClock) -> Self {
        Client {
            throttle: AdaptiveThrottle::builder()
                .config(AdaptiveThrottleConfig::default())
                .clock(clock.clone())
                .seed(11)
                .build()
                .unwrap(),
            breaker: CircuitBreaker::builder()
                .config(CircuitBreakerConfig {
                    name: "backend".into(),
                    window: WindowConfig::Time {
                        length: Duration::from_secs(10),
                        buckets: 10,
                    },
                    minimum_calls: 20,
                    failure_rate_threshold: 0.5,
                    ..Default::default()
                })
                .clock(clock.clone())
                .seed(11)
                .build()
                .unwrap(),
        }
    }

    /// One request: throttle first, then breaker, then the backend.
    fn send(&self, backend: Backend, served: &mut u32, tally: &mut Tally) {
        let Ok(t) = self.throttle.try_acquire() else {
            tally.throttled += 1;
            return;
        };
        let Ok(b) = self.breaker.try_acquire() else {
            tally.circuit_open += 1; // `t` drops: neutral for the throttle
            return;
        };
        let ms = Duration::from_millis(5);
        match backend {
            Backend::Overloaded { capacity } if *served >= capacity => {
                t.rejected_by_backend();
                b.record(Outcome::Ignored, ms); // busy is not broken
                tally.overloaded += 1;
            }
            Backend::Down => {
                drop(t); // no answer about load
                b.record(Outcome::Failure, ms);
                tally.unreachable += 1;
            }
            _ => {
                *served += 1;
                t.accepted();
                b.record(Outcome::Success, ms);
                tally.ok += 1;
            }
        }
    }

    /// `secs` seconds of 200 requests/s against `backend`.
    fn run(&self, clock: &ManualClock, backend: Backend, secs: u32) -> Tally {
        let mut tally = Tally::default();
        for _ in 0..secs * 10 {
            let mut served = 0;
            for _ in 0..20 {
                self.send(backend, &mut served, &mut tally);
            }
            clock.advance(Duration::from_millis(100));
        }
        tally
    }
}

#[test]
fn overload_goes_to_the_throttle_and_outage_to_the_breaker() {
    let clock = ManualClock::new();
    let client = Client::new(&clock);

    let healthy = client.run(&clock, Backend::Healthy, 5);
    assert_eq!(
        healthy,
        Tally {
            ok: 1_000,
            ..Tally::default()
        }
    );

    // Overloaded: the backend processes 5 of every 20 requests per tick.
    // One window of transient, then the steady state is measured.
    let warm = client.run(&clock, Backend::Overloaded { capacity: 5 }, 10);
    assert_eq!(client.breaker.state(), State::Closed);
    assert!(warm.throttled > 0);
    let overload = client.run(&clock, Backend::Overloaded { capacity: 5 }, 20);
    assert_eq!(
        client.breaker.state(),
        State::Closed,
        "busy never trips the breaker"
    );
    assert_eq!(overload.circuit_open, 0);
    assert!(
        overload.throttled > 1_800,
        "the throttle sheds most of the excess locally: {overload:?}"
    );
    let sent = overload.ok + overload.overloaded;
    assert!(
        (1.8..2.2).contains(&(f64::from(sent) / f64::from(overload.ok))),
        "the backend sees about k × what it accepts: {overload:?}"
    );
    assert_eq!(client.breaker.metrics().calls.failed, 0);

    // Let the throttle's window forget the overload (idle client).
    clock.advance(Duration::from_secs(10));
    assert_eq!(client.throttle.rejection_probability(), 0.0);

    // Down: the breaker trips; its rejections are neutral for the throttle.
    let before = client.throttle.metrics().totals;
    let outage = client.run(&clock, Backend::Down, 3);
    assert_eq!(client.breaker.state(), State::Open);
    assert!(
        outage.circuit_open > 0 && outage.unreachable >= 20,
        "{outage:?}"
    );
    assert_eq!(outage.throttled, 0, "the throttle stays out of an outage");
    let after = client.throttle.metrics().totals;
    assert_eq!(
        after, before,
        "neither unreachable nor circuit-open calls move the throttle"
    );
    assert_eq!(client.throttle.rejection_probability(), 0.0);

    // Recovery: the breaker probes and closes; nothing is shed.
    clock.advance(Duration::from_secs(5));
    let recovered = client.run(&clock, Backend::Healthy, 5);
    assert_eq!(client.breaker.state(), State::Closed);
    assert_eq!(recovered.throttled, 0);
    assert!(recovered.ok >= 990, "{recovered:?}");
}
