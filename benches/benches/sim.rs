//! The simulator's engine: simulated calls per second on one core.
//!
//! Each iteration runs a whole scenario (building the breakers included)
//! and criterion reports throughput in simulated calls per second. The
//! target is ≥ 5 million/s for a single breaker.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tripline_sim::{Plan, Scenario, engine};

/// A scenario of `calls` calls per replica at 1 000 calls/s with an outage,
/// a slow spell, a flaky spell and blips, so every engine path runs:
/// trips, probes, overlapping slow calls, seeded draws.
fn scenario(replicas: u32, latency: &str, calls: u64) -> Scenario {
    let rate = 1000.0 / f64::from(replicas);
    let secs = calls as f64 / rate;
    let at = |f: f64| format!("{}s", (secs * f).round());
    let src = format!(
        r#"
        duration = "{total}"
        seed = 7
        [traffic]
        rate = {rate}
        latency = "{latency}"
        timeout = "1s"
        replicas = {replicas}
        [[fault]]
        name = "down"
        start = "{a}"
        end = "{b}"
        [[fault]]
        name = "slow"
        start = "{c}"
        end = "{d}"
        kind = "latency"
        latency = "700ms"
        [[fault]]
        name = "flaky"
        start = "{e}"
        end = "{f}"
        rate = 0.3
        [[fault]]
        name = "blips"
        at = ["{g}", "{h}"]
        expect_trip = false
        [[breaker]]
        name = "b"
        window = {{ kind = "time", length = "10s", buckets = 10 }}
        minimum_calls = 20
        slow_call_duration = "500ms"
        slow_call_rate_threshold = 0.8
        open_duration = {{ initial = "2s", multiplier = 2.0, max = "16s", jitter = 0.2 }}
        half_open = {{ policy = "permits", calls = 5, failure_rate_threshold = 0.2 }}
        "#,
        total = at(1.0),
        a = at(0.2),
        b = at(0.4),
        c = at(0.5),
        d = at(0.6),
        e = at(0.7),
        f = at(0.8),
        g = at(0.9),
        h = at(0.95),
    );
    Scenario::from_toml("bench.toml", &src).expect("valid bench scenario")
}

fn engine_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim");
    let cases = [
        ("single_breaker_zero_latency", 1, "0s", 1_000_000),
        ("single_breaker_20ms", 1, "20ms", 1_000_000),
        ("replicas200_20ms", 200, "20ms", 5_000),
    ];
    for (name, replicas, latency, calls) in cases {
        let sc = scenario(replicas, latency, calls);
        let plan = Plan::new(&sc);
        let config = sc.breakers[0].config.clone();
        g.throughput(Throughput::Elements(calls * u64::from(replicas)));
        g.bench_function(name, |b| {
            b.iter(|| black_box(engine::run(&sc, &plan, &config).expect("valid config")))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = engine_throughput
}
criterion_main!(benches);
