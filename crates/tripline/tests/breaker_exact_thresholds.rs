//! Every rate decision is the one the user's float means: a rate `r` of
//! `count` out of `calls` reaches a threshold `t` iff
//! `count as f64 / calls as f64 >= t`. Thresholds are drawn to sit on and
//! next to exact fractions (`2.0 / 3.0`, `1.0 / 6.0`, one ulp either side),
//! where a fixed-point threshold gets the decision wrong, for every place a
//! rate is compared: the closed trip on failures and on slow calls, the
//! half-open `Permits` verdict, a `Ramp` step's verdict, the cooldown's
//! stricter threshold, the relaxed warm-up, and the outlier detector's
//! failure percentage.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::breaker::{Cooldown, OpenDuration, WarmUp, WarmUpMode};
use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, EndpointOutcome};
use tripline::outlier::{FailurePercentageConfig, OutlierConfig};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, State, WindowConfig,
};

const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(50);

fn reaches(count: u64, calls: u64, t: f64) -> bool {
    count as f64 / calls as f64 >= t
}

/// A threshold in (0, 1]: an exact fraction `a / b`, one ulp beside it, or
/// any float.
fn threshold() -> impl Strategy<Value = f64> {
    let fraction = (1u32..=60, 1u32..=60).prop_map(|(a, b)| {
        let (a, b) = (a.min(b), a.max(b));
        f64::from(a) / f64::from(b)
    });
    prop_oneof![
        3 => fraction.clone(),
        1 => fraction.clone().prop_map(|t| f64::from_bits(t.to_bits() + 1).min(1.0)),
        1 => fraction.prop_map(|t| f64::from_bits(t.to_bits() - 1)),
        1 => 1e-9f64..=1.0,
    ]
}

/// `calls` in `1..=max`, `count` in `0..=calls`, and a threshold that is
/// most often the rate `count / calls` itself written as another fraction
/// (`2k / 3k` for 2 in 3), or one ulp beside it: the boundary where a
/// rounded threshold decides wrong.
fn case(max: u32) -> impl Strategy<Value = (u32, u32, f64)> {
    (1..=max)
        .prop_flat_map(|n| (Just(n), 0..=n, 1u32..=7, 0u8..4))
        .prop_flat_map(|(n, f, k, nudge)| {
            let on = f64::from(f.max(1) * k) / f64::from(n * k);
            let t = match nudge {
                0 | 1 => on,
                2 => f64::from_bits(on.to_bits() + 1).min(1.0),
                _ => f64::from_bits(on.to_bits() - 1),
            };
            (
                Just(n),
                Just(f),
                prop_oneof![4 => Just(t), 1 => threshold()],
            )
        })
}

fn config(n: u32, t: f64) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        window: WindowConfig::Count { size: n },
        minimum_calls: n,
        failure_rate_threshold: t,
        open_duration: OpenDuration::Fixed(Duration::from_secs(1)),
        max_half_open_duration: None,
        ..Default::default()
    }
}

fn build(config: CircuitBreakerConfig) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

/// `n - bad` good calls, then `bad` bad ones: the rate only rises, so the
/// last call decides.
fn feed(
    b: &CircuitBreaker,
    n: u64,
    bad: u64,
    good: (Outcome, Duration),
    worse: (Outcome, Duration),
) {
    for i in 0..n {
        let (o, d) = if i < n - bad { good } else { worse };
        if let Ok(p) = b.try_acquire() {
            p.record(o, d);
        }
    }
}

/// Trips, waits out the open duration, and closes with `successes` probes.
fn trip_and_recover(b: &CircuitBreaker, clock: &ManualClock) {
    b.open_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    while b.state() != State::Closed {
        b.try_acquire().unwrap().record(Outcome::Success, FAST);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_closed_state_trips_exactly_at_the_failure_rate((n, f, t) in case(60)) {
        let (b, _) = build(config(n, t));
        feed(&b, n.into(), f.into(), (Outcome::Success, FAST), (Outcome::Failure, FAST));
        prop_assert_eq!(b.state() == State::Open, reaches(f.into(), n.into(), t));
    }

    #[test]
    fn the_closed_state_trips_exactly_at_the_slow_call_rate((n, s, t) in case(60)) {
        let (b, _) = build(CircuitBreakerConfig {
            failure_rate_threshold: 1.0,
            slow_call_duration: Some(Duration::from_millis(10)),
            slow_call_rate_threshold: t,
            ..config(n, 1.0)
        });
        feed(&b, n.into(), s.into(), (Outcome::Success, FAST), (Outcome::Success, SLOW));
        prop_assert_eq!(b.state() == State::Open, reaches(s.into(), n.into(), t));
    }

    #[test]
    fn a_permits_round_reopens_exactly_at_its_failure_rate((c, f, t) in case(40)) {
        let (b, clock) = build(CircuitBreakerConfig {
            half_open: HalfOpenPolicy::Permits { calls: c, failure_rate_threshold: t },
            ..config(100, 0.5)
        });
        b.open_for(Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        feed(&b, c.into(), f.into(), (Outcome::Success, FAST), (Outcome::Failure, FAST));
        let reopened = reaches(f.into(), c.into(), t);
        prop_assert_eq!(b.state(), if reopened { State::Open } else { State::Closed });
    }

    #[test]
    fn a_ramp_step_fails_exactly_at_its_failure_rate((n, f, t) in case(40)) {
        let (n, f) = (u64::from(n), u64::from(f));
        let (b, clock) = build(CircuitBreakerConfig {
            half_open: HalfOpenPolicy::Ramp {
                steps: vec![1.0],
                step_duration: Duration::from_secs(1),
                failure_rate_threshold: t,
                minimum_calls_per_step: 1,
            },
            ..config(100, 0.5)
        });
        b.open_for(Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        feed(&b, n, f, (Outcome::Success, FAST), (Outcome::Failure, FAST));
        // A failing step reopens as soon as it fails; a passing one closes
        // when it is judged, at the end of its duration.
        let reopened = b.state() == State::Open;
        prop_assert_eq!(reopened, reaches(f, n, t));
        if !reopened {
            clock.advance(Duration::from_secs(1));
            let _ = b.try_acquire();
            prop_assert_eq!(b.state(), State::Closed);
        }
    }

    #[test]
    fn the_cooldown_trips_exactly_at_its_stricter_rate((n, f, c) in case(60), t in threshold()) {
        // The case's threshold is the cooldown's, at most the normal one.
        let cooldown = c.min(t);
        let (b, clock) = build(CircuitBreakerConfig {
            cooldown: Some(Cooldown { duration: Duration::from_secs(60), failure_rate_threshold: cooldown }),
            half_open: HalfOpenPolicy::Consecutive { successes: 1 },
            ..config(n, t)
        });
        trip_and_recover(&b, &clock);
        feed(&b, n.into(), f.into(), (Outcome::Success, FAST), (Outcome::Failure, FAST));
        prop_assert_eq!(b.state() == State::Open, reaches(f.into(), n.into(), cooldown));
    }

    #[test]
    fn a_relaxed_warm_up_trips_exactly_at_its_interpolated_rate(
        (n, f, t) in case(60), elapsed in prop_oneof![Just(100u64), 0u64..=100],
    ) {
        let length = Duration::from_secs(100);
        let (b, clock) = build(CircuitBreakerConfig {
            warm_up: Some(WarmUp { duration: length, mode: WarmUpMode::Relaxed }),
            ..config(n, t)
        });
        clock.advance(Duration::from_secs(elapsed));
        feed(&b, n.into(), f.into(), (Outcome::Success, FAST), (Outcome::Failure, FAST));
        // Documented: from 100% at the start, linearly to the threshold.
        let left = (100 - elapsed) as f64 / 100.0;
        let relaxed = (t + (1.0 - t) * left).min(1.0);
        prop_assert_eq!(b.state() == State::Open, reaches(f.into(), n.into(), relaxed));
    }

    #[test]
    fn failure_percentage_ejects_exactly_at_its_threshold(
        requests in 1u64..=60, f in 0u64..=60, percent in 1u32..=100,
    ) {
        let f = f.min(requests);
        let clock = ManualClock::new();
        let c = Cluster::builder()
            .name("svc")
            .balancer(Balancer::RoundRobin)
            .endpoints((0..3).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
            .breaker(CircuitBreakerConfig {
                window: WindowConfig::Count { size: 30_000 },
                minimum_calls: 30_000,
                ..Default::default()
            })
            .outlier(OutlierConfig {
                max_ejection_percent: 100,
                consecutive_failures: None,
                consecutive_gateway_failures: None,
                consecutive_local_origin_failures: None,
                success_rate: None,
                failure_percentage: Some(FailurePercentageConfig {
                    threshold_percent: percent,
                    minimum_hosts: 3,
                    request_volume: u32::try_from(requests).unwrap(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .panic_threshold_percent(0)
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut failed = 0;
        for _ in 0..3 * requests {
            let lease = c.select().unwrap();
            let bad = lease.endpoint().id().as_str() == "e0" && failed < f;
            failed += u64::from(bad);
            lease.record(if bad { EndpointOutcome::GatewayFailure } else { EndpointOutcome::Success });
        }
        c.analyze();
        let ejected = c.endpoint("e0").unwrap().is_ejected();
        prop_assert_eq!(ejected, 100 * f >= u64::from(percent) * requests);
    }
}
