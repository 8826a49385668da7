//! The cluster's hot path and its outlier analysis.
//!
//! * `cluster_select/<balancer>/<n>`: endpoint selection plus the chosen
//!   endpoint's breaker admission, as a custom strategy gets it
//!   ([`Cluster::select`]: an owned lease, dropped at once).
//! * `cluster_call/<balancer>/<n>`: a whole failfast call — selection,
//!   admission, the (empty) attempt, recording on the breaker and the
//!   outlier detector — as the strategies run it (borrowed permit, no
//!   reference counting). `least_outstanding_all_busy` holds a call on
//!   every endpoint first: that balancer's worst case, a full scan.
//! * `outlier/analysis_pass/1000`: one analysis pass (returns, success rate
//!   and failure percentage) over 1 000 endpoints that each saw 20
//!   requests in the interval; the recording is set-up, not timed.
//!
//! Everything on a `ManualClock` with outlier detection on; the breakers
//! never trip and nothing is ejected, so the figures are the steady state.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use tripline::clock::ManualClock;
use tripline::cluster::{Balancer, Cluster, EndpointConfig, EndpointOutcome, Failfast};
use tripline::outlier::{FailurePercentageConfig, OutlierConfig, SuccessRateConfig};

const BALANCERS: [Balancer; 4] = [
    Balancer::RoundRobin,
    Balancer::WeightedRandom,
    Balancer::LeastOutstanding,
    Balancer::PowerOfTwoChoices,
];

fn cluster(n: usize, balancer: Balancer) -> Cluster {
    Cluster::builder()
        .name("bench")
        .balancer(balancer)
        .endpoints((0..n).map(|i| {
            EndpointConfig::new(format!("e{i}"), format!("10.0.{}.{}:80", i / 250, i % 250))
                .weight(1 + (i % 3) as u32)
        }))
        .outlier(OutlierConfig {
            success_rate: Some(SuccessRateConfig {
                minimum_hosts: 5,
                request_volume: 10,
                ..Default::default()
            }),
            failure_percentage: Some(FailurePercentageConfig {
                minimum_hosts: 5,
                request_volume: 10,
                ..Default::default()
            }),
            ..Default::default()
        })
        .clock(ManualClock::new())
        .seed(11)
        .build()
        .expect("valid cluster")
}

fn selection(c: &mut Criterion) {
    let mut g = c.benchmark_group("cluster_select");
    for n in [10, 1000] {
        for balancer in BALANCERS {
            let cl = cluster(n, balancer);
            g.bench_function(BenchmarkId::new(balancer.as_str(), n), |b| {
                b.iter(|| black_box(cl.select().expect("an endpoint")))
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("cluster_call");
    // The closure alone, for reference.
    g.bench_function("bare", |b| {
        b.iter(|| black_box(Ok::<u32, ()>(black_box(1))))
    });
    for n in [10, 1000] {
        for balancer in BALANCERS {
            let ff = Failfast::new(cluster(n, balancer));
            g.bench_function(BenchmarkId::new(balancer.as_str(), n), |b| {
                b.iter(|| black_box(ff.call(|_, a| Ok::<_, ()>(black_box(a.number())))))
            });
        }
    }
    // Least-outstanding's worst case: every endpoint busy, so the scan
    // cannot stop early at an idle one.
    for n in [10, 1000] {
        let cl = cluster(n, Balancer::LeastOutstanding);
        // Lease until every endpoint has a call in flight (large clusters
        // sample, so some endpoints take a few rounds to be picked).
        let mut busy = Vec::new();
        while cl.endpoints().iter().any(|e| e.outstanding() == 0) {
            busy.push(cl.select().expect("an endpoint"));
        }
        let ff = Failfast::new(cl);
        g.bench_function(BenchmarkId::new("least_outstanding_all_busy", n), |b| {
            b.iter(|| black_box(ff.call(|_, a| Ok::<_, ()>(black_box(a.number())))))
        });
        drop(busy);
    }
    g.finish();
}

fn analysis(c: &mut Criterion) {
    let mut g = c.benchmark_group("outlier");
    let cl = cluster(1000, Balancer::RoundRobin);
    let record = || {
        for i in 0..20_000usize {
            let lease = cl.select().expect("an endpoint");
            // Round robin: call i goes to endpoint i % 1000, in round
            // i / 1000. Each endpoint fails once in its 20 calls (5 %):
            // statistics to compute, nobody to eject.
            let o = if (i % 1000 + i / 1000) % 20 == 0 {
                EndpointOutcome::UpstreamFailure
            } else {
                EndpointOutcome::Success
            };
            lease.record_elapsed(o, Duration::ZERO);
        }
    };
    g.bench_function(BenchmarkId::new("analysis_pass", 1000), |b| {
        b.iter_batched(record, |()| cl.analyze(), BatchSize::PerIteration)
    });
    assert_eq!(cl.health().ejected, 0, "steady state: nobody ejected");
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = selection, analysis
}
criterion_main!(benches);
