//! Every refusal shows up in `metrics().calls.rejected`, exactly: from one
//! thread, from more threads than the breaker has stripes, and from threads
//! that come and go (their counting slots are recycled).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, State};

/// A breaker that trips and probes quickly, on `clock`, with `stripes`
/// stripes or the default.
fn breaker(clock: &ManualClock, stripes: Option<usize>) -> CircuitBreaker {
    let mut builder = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            half_open: HalfOpenPolicy::Consecutive { successes: 1 },
            ..Default::default()
        })
        .clock(clock.clone());
    if let Some(n) = stripes {
        builder = builder.stripes(n);
    }
    builder.build().unwrap()
}

fn open_breaker(stripes: usize) -> CircuitBreaker {
    let b = breaker(&ManualClock::new(), Some(stripes));
    b.open_for(Duration::from_secs(3600));
    b
}

#[test]
fn each_refusing_state_counts_its_refusals() {
    let clock = ManualClock::new();
    let b = breaker(&clock, None);
    // Refuses `n` calls through each entry point; returns how many.
    let refuse = |b: &CircuitBreaker, n: u64| {
        for _ in 0..n {
            assert!(b.try_acquire().is_err());
            assert!(b.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
        }
        2 * n
    };
    let mut refused = 0;

    b.open_for(Duration::from_secs(10));
    refused += refuse(&b, 5);
    assert_eq!(b.metrics().calls.rejected, refused);

    b.force_open();
    refused += refuse(&b, 3);
    assert_eq!(b.metrics().calls.rejected, refused);

    // Half-open with its one probe out: everybody else is refused.
    b.open_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    refused += refuse(&b, 4);
    assert_eq!(b.metrics().calls.rejected, refused);
    probe.record(Outcome::Success, Duration::ZERO);
    assert_eq!(b.state(), State::Closed);

    // Admitted calls never count as refusals.
    b.call(|| Ok::<_, ()>(())).unwrap();
    assert_eq!(b.metrics().calls.rejected, refused);
}

/// `threads` threads at once, each asking `calls` times and refused.
fn refuse_from_threads(b: &CircuitBreaker, threads: usize, calls: u64) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..calls {
                    assert!(b.try_acquire().is_err());
                }
            });
        }
    });
}

/// Eight threads on a two-stripe breaker: at most two own a stripe's
/// counting word, the rest count atomically, and nothing is lost.
#[test]
fn more_threads_than_stripes_lose_no_refusal() {
    let b = open_breaker(2);
    refuse_from_threads(&b, 8, 20_000);
    assert_eq!(b.metrics().calls.rejected, 160_000);
}

/// Short-lived threads, two at a time, 300 rounds: exited threads hand
/// their counting slots to new ones, which continue the counts exactly.
#[test]
fn threads_that_come_and_go_lose_no_refusal() {
    let b = open_breaker(1);
    for _ in 0..300 {
        refuse_from_threads(&b, 2, 50);
    }
    assert_eq!(b.metrics().calls.rejected, 30_000);
}
