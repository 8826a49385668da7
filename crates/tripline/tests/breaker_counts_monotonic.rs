//! Cumulative counts never go backwards, whatever a concurrent reader
//! catches the breaker doing: resetting its window, rolling a time bucket
//! over, or being reconfigured. A scrape that reads lower than the one
//! before looks to Prometheus like a counter reset, and its `rate()` spikes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod support {
    pub mod evidence;
}

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use support::evidence::assert_not_lower;
use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

/// A time window of many buckets over several stripes, which never trips:
/// every count stays in the closed state's window and its totals.
fn config() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "monotonic".into(),
        window: WindowConfig::Time {
            length: Duration::from_secs(18),
            buckets: 120,
        },
        minimum_calls: 1_000_000,
        ..Default::default()
    }
}

fn breaker(clock: &ManualClock) -> Arc<CircuitBreaker> {
    Arc::new(
        CircuitBreaker::builder()
            .config(config())
            .clock(clock.clone())
            .stripes(4)
            .build()
            .unwrap(),
    )
}

/// One thread records 20 calls (every third failing) and then disturbs the
/// window with `disturb`; another reads the counts around same-shape
/// reconfigurations for `reads` rounds.
fn race(clock: &ManualClock, reads: usize, disturb: impl Fn(&CircuitBreaker) + Send + 'static) {
    let b = breaker(clock);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (b, stop) = (b.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for i in 0..20 {
                    let outcome = if i % 3 == 0 {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    };
                    b.try_acquire().unwrap().record(outcome, Duration::ZERO);
                }
                disturb(&b);
            }
        })
    };
    // The reads overlap the writes: the writer has begun before the first
    // (on a busy machine a new thread may wait for a core a long while).
    while b.metrics().calls.successful + b.metrics().calls.failed == 0 {
        thread::yield_now();
    }
    let mut last = b.metrics().calls;
    for _ in 0..reads {
        let before = b.metrics().calls;
        assert_not_lower(&last, &before, "between two reads");
        b.reconfigure(config()).unwrap();
        let after = b.metrics().calls;
        assert_not_lower(&before, &after, "across a same-shape reconfiguration");
        last = after;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let c = b.metrics().calls;
    assert!(c.successful + c.failed > 0, "the writer ran");
}

#[test]
fn counts_never_decrease_while_the_window_is_reset() {
    race(&ManualClock::new(), 10_000, |b| b.reset());
}

#[test]
fn counts_never_decrease_while_time_buckets_roll_over() {
    let clock = ManualClock::new();
    let ticking = clock.clone();
    race(&clock, 10_000, move |_| {
        ticking.advance(Duration::from_millis(150));
    });
}

#[test]
fn failures_are_never_read_as_successes() {
    // Only failures, through a disabled breaker (it records and never
    // trips): a reader must never count one as a success, even while the
    // failure's call is counted and its failure not yet, in either kind of
    // window.
    let clock = ManualClock::new();
    for window in [config().window, WindowConfig::Count { size: 100 }] {
        let b = Arc::new(
            CircuitBreaker::builder()
                .config(CircuitBreakerConfig { window, ..config() })
                .clock(clock.clone())
                .stripes(4)
                .build()
                .unwrap(),
        );
        b.disable();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (b, stop) = (b.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    b.try_acquire()
                        .unwrap()
                        .record(Outcome::Failure, Duration::ZERO);
                }
            })
        };
        while b.metrics().calls.failed == 0 {
            thread::yield_now(); // the writer has begun: reads overlap writes
        }
        for _ in 0..20_000 {
            assert_eq!(b.metrics().calls.successful, 0, "{window:?}");
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(b.metrics().calls.failed > 0, "the writer ran");
    }
}
