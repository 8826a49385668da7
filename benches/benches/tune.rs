//! `tripline tune`: reading a proxy access log (lines per second, one
//! core) and replaying recorded traffic through one breaker config
//! (replayed calls per second, one core). A day at 200 requests/s is
//! 17.28 M calls; the tuning time of a grid is its size × one config's
//! replay ÷ the cores (benches/README.md).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tripline::{CircuitBreakerConfig, WindowConfig};
use tripline_sim::tune::outage::Outage;
use tripline_sim::tune::read::{ReadOptions, read};
use tripline_sim::tune::synth::{Spec, write};
use tripline_sim::tune::{outage, replay};

fn log(seconds: u64, rate: u32) -> Vec<u8> {
    let spec = Spec {
        seconds,
        rate,
        outages: vec![(seconds / 2, seconds / 2 + 120, false)],
        ..Spec::default()
    };
    let mut out = Vec::new();
    write(&spec, &mut out).expect("in memory");
    out
}

fn bench(c: &mut Criterion) {
    let bytes = log(500, 200);
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut g = c.benchmark_group("tune");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(lines));
    g.bench_function("read proxy log lines", |b| {
        b.iter(|| read(black_box(&bytes[..]), &ReadOptions::default()).expect("readable"))
    });
    // An hour at 200 requests/s, replayed through one config.
    let traffic = read(&log(3600, 200)[..], &ReadOptions::default()).expect("readable");
    let (_, outages): (_, Vec<Outage>) = outage::detect(&traffic);
    let config = CircuitBreakerConfig {
        window: WindowConfig::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
        minimum_calls: 100,
        failure_rate_threshold: 0.2,
        ..CircuitBreakerConfig::default()
    };
    g.throughput(Throughput::Elements(traffic.calls()));
    g.bench_function("replay calls through one config", |b| {
        b.iter(|| replay::run(black_box(&traffic), &outages, &config, 200.0).expect("valid"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
