//! Cluster, outlier and strategy configs: TOML round trips, defaults, and
//! bad input refused with an error naming what is wrong.
#![cfg(feature = "serde")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::cluster::{
    Balancer, BroadcastConfig, Cluster, ClusterConfig, ClusterStrategy, EndpointConfig,
    FailbackConfig, FailoverConfig, ForkingConfig, FsyncPolicy,
};
use tripline::outlier::OutlierConfig;
use tripline::retry::RetryBackoff;

const FULL: &str = r#"
name = "inventory"
balancer = "least_outstanding"
panic_threshold_percent = 40
endpoints = [
    { id = "inv-1", address = "10.0.0.1:8080", weight = 3 },
    { id = "inv-2", address = "10.0.0.2:8080" },
]

[breaker]
name = "inventory"
minimum_calls = 10
window = { kind = "count", size = 50 }

[outlier]
interval = "5s"
base_ejection_time = "15s"
max_ejection_time = "2m"
max_ejection_time_jitter = "3s"
max_ejection_percent = 50
always_eject_one = true
split_external_local_origin_errors = true
consecutive_failures = { threshold = 4, enforcing_percent = 100 }
consecutive_gateway_failures = { threshold = 3, enforcing_percent = 0 }
consecutive_local_origin_failures = { threshold = 2 }
success_rate = { minimum_hosts = 3, request_volume = 20, stdev_factor = 1.5, enforcing_percent = 80 }
failure_percentage = { threshold_percent = 70, minimum_hosts = 2, request_volume = 10 }
"#;

#[test]
fn a_full_cluster_config_parses_and_builds() {
    let config: ClusterConfig = toml::from_str(FULL).unwrap();
    assert_eq!(config.balancer, Balancer::LeastOutstanding);
    assert_eq!(
        config.endpoints[0],
        EndpointConfig::new("inv-1", "10.0.0.1:8080").weight(3)
    );
    assert_eq!(config.endpoints[1].weight, 1, "weight defaults to 1");
    let o = config.outlier.clone().unwrap();
    assert_eq!(o.interval, Duration::from_secs(5));
    assert_eq!(o.max_ejection_time, Duration::from_secs(120));
    assert_eq!(
        o.consecutive_local_origin_failures
            .unwrap()
            .enforcing_percent,
        100
    );
    assert_eq!(o.success_rate.unwrap().stdev_factor, 1.5);
    let cluster = Cluster::try_new(config.clone()).unwrap();
    assert_eq!(cluster.name(), "inventory");
    assert_eq!(cluster.outlier_config(), Some(&o));
    assert_eq!(cluster.breaker_config().minimum_calls, 10);
    assert_eq!(
        cluster.endpoint("inv-1").unwrap().breaker().name(),
        "inventory:inv-1"
    );
    // Round trip.
    let back: ClusterConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
    assert_eq!(back, config);
}

#[test]
fn strategy_configs_parse_with_their_defaults() {
    let f: FailoverConfig = toml::from_str("retries = 1\nidempotent = false").unwrap();
    assert_eq!(
        (f.retries, f.idempotent, f.backoff),
        (1, false, RetryBackoff::None)
    );
    let k: ForkingConfig = toml::from_str("forks = 3").unwrap();
    assert_eq!(k.forks, 3);
    let b: BroadcastConfig = toml::from_str("fail_percent = 25").unwrap();
    assert_eq!(b.fail_percent, Some(25));
    let fb: FailbackConfig = toml::from_str(
        r#"dir = "/var/lib/app/failback"
           max_retries = 5
           max_age = "30m"
           fsync = "never"
           backoff = { kind = "constant", delay = "2s" }"#,
    )
    .unwrap();
    assert_eq!(
        (fb.max_retries, fb.max_age, fb.fsync),
        (5, Duration::from_secs(1800), FsyncPolicy::Never)
    );
    assert!(fb.validate().is_ok());
    let s: ClusterStrategy = toml::from_str::<toml::Value>("s = \"forking\"").unwrap()["s"]
        .clone()
        .try_into()
        .unwrap();
    assert_eq!(s, ClusterStrategy::Forking);
}

/// The error of validating `toml` as a cluster config.
fn cluster_error(toml: &str) -> String {
    match toml::from_str::<ClusterConfig>(toml) {
        Ok(c) => c.validate().unwrap_err().to_string(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn percentages_outside_0_to_100_are_refused_by_name() {
    let cases = [
        (
            "panic_threshold_percent = 101",
            "invalid cluster config: `panic_threshold_percent` is a percentage and must be between 0 and 100, got 101",
        ),
        (
            "[outlier]\nmax_ejection_percent = 150",
            "invalid outlier config: `max_ejection_percent` is a percentage and must be between 0 and 100, got 150",
        ),
        (
            "[outlier]\nconsecutive_failures = { threshold = 5, enforcing_percent = 120 }",
            "invalid outlier config: `consecutive_failures.enforcing_percent` is a percentage and must be between 0 and 100, got 120",
        ),
        (
            "[outlier]\nsuccess_rate = { enforcing_local_origin_percent = 200 }",
            "invalid outlier config: `success_rate.enforcing_local_origin_percent` is a percentage and must be between 0 and 100, got 200",
        ),
        (
            "[outlier]\nfailure_percentage = { threshold_percent = 101 }",
            "invalid outlier config: `failure_percentage.threshold_percent` is a percentage and must be between 0 and 100, got 101",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(cluster_error(input), want, "{input}");
    }
    // A negative value cannot even be read, and the parser says where.
    let negative = cluster_error("[outlier]\nmax_ejection_percent = -5");
    assert!(negative.contains("max_ejection_percent"), "{negative}");
    let err = BroadcastConfig {
        fail_percent: Some(300),
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.field, "fail_percent");
}

#[test]
fn other_bad_values_are_refused_by_name() {
    let cases = [
        ("name = \"\"", "`name` must not be empty"),
        (
            "endpoints = [{ id = \"\", address = \"x\" }]",
            "`endpoints.id` must not be empty (address `x`)",
        ),
        (
            "endpoints = [{ id = \"a\", address = \"x\", weight = 0 }]",
            "`endpoints.weight` must be between 1 and 10000, got 0 (endpoint `a`)",
        ),
        (
            "endpoints = [{ id = \"a\", address = \"x\" }, { id = \"a\", address = \"y\" }]",
            "`endpoints.id` must be unique, `a` appears twice",
        ),
        (
            "[outlier]\ninterval = \"0s\"",
            "`interval` must be between 1ms and 1h, got 0s",
        ),
        (
            "[outlier]\nbase_ejection_time = \"1m\"\nmax_ejection_time = \"30s\"",
            "`max_ejection_time` must be at least `base_ejection_time` (1m), got 30s",
        ),
        (
            "[outlier]\nmax_ejection_time_jitter = \"30days\"",
            "`max_ejection_time_jitter` must be at most 1day, got 30days",
        ),
        (
            "[outlier]\nconsecutive_failures = { threshold = 0 }",
            "`consecutive_failures.threshold` must be between 1 and 1000000, got 0",
        ),
        (
            "[outlier]\nsuccess_rate = { stdev_factor = -1.0 }",
            "`success_rate.stdev_factor` must be a finite number ≥ 0, got -1",
        ),
        (
            "[outlier]\nfailure_percentage = { request_volume = 0 }",
            "`failure_percentage.request_volume` must be at least 1, got 0",
        ),
        (
            "[breaker]\nfailure_rate_threshold = 2.0",
            "`breaker` is invalid: `failure_rate_threshold`",
        ),
    ];
    for (input, want) in cases {
        let got = cluster_error(input);
        assert!(got.contains(want), "{input}: {got}");
    }
    let unknown = cluster_error("balancer = \"round_robin\"\nbalancr = \"x\"");
    assert!(unknown.contains("unknown field `balancr`"), "{unknown}");
    let unknown = cluster_error("balancer = \"fastest\"");
    assert!(unknown.contains("unknown variant `fastest`"), "{unknown}");
    assert_eq!(
        FailoverConfig {
            retries: 32,
            ..Default::default()
        }
        .validate()
        .unwrap_err()
        .to_string(),
        "invalid failover config: `retries` must be at most 31, got 32"
    );
    assert_eq!(
        ForkingConfig { forks: 33 }
            .validate()
            .unwrap_err()
            .to_string(),
        "invalid forking config: `forks` must be at most 32, got 33"
    );
    let o = OutlierConfig {
        max_ejection_percent: 101,
        ..Default::default()
    };
    assert_eq!(
        OutlierConfig::try_new(o).unwrap_err().field,
        "max_ejection_percent"
    );
}
