//! tripline-only variants of the closed path: the cost of the adaptive
//! features, and after live reshapes of the window. The comparison with the peer crates — closed,
//! rejected, two-thread, failure-heavy, tower and pipeline workloads — is
//! `benches/peers.rs`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

fn plain_config(window: WindowConfig) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        window,
        slow_call_duration: Some(Duration::from_secs(1)),
        ..Default::default()
    }
}

fn tripline_breaker(window: WindowConfig) -> CircuitBreaker {
    CircuitBreaker::try_new(plain_config(window)).expect("valid config")
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

#[inline]
fn tripline_call(b: &CircuitBreaker) {
    match b.try_acquire() {
        Ok(p) => p.record(black_box(Outcome::Success), Duration::ZERO),
        Err(e) => {
            black_box(e);
        }
    }
}

/// The adaptive features: the closed-path cost with backoff + jitter, ramp-up probing,
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

/// The closed-path cost after live reconfigurations that change the
/// window's shape: a reshaped breaker reaches its window through one more
/// indirection, and that cost must not grow with the number of reshapes.
/// Every case ends on the same 100-call count window (an even number of
/// round trips through a time window).
fn reshaped(c: &mut Criterion) {
    let mut g = c.benchmark_group("reshaped");
    for reshapes in [0usize, 2, 3_000] {
        let b = tripline_breaker(count());
        for i in 0..reshapes {
            let window = if i % 2 == 0 { time() } else { count() };
            b.reconfigure(plain_config(window)).expect("valid config");
        }
        g.bench_function(format!("closed_count_after_{reshapes}"), |bench| {
            bench.iter(|| tripline_call(&b))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = adaptive_features, reshaped
}
criterion_main!(benches);
