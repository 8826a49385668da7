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

/// Issue #3: the closed-path cost with backoff + jitter, ramp-up probing,
/// hysteresis, cooldown and warm-up configured, against the plain breaker;
/// and with the learned slow-call baseline (which samples every success).
fn adaptive_features(c: &mut Criterion) {
    use tripline::HalfOpenPolicy;
    use tripline::breaker::{
        Backoff, Cooldown, Jitter, OpenDuration, SlowCallBaseline, WarmUp, WarmUpMode,
    };
    let adaptive = |window| CircuitBreakerConfig {
        window,
        slow_call_duration: Some(Duration::from_secs(1)),
        open_duration: OpenDuration::Backoff(Backoff {
            initial: Duration::from_secs(5),
            multiplier: 2.0,
            max: Duration::from_secs(60),
            jitter: Jitter::Proportional(0.2),
        }),
        half_open: HalfOpenPolicy::Ramp {
            steps: vec![0.01, 0.05, 0.1, 0.3, 1.0],
            step_duration: Duration::from_secs(1),
            failure_rate_threshold: 0.2,
            minimum_calls_per_step: 1,
        },
        min_state_duration: Some(Duration::from_secs(2)),
        cooldown: Some(Cooldown {
            duration: Duration::from_secs(30),
            failure_rate_threshold: 0.3,
        }),
        warm_up: Some(WarmUp {
            duration: Duration::from_secs(3600),
            mode: WarmUpMode::Relaxed,
        }),
        ..Default::default()
    };
    let learning = |window| CircuitBreakerConfig {
        window,
        slow_call: Some(SlowCallBaseline {
            baseline_quantile: 0.99,
            factor: 3.0,
            floor: Duration::from_millis(1),
            ceiling: Duration::from_secs(2),
            max_step: 0.1,
            min_samples: 100,
        }),
        ..Default::default()
    };
    let mut g = c.benchmark_group("adaptive");
    for (name, window) in [("count", count()), ("time", time())] {
        let plain = tripline_breaker(window);
        g.bench_function(format!("plain_{name}"), |b| {
            b.iter(|| tripline_call(&plain))
        });
        let on = CircuitBreaker::try_new(adaptive(window)).expect("valid");
        g.bench_function(format!("features_{name}"), |b| {
            b.iter(|| tripline_call(&on))
        });
        let learn = CircuitBreaker::try_new(learning(window)).expect("valid");
        g.bench_function(format!("baseline_{name}"), |b| {
            b.iter(|| tripline_call(&learn))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = closed_path, rejected_path, two_threads, adaptive_features
}
criterion_main!(benches);
