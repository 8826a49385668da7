//! A tight loop over one breaker path, for instruction counting under
//! callgrind (`scripts/instruction-budget`): instruction counts are
//! repeatable on a noisy machine where nanoseconds are not.
//!
//! `hotloop PATH N` runs PATH N times: `closed_count`, `closed_time`,
//! `call` (the `call(|| ..)` entry point with slow-call timing on) or
//! `rejected`.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

fn breaker(window: WindowConfig) -> Option<CircuitBreaker> {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window,
            slow_call_duration: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .clock(ManualClock::new())
        .build()
        .ok()
}

fn acquire_record(b: &CircuitBreaker) {
    if let Ok(p) = b.try_acquire() {
        p.record(black_box(Outcome::Success), Duration::ZERO);
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_default();
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let count = WindowConfig::Count { size: 100 };
    let time = WindowConfig::Time {
        length: Duration::from_secs(10),
        buckets: 10,
    };
    let Some(b) = breaker(if path == "closed_time" { time } else { count }) else {
        return ExitCode::FAILURE;
    };
    match path.as_str() {
        "closed_count" | "closed_time" => (0..n).for_each(|_| acquire_record(&b)),
        "call" => (0..n).for_each(|_| {
            black_box(b.call(|| Ok::<u64, ()>(black_box(1)))).ok();
        }),
        "rejected" => {
            b.open_for(Duration::from_secs(3600));
            (0..n).for_each(|_| acquire_record(&b));
        }
        _ => {
            eprintln!("usage: hotloop closed_count|closed_time|call|rejected N");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
