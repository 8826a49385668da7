//! Shared helpers of the tripline benchmarks: the simulated work between
//! calls and the two-thread throughput harness.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rounds of [`work`], calibrated to ~45 ns on the reference machine.
pub const WORK_ROUNDS: u32 = 40;

/// About 45 ns of register-only work on this machine, standing in for the
/// code around a protected call (the "with work" workloads).
#[inline]
pub fn work() -> u64 {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..WORK_ROUNDS {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^= x >> 29;
    }
    black_box(x)
}

/// Runs `f` `iters` times on each of `threads` threads at once and returns
/// the wall time divided by the number of threads, so that criterion's
/// "time per iteration" reads as the aggregate cost per call: a perfectly
/// scaling workload shows half the single-thread figure on two threads.
#[allow(clippy::disallowed_methods)] // benchmarks measure real time
pub fn parallel<F>(threads: usize, iters: u64, f: F) -> Duration
where
    F: Fn() + Sync,
{
    let barrier = std::sync::Barrier::new(threads);
    let start = std::sync::Mutex::new(None::<Instant>);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                if barrier.wait().is_leader() {
                    *start.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                }
                for _ in 0..iters {
                    f();
                }
            });
        }
    });
    let begun = start
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_else(Instant::now);
    begun.elapsed() / threads as u32
}
