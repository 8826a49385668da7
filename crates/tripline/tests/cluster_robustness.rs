//! No outlier-detection config and no sequence of outcomes, clock jumps,
//! analyses and endpoint changes panics a cluster: hostile values (0,
//! u32::MAX, NaN, infinite, zero and ten-thousand-year durations) are
//! refused with an error or built; a built cluster then keeps its health
//! counts consistent whatever happens.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, EndpointOutcome};
use tripline::outlier::{
    ConsecutiveConfig, FailurePercentageConfig, OutlierConfig, SuccessRateConfig,
};
use tripline::{CircuitBreakerConfig, WindowConfig};

/// `valid`, or in a hostile config one value in three from `hostile`.
fn pick<T: std::fmt::Debug + Clone + 'static>(
    h: bool,
    valid: impl Strategy<Value = T> + 'static,
    hostile: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    if h {
        prop_oneof![2 => valid, 1 => hostile].boxed()
    } else {
        valid.boxed()
    }
}

fn percent(h: bool) -> BoxedStrategy<u32> {
    pick(h, 0..=100u32, prop_oneof![Just(101u32), Just(u32::MAX)])
}

fn small(h: bool) -> BoxedStrategy<u32> {
    pick(h, 1..20u32, prop_oneof![Just(0u32), Just(u32::MAX)])
}

fn duration(h: bool) -> BoxedStrategy<Duration> {
    pick(
        h,
        (1..60_000u64).prop_map(Duration::from_millis),
        prop_oneof![
            Just(Duration::ZERO),
            Just(Duration::from_secs(u64::MAX / 4)),
            Just(Duration::MAX),
        ],
    )
}

fn factor(h: bool) -> BoxedStrategy<f64> {
    pick(
        h,
        0.5..5.0f64,
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0)],
    )
}

fn outlier(h: bool) -> impl Strategy<Value = OutlierConfig> {
    (
        (duration(h), duration(h), duration(h), duration(h)),
        (percent(h), any::<bool>(), any::<bool>()),
        (
            prop::option::of((small(h), percent(h))),
            prop::option::of((small(h), percent(h))),
            prop::option::of((small(h), small(h), factor(h), percent(h))),
            prop::option::of((percent(h), small(h), small(h), percent(h))),
        ),
    )
        .prop_map(
            move |(
                (interval, base, max, jitter),
                (max_percent, always_one, split),
                (consecutive, gateway, success_rate, failure_percentage),
            )| {
                // A sane config has base ≤ max and a short interval.
                let (base, max) = if h || base <= max {
                    (base, max)
                } else {
                    (max, base)
                };
                let interval = if h {
                    interval
                } else {
                    interval.min(Duration::from_secs(10))
                };
                OutlierConfig {
                    interval,
                    base_ejection_time: base,
                    max_ejection_time: max,
                    max_ejection_time_jitter: jitter,
                    max_ejection_percent: max_percent,
                    always_eject_one: always_one,
                    split_external_local_origin_errors: split,
                    consecutive_failures: consecutive.map(|(threshold, enforcing_percent)| {
                        ConsecutiveConfig {
                            threshold,
                            enforcing_percent,
                        }
                    }),
                    consecutive_gateway_failures: gateway.map(|(threshold, enforcing_percent)| {
                        ConsecutiveConfig {
                            threshold,
                            enforcing_percent,
                        }
                    }),
                    success_rate: success_rate.map(
                        |(minimum_hosts, request_volume, stdev_factor, p)| SuccessRateConfig {
                            minimum_hosts,
                            request_volume,
                            stdev_factor,
                            enforcing_percent: p,
                            enforcing_local_origin_percent: p,
                        },
                    ),
                    failure_percentage: failure_percentage.map(
                        |(threshold_percent, minimum_hosts, request_volume, p)| {
                            FailurePercentageConfig {
                                threshold_percent,
                                minimum_hosts,
                                request_volume,
                                enforcing_percent: p,
                                enforcing_local_origin_percent: p,
                            }
                        },
                    ),
                    ..Default::default()
                }
            },
        )
}

#[derive(Clone, Debug)]
enum Action {
    Call(EndpointOutcome),
    Advance(Duration),
    Analyze,
    SetWeight(usize, u32),
    Add(usize),
    Remove(usize),
    MarkUnhealthy(usize, bool),
}

fn action() -> impl Strategy<Value = Action> {
    let outcome = prop::sample::select(vec![
        EndpointOutcome::Success,
        EndpointOutcome::Ignored,
        EndpointOutcome::UpstreamFailure,
        EndpointOutcome::GatewayFailure,
        EndpointOutcome::ConnectFailure,
        EndpointOutcome::LocalOriginFailure,
    ]);
    prop_oneof![
        30 => outcome.prop_map(Action::Call),
        6 => duration(true).prop_map(Action::Advance),
        3 => Just(Action::Analyze),
        1 => (0..8usize, prop_oneof![0..5u32, Just(u32::MAX)]).prop_map(|(i, w)| Action::SetWeight(i, w)),
        1 => (0..8usize).prop_map(Action::Add),
        1 => (0..8usize).prop_map(Action::Remove),
        1 => (0..8usize, any::<bool>()).prop_map(|(i, u)| Action::MarkUnhealthy(i, u)),
    ]
}

fn id(i: usize) -> String {
    format!("e{i}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_outlier_config_and_no_call_sequence_panics(
        (config, panic_percent) in any::<bool>().prop_flat_map(|h| (outlier(h), percent(h))),
        balancer in prop::sample::select(vec![
            Balancer::RoundRobin,
            Balancer::WeightedRandom,
            Balancer::LeastOutstanding,
            Balancer::PowerOfTwoChoices,
            Balancer::WeightedRoundRobin,
        ]),
        endpoints in 1..6usize,
        actions in prop::collection::vec(action(), 0..150),
    ) {
        let clock = ManualClock::new();
        let built = Cluster::builder()
            .name("svc")
            .balancer(balancer)
            .endpoints((0..endpoints).map(|i| EndpointConfig::new(id(i), format!("{}:80", id(i)))))
            .breaker(CircuitBreakerConfig {
                window: WindowConfig::Count { size: 10 },
                minimum_calls: 5,
                ..Default::default()
            })
            .outlier(config)
            .panic_threshold_percent(panic_percent)
            .clock(clock.clone())
            .seed(5)
            .build();
        // `ROBUSTNESS_STATS=1 ... -- --nocapture | sort | uniq -c` shows how
        // many generated configs get to run.
        if std::env::var_os("ROBUSTNESS_STATS").is_some() {
            match &built {
                Ok(_) => eprintln!("BUILT"),
                Err(e) => eprintln!("REFUSED {e}"),
            }
        }
        let Ok(cluster) = built else {
            return Ok(());
        };
        for a in &actions {
            match a {
                Action::Call(outcome) => {
                    if let Ok(lease) = cluster.select() {
                        lease.record(*outcome);
                    }
                }
                Action::Advance(d) => {
                    clock.advance(*d);
                }
                Action::Analyze => cluster.analyze(),
                Action::SetWeight(i, w) => {
                    let _ = cluster.set_weight(&id(*i), *w);
                }
                Action::Add(i) => {
                    let _ = cluster.add_endpoint(EndpointConfig::new(id(*i), format!("{}:80", id(*i))));
                }
                Action::Remove(i) => {
                    cluster.remove_endpoint(&id(*i));
                }
                Action::MarkUnhealthy(i, u) => {
                    cluster.mark_unhealthy(&id(*i), *u);
                }
            }
            let h = cluster.health();
            prop_assert_eq!(h.endpoints, cluster.len());
            prop_assert!(h.ejected <= h.endpoints, "{h:?}");
            prop_assert!(h.routable <= h.endpoints, "{h:?}");
        }
    }
}
