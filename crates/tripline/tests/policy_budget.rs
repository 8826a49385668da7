//! Retry budget: the ratio bound (fractional ratios included), sharing
//! across clones and threads, open breakers, refusal reasons, and the
//! three-service retry storm (each layer retrying three times multiplies the
//! load on the bottom service by 27).

use std::time::Duration;

use proptest::prelude::*;
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::clock::{Clock, ManualClock};
use tripline::pipeline::{Pipeline, PolicyError};
use tripline::retry::{RetryBackoff, RetryConfig, RetryRefusal};
use tripline::{CircuitBreaker, CircuitBreakerConfig};

fn budget(clock: &ManualClock, ratio: f64, min: f64) -> RetryBudget {
    RetryBudget::with_clock(
        RetryBudgetConfig {
            window: Duration::from_secs(10),
            buckets: 10,
            ratio,
            min_retries_per_second: min,
        },
        clock.clone(),
    )
    .expect("valid config")
}

/// tower-rs/tower#857: a ratio of 0.6 must grant 6 retries per 10
/// requests; tower's TpsBudget truncates 1/0.6 to 1 and grants 10.
#[test]
fn fractional_ratio_is_exact_unlike_tower_857() {
    let clock = ManualClock::new();
    for (ratio, requests, expected) in [
        (0.6, 10, 6),
        (0.75, 4, 3),
        (0.9, 10, 9),
        (0.1, 100, 10),
        (0.05, 19, 0),
        (0.05, 20, 1),
        (1.5, 4, 6),
    ] {
        let b = budget(&clock, ratio, 0.0);
        for _ in 0..requests {
            b.deposit();
        }
        let granted = (0..100).filter(|_| b.try_withdraw()).count();
        assert_eq!(granted, expected, "ratio {ratio} over {requests} requests");
    }
}

#[test]
fn clones_and_threads_share_one_account() {
    let clock = ManualClock::new();
    let b = budget(&clock, 0.25, 0.0);
    for _ in 0..400 {
        b.clone().deposit();
    }
    let granted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                s.spawn(move || (0..100).filter(|_| b.try_withdraw()).count())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(granted, 100, "exactly 25% of 400, however the threads race");
    assert_eq!(b.stats().refused, 300);
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Deposit,
    Withdraw,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..3_000).prop_map(Op::Advance),
        4 => Just(Op::Deposit),
        3 => Just(Op::Withdraw),
    ]
}

proptest! {
    /// Over any request sequence, at every grant: retries in the window ≤
    /// ratio × requests in the window + min_retries_per_second × window.
    /// And the budget is not stingier than that (rounding aside).
    #[test]
    fn retries_never_exceed_the_budget_bound(
        ops in proptest::collection::vec(op(), 1..400),
        ratio in prop_oneof![Just(0.0), Just(0.1), Just(0.6), Just(1.0 / 3.0), 0.0f64..2.0],
        min in prop_oneof![Just(0.0), Just(0.3), 0.0f64..2.0],
    ) {
        let clock = ManualClock::new();
        let b = budget(&clock, ratio, min);
        let bw = b.bucket_width().as_nanos() as u64;
        let mut deposits: Vec<u64> = Vec::new();
        let mut grants: Vec<u64> = Vec::new();
        for op in ops {
            let now = clock.now().as_nanos();
            let epoch = now / bw;
            let in_window = |t: &&u64| **t / bw + 10 > epoch;
            match op {
                Op::Advance(ms) => { clock.advance(Duration::from_millis(ms)); }
                Op::Deposit => { b.deposit(); deposits.push(now); }
                Op::Withdraw => {
                    let reqs = deposits.iter().filter(in_window).count() as f64;
                    let used = grants.iter().filter(in_window).count() as f64;
                    let allowed = ratio * reqs + min * 10.0;
                    let granted = b.try_withdraw();
                    if granted {
                        grants.push(now);
                        prop_assert!(used + 1.0 <= allowed + 1e-9,
                            "granted retry {} with {} requests, ratio {}, min {}", used + 1.0, reqs, ratio, min);
                    } else {
                        prop_assert!(used + 1.0 > allowed - 1e-6,
                            "refused although {} ≤ {}", used + 1.0, allowed);
                    }
                }
            }
        }
    }
}

fn failing_breaker(clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            minimum_calls: 1000,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .expect("valid config")
}

#[test]
fn calls_rejected_by_an_open_breaker_are_not_retried_and_cost_no_budget() {
    let clock = ManualClock::new();
    let b = budget(&clock, 0.5, 0.0);
    let breaker = failing_breaker(&clock);
    let p = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .budget(b.clone())
        .circuit_breaker(breaker.clone())
        .build()
        .unwrap();
    breaker.force_open();
    let mut ran = 0;
    for _ in 0..10 {
        let r = p.call(|_| {
            ran += 1;
            Err::<(), _>("down")
        });
        assert!(matches!(r, Err(PolicyError::CircuitOpen(_))));
    }
    assert_eq!(ran, 0);
    assert_eq!(b.stats().deposits, 0, "a rejected request earns nothing");
    assert_eq!(b.stats().withdrawals, 0);
}

#[test]
fn a_breaker_opening_mid_loop_stops_the_retries_and_counts_the_reason() {
    let clock = ManualClock::new();
    let breaker = failing_breaker(&clock);
    let p = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 5,
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .budget(budget(&clock, 1.0, 10.0))
        .circuit_breaker(breaker.clone())
        .build()
        .unwrap();
    let mut ran = 0;
    let r = p.call(|_| {
        ran += 1;
        breaker.open_for(Duration::from_secs(30)); // another caller tripped it
        Err::<(), _>("down")
    });
    assert_eq!(
        ran, 1,
        "the retry loop checked the breaker before attempt 2"
    );
    match r {
        Err(PolicyError::CircuitOpen(open)) => {
            assert_eq!(open.retry_after(), Some(Duration::from_secs(30)))
        }
        other => panic!("expected CircuitOpen, got {other:?}"),
    }
    let stats = p.retry_stats().unwrap();
    assert_eq!(stats.refused(RetryRefusal::CircuitOpen), 1);
    assert_eq!(p.budget().unwrap().stats().withdrawals, 0);
}

#[test]
fn a_refused_retry_is_counted_with_its_reason_and_returns_budget_exhausted() {
    let clock = ManualClock::new();
    let p = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .budget(budget(&clock, 0.0, 0.0))
        .clock(clock.clone())
        .build()
        .unwrap();
    let r = p.call(|_| Err::<(), _>("503"));
    match r {
        Err(PolicyError::BudgetExhausted { attempts, last }) => {
            assert_eq!(attempts, 1);
            assert_eq!(*last, PolicyError::Inner("503"));
        }
        other => panic!("expected BudgetExhausted, got {other:?}"),
    }
    assert_eq!(p.retry_stats().unwrap().refused(RetryRefusal::Budget), 1);
}

/// A service: a pipeline in front of its downstream call.
fn service(clock: &ManualClock, with_budget: bool) -> Pipeline {
    let mut b = Pipeline::builder()
        .retry(RetryConfig {
            max_attempts: 3, // each layer retries twice
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .clock(clock.clone());
    if with_budget {
        b = b.budget(budget(clock, 0.1, 0.0));
    }
    b.build().expect("valid config")
}

fn storm(with_budget: bool, requests: u64) -> u64 {
    let clock = ManualClock::new();
    let (a, b) = (service(&clock, with_budget), service(&clock, with_budget));
    let mut c_calls = 0u64;
    for _ in 0..requests {
        let _ = a.call(|_| {
            b.call(|_| {
                c_calls += 1;
                Err::<(), _>("c is down")
            })
            .map_err(|e| e.to_string())
        });
        clock.advance(Duration::from_millis(10));
    }
    c_calls
}

/// A → B → C, A and B each retry twice; when C fails, C
/// sees 9× the traffic. With a 10% budget at each hop it sees at most
/// (1 + 0.1)² × the traffic.
#[test]
fn retry_storm_across_three_services_stays_within_the_budget_bound() {
    let n = 1000;
    assert_eq!(storm(false, n), 9 * n, "without budgets: the 9× storm");
    let with = storm(true, n);
    let bound = (n as f64 * 1.1 * 1.1).floor() as u64;
    assert!(with <= bound, "C saw {with} calls, bound {bound}");
    assert!(with >= n, "every request reached C at least once");
}
