//! Threads, stuck probes and live reconfiguration across every pair of
//! half-open policies: no half-open round ever outlives
//! `max_half_open_duration` by more than one call, and the breaker always
//! recovers once the dependency is healthy. Time is a shared `ManualClock`
//! advanced by the driving thread; the run is bounded in steps.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use tripline::breaker::OpenDuration;
use tripline::clock::{Clock, ManualClock};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, EventKind, HalfOpenPolicy, Outcome, State, WindowConfig,
};

const MAX: Duration = Duration::from_millis(500);
const TICK: Duration = Duration::from_millis(10);

fn config(half_open: HalfOpenPolicy, max: Option<Duration>) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "stress".into(),
        window: WindowConfig::Count { size: 20 },
        minimum_calls: 5,
        failure_rate_threshold: 0.5,
        open_duration: OpenDuration::Fixed(Duration::from_millis(100)),
        half_open,
        max_half_open_duration: max,
        ..Default::default()
    }
}

/// Each policy, and a sequence of them in which every ordered pair of
/// different policies occurs.
fn policies() -> (Vec<HalfOpenPolicy>, Vec<usize>) {
    let p = vec![
        HalfOpenPolicy::Consecutive { successes: 2 },
        HalfOpenPolicy::Permits {
            calls: 3,
            failure_rate_threshold: 0.5,
        },
        HalfOpenPolicy::Ramp {
            steps: vec![0.5, 1.0],
            step_duration: Duration::from_millis(100),
            failure_rate_threshold: 0.5,
            minimum_calls_per_step: 1,
        },
    ];
    (p, vec![0, 1, 2, 0, 2, 1, 0])
}

/// A tiny deterministic generator per worker (xorshift).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// What the driver and the workers share.
struct Shared {
    healthy: AtomicBool,
    stop: AtomicBool,
    /// Calls the workers made: the driver paces itself on them (at least
    /// four between two of its steps), so the run has the same shape
    /// however the threads are scheduled.
    calls: AtomicU64,
}

fn worker(b: CircuitBreaker, shared: Arc<Shared>, seed: u64) {
    let mut rng = seed;
    let mut held = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        shared.calls.fetch_add(1, Ordering::Relaxed);
        let r = next(&mut rng);
        match b.try_acquire_owned() {
            // Probes that hang for a while, then are abandoned.
            Ok(p) if r.is_multiple_of(17) => held.push(p),
            Ok(p) if r.is_multiple_of(11) => drop(p),
            Ok(p) => {
                let ok = shared.healthy.load(Ordering::Relaxed) || r.is_multiple_of(4);
                let outcome = if ok {
                    Outcome::Success
                } else {
                    Outcome::Failure
                };
                p.record(outcome, Duration::from_millis(1));
            }
            Err(_) => {}
        }
        if held.len() > 8 {
            held.clear();
        }
        thread::yield_now();
    }
}

#[test]
fn no_round_outlives_its_limit_under_threads_and_live_reconfiguration() {
    run(Some(MAX), 40);
}

/// Without a limit nothing rescues a round left without rules, so a
/// reconfiguration racing the entry into half-open must never leave one:
/// reconfigured every other step, the breaker still always recovers.
#[test]
fn without_a_limit_live_reconfiguration_never_strands_a_round() {
    run(None, 2);
}

/// Runs the workers against the driver; `every` steps the driver installs
/// the next half-open policy.
fn run(max: Option<Duration>, every: u64) {
    let (policies, order) = policies();
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder()
        .config(config(policies[0].clone(), max))
        .clock(clock.clone())
        .build()
        .unwrap();
    let shared = Arc::new(Shared {
        healthy: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        calls: AtomicU64::new(0),
    });
    let workers: Vec<_> = (1..=2u64)
        .map(|seed| {
            let (b, s) = (b.clone(), shared.clone());
            thread::spawn(move || worker(b, s, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        })
        .collect();
    let rounds = Arc::new(AtomicU64::new(0));
    let counter = rounds.clone();
    b.subscribe(move |e| {
        if let EventKind::Transition(t) = &e.kind
            && t.to == State::HalfOpen
        {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })
    .detach();
    let mut paced = 0;
    for step in 0..6_000u64 {
        // Four worker calls a step, counted from the last step: a total
        // (calls >= 4 × steps) would let workers that ran ahead while
        // this thread was descheduled leave every later step without a
        // call, and the breaker, seeing only the driver's successes,
        // would hardly trip (a CI run saw 12 rounds).
        while shared.calls.load(Ordering::Relaxed) < paced + 4 {
            thread::yield_now();
        }
        paced = shared.calls.load(Ordering::Relaxed);
        clock.advance(TICK);
        let policy = &policies[order[(step / every) as usize % order.len()]];
        if step % every == 0 {
            b.reconfigure(config(policy.clone(), max)).unwrap();
        }
        shared
            .healthy
            .store((step / 300) % 2 == 1, Ordering::Relaxed);
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Success, Duration::from_millis(1));
        }
        // The driver's call is the "one call" after which an expired round
        // must be gone: a quota round within the limit, a two-step ramp
        // within the limit for each step. (A reconfiguration that changes
        // the policy restarts the round, and `state_since` with it.)
        let m = b.metrics();
        if let (Some(max), State::HalfOpen) = (max, m.state) {
            let steps = if let HalfOpenPolicy::Ramp { steps, .. } = policy {
                steps.len() as u32
            } else {
                1
            };
            let age = clock.now() - m.state_since;
            assert!(
                age < steps * max,
                "half-open for {age:?} at step {step} under {policy:?}: {m:?}"
            );
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let rounds = rounds.load(Ordering::Relaxed);
    assert!(rounds >= 20, "the run probed only {rounds} times");
    // Healthy from now on: the breaker closes within a bounded time.
    shared.healthy.store(true, Ordering::Relaxed);
    for _ in 0..1_000 {
        if b.state() == State::Closed {
            break;
        }
        clock.advance(TICK);
        if let Ok(p) = b.try_acquire() {
            p.record(Outcome::Success, Duration::from_millis(1));
        }
    }
    assert_eq!(b.state(), State::Closed, "{:?}", b.metrics());
}
