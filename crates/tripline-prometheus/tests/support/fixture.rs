//! An exporter holding one of every source kind, each driven so that its
//! families have something to say.
#![allow(dead_code)] // each test binary uses a part

use std::time::Duration;

use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::cluster::{Cluster, EndpointConfig, EndpointOutcome, Failback, FailbackConfig};
use tripline::outlier::{ConsecutiveConfig, OutlierConfig};
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::retry::{Retry, RetryBackoff, RetryConfig};
use tripline::{
    AdaptiveThrottle, AdaptiveThrottleConfig, CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy,
    ManualClock, WindowConfig,
};
use tripline_prometheus::{Detail, Exporter};

pub struct Fixture {
    pub exporter: Exporter,
    pub clock: ManualClock,
    pub breaker: CircuitBreaker,
    pub registry: BreakerRegistry<String>,
    pub cluster: Cluster,
    _bulkhead_slot: tripline::bulkhead::OwnedBulkheadPermit,
    _dir: tempfile::TempDir,
}

pub fn breaker_config(name: &str) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: name.into(),
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 4,
        failure_rate_threshold: 0.5,
        slow_call_duration: Some(Duration::from_secs(1)),
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        max_half_open_duration: Some(Duration::from_secs(30)),
        ..Default::default()
    }
}

pub fn everything(exporter: Exporter) -> Fixture {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(breaker_config("payments"))
        .clock(clock.clone())
        .build()
        .unwrap();
    exporter.register_breaker(&breaker, Detail::Full).unwrap();
    let timed = exporter.timed(&breaker);
    for ms in [5, 20, 1500] {
        let _ = timed.call(|| {
            clock.advance(Duration::from_millis(ms));
            Ok::<_, ()>(())
        });
    }
    for _ in 0..4 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    let _ = breaker.call(|| Ok::<_, ()>(())); // rejected

    let registry = BreakerRegistry::<String>::builder(RegistryConfig {
        breaker: breaker_config("tenant"),
        ..Default::default()
    })
    .clock(clock.clone())
    .build()
    .unwrap();
    exporter
        .register_registry(&registry, Detail::Essential)
        .unwrap();
    for key in ["a", "b", "c\"quoted\\\nnewline"] {
        let _ = registry
            .get(&key.to_string())
            .unwrap()
            .call(|| Ok::<_, ()>(()));
    }
    registry.get(&"b".to_string()).unwrap().force_open();

    let budget = RetryBudget::with_clock(
        RetryBudgetConfig {
            ratio: 0.5,
            min_retries_per_second: 0.0,
            ..Default::default()
        },
        clock.clone(),
    )
    .unwrap();
    let retry = Retry::builder()
        .config(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .budget(budget.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let _ = retry.call(|_| Err::<(), _>("flaky"));
    exporter.register_retry("search", &retry).unwrap();
    exporter.register_budget("search", &budget).unwrap();

    let bulkhead = Bulkhead::try_new(BulkheadConfig {
        max_concurrent: 2,
        ..Default::default()
    })
    .unwrap();
    let held = bulkhead.try_acquire_owned().unwrap();
    exporter.register_bulkhead("inventory", &bulkhead).unwrap();

    let throttle = AdaptiveThrottle::builder()
        .config(AdaptiveThrottleConfig {
            name: "recommendations".into(),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..50 {
        if let Ok(p) = throttle.try_acquire() {
            p.rejected_by_backend();
        }
    }
    exporter.register_throttle(&throttle).unwrap();

    let cluster = Cluster::builder()
        .name("geo")
        .endpoints(["a", "b", "c", "d"].map(|id| EndpointConfig::new(id, format!("{id}:80"))))
        .breaker(breaker_config("geo"))
        .outlier(OutlierConfig {
            max_ejection_percent: 50,
            consecutive_gateway_failures: Some(ConsecutiveConfig {
                threshold: 1,
                enforcing_percent: 100,
            }),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    exporter.register_cluster(&cluster, Detail::Full).unwrap();
    cluster
        .select()
        .unwrap()
        .record(EndpointOutcome::GatewayFailure);

    let dir = tempfile::tempdir().unwrap();
    let failback = Failback::builder(
        cluster.clone(),
        FailbackConfig {
            dir: dir.path().into(),
            ..Default::default()
        },
    )
    .clock(clock.clone())
    .deliver(|_, _: &[u8]| Err::<(), _>("unavailable"))
    .open()
    .unwrap();
    failback.submit(b"points=30").unwrap();
    clock.advance(Duration::from_secs(7));
    exporter.register_failback("points", &failback).unwrap();

    Fixture {
        exporter,
        clock,
        breaker,
        registry,
        cluster,
        _bulkhead_slot: held,
        _dir: dir,
    }
}
