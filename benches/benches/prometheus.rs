//! The Prometheus exporter: one scrape of a registry of 20 000
//! breakers (goal: ≤ 50 ms; its allocation, ≤ 16 MiB, is checked by
//! `crates/tripline-prometheus/tests/scrape_memory.rs`), and what the
//! optional duration histogram costs a call made through `TimedBreaker`
//! against the same call on the bare breaker (both on the production
//! clock). Plain breakers pay nothing for being exported: the exporter
//! reads them at scrape time, so the instruction budgets of the hot paths
//! (`scripts/instruction-budget`) do not involve this crate at all.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tripline::{CircuitBreaker, CircuitBreakerConfig};
use tripline_benches::scrape::{scrape as scrape_once, target};
use tripline_prometheus::http::Format;
use tripline_prometheus::{Detail, Exporter};

fn scrape(c: &mut Criterion) {
    let mut g = c.benchmark_group("prometheus/scrape_20k");
    g.sample_size(20);
    for (label, detail) in [
        ("essential", Detail::Essential),
        ("full", Detail::Full),
        ("aggregate", Detail::Aggregate),
    ] {
        let (registry, _breakers) = target(detail);
        for (fmt_label, format) in [
            ("openmetrics", Format::OpenMetrics),
            ("text", Format::PrometheusText),
        ] {
            if detail != Detail::Essential && format == Format::PrometheusText {
                continue;
            }
            g.bench_function(format!("{label}/{fmt_label}"), |b| {
                b.iter(|| black_box(scrape_once(&registry, format)))
            });
        }
    }
    g.finish();
}

fn timed_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("prometheus/call");
    let breaker = CircuitBreaker::try_new(CircuitBreakerConfig {
        name: "payments".into(),
        ..Default::default()
    })
    .expect("valid config");
    let exporter = Exporter::default();
    exporter
        .register_breaker(&breaker, Detail::Full)
        .expect("registered once");
    let timed = exporter.timed(&breaker);
    g.bench_function("bare", |b| {
        b.iter(|| black_box(breaker.call(|| Ok::<_, ()>(black_box(1u64))).unwrap_or(0)))
    });
    g.bench_function("timed", |b| {
        b.iter(|| black_box(timed.call(|| Ok::<_, ()>(black_box(1u64))).unwrap_or(0)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    targets = scrape, timed_call
}
criterion_main!(benches);
