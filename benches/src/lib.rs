//! Shared helpers of the tripline benchmarks: the protected operation every
//! workload calls, the simulated work between calls, the timed loop, the
//! two-thread throughput harness, and the catalogue of workloads ([`cases`])
//! that the criterion suite, the allocation runner and the instruction
//! counter all measure (feature `peers`).
//!
//! # Why every workload calls the operation the same way
//!
//! Overhead is `median(guarded) − median(bare)` from the same run. For the
//! subtraction to mean anything, the bare workload must do exactly what
//! every guarded one does minus the breaker. So every workload, bare or
//! guarded, calls the protected operation through a function pointer that
//! has passed through [`black_box`] ([`op`]): the compiler can neither inline
//! it nor fold its result, and the call costs the same in every loop. Every
//! workload returns the `u64` the operation produced (0 on any error) and
//! the timed loop [`black_box`]es it. A naive bare loop such as
//! `black_box(Ok(1))` is cheaper to *compute* but compiles into a different
//! loop shape and was measured slower than a guarded call (6.1 ns against
//! 4.2 ns), giving negative overheads.

#[cfg(feature = "peers")]
pub mod cases;
pub mod scrape;

use std::fmt;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Rounds of [`work`], calibrated to ~45 ns: re-checked for the peer suite
/// on the 2-core development VM (AMD EPYC), where the former 40 rounds took
/// ~38 ns and 45 rounds take 43–46 ns (`caseloop work N`, best of five).
pub const WORK_ROUNDS: u32 = 45;

/// About 45 ns of register-only work on this machine, standing in for the
/// code around a protected call (the "with work" workloads).
///
/// Never inlined: one copy of the loop serves every workload. Inlined, each
/// workload had its own copy, and the copies' code alignment alone moved
/// the 45 ns by up to ±20 ns between workloads of the same run — more than
/// the overheads measured.
#[inline(never)]
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

/// The error every protected operation returns: one concrete type for all
/// libraries (circuitbreaker-rs needs `std::error::Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchError;

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dependency failed")
    }
}

impl std::error::Error for BenchError {}

/// What every protected call returns.
pub type Reply = Result<u64, BenchError>;

/// The protected operation's type.
pub type Op = fn() -> Reply;

/// The protected operation on the success path: answers at once.
#[inline(never)]
pub fn succeed() -> Reply {
    Ok(black_box(1))
}

/// The protected operation, opaque to the optimiser: every workload calls
/// it through this pointer, so bare and guarded loops pay the same call.
#[inline(always)]
pub fn op() -> Op {
    black_box(succeed as Op)
}

/// The failure-heavy operation: call `n` fails when `n % 5 == 0` (20 %),
/// as in recloser's own benchmark.
#[inline(never)]
pub fn flaky(n: u64) -> Reply {
    if n.is_multiple_of(5) {
        Err(BenchError)
    } else {
        Ok(n)
    }
}

/// [`flaky`] behind an opaque pointer, like [`op`].
#[inline(always)]
pub fn flaky_op() -> fn(u64) -> Reply {
    black_box(flaky as fn(u64) -> Reply)
}

/// A reply as the `u64` every workload returns: the value, or 0 on error.
#[inline(always)]
pub fn value<E>(r: Result<u64, E>) -> u64 {
    r.unwrap_or_default()
}

/// A workload instance: runs `iters` calls and returns the time they took.
/// One instance per thread; instances made by one [`cases::Factory`] share
/// one breaker.
pub trait Bench: Send {
    /// Runs the workload `iters` times.
    fn run(&mut self, iters: u64) -> Duration;
}

/// A [`Bench`] that calls a closure in a timed loop.
struct Looped<F> {
    f: F,
    enter_runtime: bool,
}

impl<F: FnMut() -> u64 + Send> Bench for Looped<F> {
    /// Timed by this thread's CPU clock where there is one (see
    /// [`thread_cpu_nanos`]): on a machine shared with other work, a thread
    /// that loses its core for a while inflates wall time but not CPU time.
    /// Elsewhere, wall time.
    #[allow(clippy::disallowed_methods)] // benchmarks measure real time
    fn run(&mut self, iters: u64) -> Duration {
        let _entered = self.enter_runtime.then(|| runtime().enter());
        let cpu = thread_cpu_nanos();
        let start = Instant::now();
        for _ in 0..iters {
            black_box((self.f)());
        }
        let wall = start.elapsed();
        match (cpu, thread_cpu_nanos()) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => wall,
        }
    }
}

/// A workload that calls `f` once per iteration.
pub fn looped(f: impl FnMut() -> u64 + Send + 'static) -> Box<dyn Bench> {
    Box::new(Looped {
        f,
        enter_runtime: false,
    })
}

/// Like [`looped`], inside the shared tokio runtime's context (for tower
/// layers with timers and for seatbelt's tokio clock).
pub fn looped_in_runtime(f: impl FnMut() -> u64 + Send + 'static) -> Box<dyn Bench> {
    Box::new(Looped {
        f,
        enter_runtime: true,
    })
}

/// The tokio runtime whose context the async workloads run in. Futures are
/// polled by hand (see [`now`]), so the runtime only provides timers and
/// clocks: the figures are the libraries' own cost, not an executor's.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime")
    })
}

/// Polls a future to completion on this thread. Every protected operation
/// answers at once, so one poll suffices on one thread; with two threads a
/// library's internal async lock (tower-resilience's breaker) can be held
/// by the other thread, and the future is polled again until it is free.
#[inline(always)]
pub fn now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    let mut fut = pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::hint::spin_loop(),
        }
    }
}

/// One tower call: `poll_ready`, `call`, poll the response once.
#[inline(always)]
pub fn tower_call<S: tower::Service<u64>>(svc: &mut S) -> Result<S::Response, S::Error> {
    tower_call_with(svc, black_box(1))
}

/// [`tower_call`] with a given request.
#[inline(always)]
pub fn tower_call_with<S: tower::Service<R>, R>(
    svc: &mut S,
    req: R,
) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(e)) => return Err(e),
        Poll::Pending => panic!("the benchmarked services are always ready"),
    }
    now(svc.call(req))
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

/// Like [`parallel`] for a workload: each thread makes its own instance
/// (sharing one breaker) before the start line, then runs `iters` calls.
/// Returns the wall time divided by the number of threads.
#[allow(clippy::disallowed_methods)] // benchmarks measure real time
pub fn parallel_bench(
    threads: usize,
    iters: u64,
    make: &Arc<dyn Fn() -> Box<dyn Bench> + Send + Sync>,
) -> Duration {
    let barrier = std::sync::Barrier::new(threads);
    let start = std::sync::Mutex::new(None::<Instant>);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut bench = make();
                if barrier.wait().is_leader() {
                    *start.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                }
                bench.run(iters);
            });
        }
    });
    let begun = start
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_else(Instant::now);
    begun.elapsed() / threads as u32
}

/// This thread's CPU time in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`,
/// nanosecond resolution; `/proc/thread-self/schedstat` only moves at
/// scheduler ticks, too coarse for criterion's short samples).
#[cfg(all(feature = "peers", unix))]
pub fn thread_cpu_nanos() -> Option<u64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    u64::try_from(t.tv_sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(t.tv_nsec).ok()?)
}

/// This thread's CPU time: not available without the `peers` feature or
/// off Unix.
#[cfg(not(all(feature = "peers", unix)))]
pub fn thread_cpu_nanos() -> Option<u64> {
    None
}

/// Like [`parallel_bench`], timed by CPU time instead of wall time: each
/// thread's own CPU time for its `iters` calls, averaged over the threads
/// and divided by the number of threads. On an idle machine the threads
/// run side by side and this equals the wall-time figure; on a busy one it
/// does not grow when other processes take the cores, so it still shows
/// whether the threads slow each other down (shared cache lines, locks).
/// Falls back to wall time where there is no per-thread CPU clock.
pub fn parallel_bench_cpu(
    threads: usize,
    iters: u64,
    make: &Arc<dyn Fn() -> Box<dyn Bench> + Send + Sync>,
) -> Duration {
    if thread_cpu_nanos().is_none() {
        return parallel_bench(threads, iters, make);
    }
    let barrier = std::sync::Barrier::new(threads);
    let total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut bench = make();
                barrier.wait();
                let before = thread_cpu_nanos().unwrap_or(0);
                bench.run(iters);
                let spent = thread_cpu_nanos().unwrap_or(0).saturating_sub(before);
                total.fetch_add(spent, std::sync::atomic::Ordering::Relaxed);
            });
        }
    });
    let per_thread = total.load(std::sync::atomic::Ordering::Relaxed) / threads as u64;
    Duration::from_nanos(per_thread / threads as u64)
}

/// tripline's full pipeline as every pipeline benchmark builds it: breaker
/// (defaults), retry (3 attempts, decorrelated jitter) with a retry budget
/// (20 % + 10/s over 10 s), bulkhead (25 concurrent, no queue), 100 ms
/// per-attempt timeout and 1 s overall deadline, on `clock` with the
/// tokio timer.
pub fn full_pipeline(clock: tripline::clock::SharedClock) -> tripline::pipeline::Pipeline {
    use tripline::budget::{RetryBudget, RetryBudgetConfig};
    use tripline::bulkhead::{Bulkhead, BulkheadConfig};
    use tripline::retry::RetryConfig;
    use tripline::timeout::{TimeoutConfig, TokioTimer};
    use tripline::{CircuitBreaker, CircuitBreakerConfig};
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig::default())
        .clock(clock.clone())
        .build()
        .expect("valid config");
    tripline::pipeline::Pipeline::builder()
        .circuit_breaker(breaker)
        .retry(RetryConfig::default())
        .budget(
            RetryBudget::with_clock(RetryBudgetConfig::default(), clock.clone())
                .expect("valid config"),
        )
        .bulkhead(Bulkhead::try_new(BulkheadConfig::default()).expect("valid config"))
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_millis(100)),
            overall: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .clock(clock)
        .timer(Arc::new(TokioTimer))
        .build()
        .expect("valid config")
}
