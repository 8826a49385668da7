//! CPU time per registry lookup on one and on two threads, read from each
//! thread's own scheduler statistics (`/proc/thread-self/schedstat`, Linux):
//! unlike wall time, it does not grow when other processes take the cores,
//! so it shows whether two threads looking up breakers slow each other
//! down (shared cache lines, locks) on a busy machine.
//!
//! `registry_scaling MODE THREADS N` runs N lookups per thread over the
//! 20 000 keys (50 services × 20 methods × 20 instances) and prints CPU ns per lookup. MODE is
//! `get_hot`, `get_spread`, `with_hot`, `with_spread` or `bare` (private
//! work, the no-sharing reference).

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreakerConfig, WindowConfig};

/// This thread's CPU time in nanoseconds, if the kernel exposes it.
fn thread_cpu_nanos() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let Ok(registry) = BreakerRegistry::<u32>::builder(RegistryConfig {
        max_breakers: 20_000,
        breaker: CircuitBreakerConfig {
            name: "rpc".into(),
            window: WindowConfig::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            ..Default::default()
        },
        ..Default::default()
    })
    .clock(ManualClock::new())
    .build() else {
        return ExitCode::FAILURE;
    };
    for k in 0..20_000 {
        if registry.get(&k).is_err() {
            return ExitCode::FAILURE;
        }
    }
    let lookup = |i: u64, t: u64| {
        let key = |spread: bool| {
            if spread {
                ((i * 7_919 + t * 10_007) % 20_000) as u32
            } else {
                0
            }
        };
        match mode.as_str() {
            "get_hot" | "get_spread" => {
                black_box(
                    registry
                        .get(&key(mode == "get_spread"))
                        .map(|b| b.state())
                        .ok(),
                );
            }
            "with_hot" | "with_spread" => {
                black_box(
                    registry
                        .with(&key(mode == "with_spread"), |b| b.state())
                        .ok(),
                );
            }
            _ => {
                black_box(tripline_benches::work());
            }
        }
    };
    let barrier = std::sync::Barrier::new(threads);
    let cpu: Vec<Option<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (barrier, lookup) = (&barrier, &lookup);
                s.spawn(move || {
                    barrier.wait();
                    let start = thread_cpu_nanos()?;
                    (0..n).for_each(|i| lookup(i, t));
                    Some(thread_cpu_nanos()? - start)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let Some(total) = cpu.into_iter().sum::<Option<u64>>() else {
        eprintln!("no /proc/thread-self/schedstat on this system");
        return ExitCode::FAILURE;
    };
    println!(
        "{mode} threads={threads}: {:.2} CPU ns per lookup",
        total as f64 / (n * threads as u64) as f64
    );
    ExitCode::SUCCESS
}
