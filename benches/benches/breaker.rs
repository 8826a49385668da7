//! Closed path, rejected path and two-thread scaling of one breaker,
//! tripline against recloser in the same run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};
use tripline_benches::{parallel, work};

fn tripline_breaker(window: WindowConfig) -> CircuitBreaker {
    CircuitBreaker::try_new(CircuitBreakerConfig {
        window,
        slow_call_duration: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .expect("valid config")
}

fn count() -> WindowConfig {
    WindowConfig::Count { size: 100 }
}

fn time() -> WindowConfig {
    WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 10,
    }
}

fn recloser() -> recloser::Recloser {
    recloser::Recloser::custom()
        .closed_len(100)
        .error_rate(0.5)
        .build()
}

#[inline]
fn tripline_call(b: &CircuitBreaker) {
    match b.try_acquire() {
        Ok(p) => p.record(black_box(Outcome::Success), Duration::ZERO),
        Err(e) => {
            black_box(e);
        }
    }
}

#[inline]
fn recloser_call(r: &recloser::Recloser) {
    let _ = black_box(r.call(|| Ok::<u64, ()>(black_box(1))));
}

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed");
    g.bench_function("bare", |b| {
        b.iter(|| black_box(Ok::<u64, ()>(black_box(1))))
    });
    let tc = tripline_breaker(count());
    g.bench_function("tripline_count", |b| b.iter(|| tripline_call(&tc)));
    let tt = tripline_breaker(time());
    g.bench_function("tripline_time", |b| b.iter(|| tripline_call(&tt)));
    let tcall = tripline_breaker(count());
    g.bench_function("tripline_count_call", |b| {
        b.iter(|| black_box(tcall.call(|| Ok::<u64, ()>(black_box(1)))))
    });
    let r = recloser();
    g.bench_function("recloser", |b| b.iter(|| recloser_call(&r)));
    g.finish();

    let mut g = c.benchmark_group("closed_work");
    g.bench_function("bare", |b| b.iter(work));
    g.bench_function("tripline_count", |b| {
        b.iter(|| {
            tripline_call(&tc);
            work()
        })
    });
    g.bench_function("tripline_time", |b| {
        b.iter(|| {
            tripline_call(&tt);
            work()
        })
    });
    g.bench_function("recloser", |b| {
        b.iter(|| {
            recloser_call(&r);
            work()
        })
    });
    g.finish();
}

fn rejected_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("rejected");
    let t = tripline_breaker(count());
    t.open_for(Duration::from_secs(3600));
    g.bench_function("tripline", |b| b.iter(|| tripline_call(&t)));
    let r = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(Duration::from_secs(3600))
        .build();
    for _ in 0..4 {
        let _ = r.call(|| Err::<(), ()>(()));
    }
    g.bench_function("recloser", |b| b.iter(|| recloser_call(&r)));
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("threads{threads}_work"));
        g.bench_function("bare", |b| {
            b.iter_custom(|n| {
                parallel(threads, n, || {
                    work();
                })
            })
        });
        let tc = tripline_breaker(count());
        g.bench_function("tripline_count", |b| {
            b.iter_custom(|n| {
                parallel(threads, n, || {
                    tripline_call(&tc);
                    work();
                })
            })
        });
        let tt = tripline_breaker(time());
        g.bench_function("tripline_time", |b| {
            b.iter_custom(|n| {
                parallel(threads, n, || {
                    tripline_call(&tt);
                    work();
                })
            })
        });
        let r = recloser();
        g.bench_function("recloser", |b| {
            b.iter_custom(|n| {
                parallel(threads, n, || {
                    recloser_call(&r);
                    work();
                })
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = closed_path, rejected_path, two_threads
}
criterion_main!(benches);
