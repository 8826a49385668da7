//! Failover on a ManualClock: another endpoint not yet tried, skipping
//! open ones, bounded by retries, idempotency, the budget and the deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::cell::RefCell;
use std::time::Duration;

use proptest::prelude::*;
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::clock::{Clock, ManualClock};
use tripline::cluster::{
    Cluster, ClusterError, EndpointConfig, EndpointOutcome, Failover, FailoverConfig,
};
use tripline::retry::RetryBackoff;
use tripline::timeout::Deadline;

fn cluster(n: usize, clock: &ManualClock) -> Cluster {
    Cluster::builder()
        .name("orders")
        .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
        .clock(clock.clone())
        .seed(1)
        .build()
        .unwrap()
}

fn failover(c: &Cluster, config: FailoverConfig) -> Failover {
    Failover::try_new(c.clone(), config).unwrap()
}

fn outcome_of(r: &Result<u32, EndpointOutcome>) -> EndpointOutcome {
    match r {
        Ok(_) => EndpointOutcome::Success,
        Err(o) => *o,
    }
}

#[test]
fn a_failure_moves_to_an_endpoint_not_yet_tried() {
    let clock = ManualClock::new();
    let c = cluster(4, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 3,
            ..Default::default()
        },
    );
    let called = RefCell::new(Vec::new());
    let r = f.call(|e, a| {
        called.borrow_mut().push((e.id().to_string(), a.number()));
        if a.number() < 4 {
            Err("503")
        } else {
            Ok(a.number())
        }
    });
    assert_eq!(r, Ok(4));
    let called = called.into_inner();
    let mut ids: Vec<&String> = called.iter().map(|c| &c.0).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        4,
        "four attempts on four distinct endpoints: {called:?}"
    );
    let s = f.stats();
    assert_eq!((s.calls, s.attempts, s.failovers), (1, 4, 3));
}

#[test]
fn failover_stops_after_retries_with_the_last_error() {
    let clock = ManualClock::new();
    let c = cluster(5, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 2,
            ..Default::default()
        },
    );
    let mut n = 0;
    let r = f.call(|e, _| {
        n += 1;
        Err::<(), _>(format!("down: {e:?}"))
    });
    assert_eq!(n, 3);
    match r {
        Err(ClusterError::Failed { attempts, .. }) => assert_eq!(attempts, 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.stats().stopped_retries, 1);
}

#[test]
fn endpoints_with_open_breakers_are_skipped_without_an_attempt() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    c.endpoint("e0").unwrap().breaker().force_open();
    c.endpoint("e1").unwrap().breaker().force_open();
    let f = failover(&c, FailoverConfig::default());
    let mut called = Vec::new();
    let r = f.call(|e, _| {
        called.push(e.id().to_string());
        Err::<(), _>("503")
    });
    assert_eq!(called, ["e2"], "only the closed endpoint is tried");
    assert!(matches!(r, Err(ClusterError::Failed { attempts: 1, .. })));
    assert_eq!(f.stats().stopped_no_endpoint, 1);
    // Every breaker open: no attempt at all, a clear error.
    c.endpoint("e2").unwrap().breaker().force_open();
    match f.call(|_, _| Ok::<_, ()>(())) {
        Err(ClusterError::Unavailable(u)) => assert_eq!((u.endpoints, u.open), (3, 3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_non_idempotent_request_is_never_sent_twice() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 2,
            idempotent: false,
            ..Default::default()
        },
    );
    for sent_failure in [
        EndpointOutcome::UpstreamFailure,
        EndpointOutcome::GatewayFailure,
        EndpointOutcome::LocalOriginFailure,
    ] {
        let mut sends = 0;
        let r = f.call_with(&outcome_of, |_, _| {
            sends += 1;
            Err(sent_failure)
        });
        assert_eq!(sends, 1, "{sent_failure:?} may have reached the endpoint");
        assert!(matches!(r, Err(ClusterError::Failed { attempts: 1, .. })));
    }
    assert_eq!(f.stats().stopped_non_idempotent, 3);
    // A refused connection never left: the request may go elsewhere.
    let mut attempts = Vec::new();
    let r = f.call_with(&outcome_of, |e, a| {
        attempts.push(e.id().to_string());
        if a.number() == 1 {
            Err(EndpointOutcome::ConnectFailure)
        } else {
            Ok(7)
        }
    });
    assert_eq!(r, Ok(7));
    assert_eq!(attempts.len(), 2);
    assert_ne!(attempts[0], attempts[1]);
}

proptest! {
    /// Whatever the endpoints answer, a non-idempotent request reaches at
    /// most one endpoint: every attempt but the last is a connect failure.
    #[test]
    fn non_idempotent_requests_reach_at_most_one_endpoint(
        answers in proptest::collection::vec(0u8..6, 1..8),
        retries in 0u32..6,
    ) {
        let clock = ManualClock::new();
        let c = cluster(6, &clock);
        let f = failover(&c, FailoverConfig { retries, idempotent: false, ..Default::default() });
        let mut reached = 0;
        let mut i = 0;
        let _ = f.call_with(&outcome_of, |_, _| {
            let o = match answers[i % answers.len()] {
                0 => EndpointOutcome::ConnectFailure,
                1 => EndpointOutcome::UpstreamFailure,
                2 => EndpointOutcome::GatewayFailure,
                3 => EndpointOutcome::LocalOriginFailure,
                4 => EndpointOutcome::Ignored,
                _ => EndpointOutcome::Success,
            };
            i += 1;
            if !o.never_sent() { reached += 1; }
            if o == EndpointOutcome::Success { Ok(1) } else { Err(o) }
        });
        prop_assert!(reached <= 1, "reached {} endpoints", reached);
        prop_assert!(i as u32 <= retries + 1);
    }
}

#[test]
fn a_business_error_is_final() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let f = failover(&c, FailoverConfig::default());
    let mut n = 0;
    let r = f.call_with(&outcome_of, |_, _| {
        n += 1;
        Err(EndpointOutcome::Ignored)
    });
    assert_eq!(n, 1);
    assert_eq!(r.unwrap_err().into_inner(), Some(EndpointOutcome::Ignored));
}

#[test]
fn failovers_spend_the_shared_retry_budget() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let budget = RetryBudget::with_clock(
        RetryBudgetConfig {
            ratio: 0.5,
            min_retries_per_second: 0.0,
            ..Default::default()
        },
        clock.clone(),
    )
    .unwrap();
    let f = Failover::builder(c)
        .config(FailoverConfig {
            retries: 2,
            ..Default::default()
        })
        .budget(budget.clone())
        .build()
        .unwrap();
    // Two calls deposit 2 × 0.5 = 1 failover; the first call spends it on
    // its first failover, then the budget refuses.
    budget.deposit();
    let r = f.call(|_, _| Err::<(), _>("503"));
    match r {
        Err(ClusterError::BudgetExhausted { attempts, last }) => {
            assert_eq!(attempts, 2);
            assert!(matches!(*last, ClusterError::Failed { attempts: 2, .. }));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.stats().stopped_budget, 1);
    assert_eq!(budget.stats().withdrawals, 1);
}

#[test]
fn the_deadline_bounds_the_failovers() {
    let clock = ManualClock::new();
    let c = cluster(4, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 3,
            ..Default::default()
        },
    );
    let deadline = Deadline::after(&clock, Duration::from_millis(100));
    let mut n = 0;
    let r = deadline.scope(|| {
        f.call(|_, a| {
            assert_eq!(a.deadline(), Some(deadline), "handed to every attempt");
            n += 1;
            clock.advance(Duration::from_millis(60));
            Err::<(), _>("slow 503")
        })
    });
    assert_eq!(n, 2, "at 60 ms one more fits, at 120 ms none");
    assert!(matches!(r, Err(ClusterError::Failed { attempts: 2, .. })));
    assert_eq!(f.stats().stopped_deadline, 1);
    // A deadline already spent: no attempt at all.
    let r = deadline.scope(|| f.call(|_, _| Ok::<_, ()>(())));
    assert!(matches!(r, Err(ClusterError::DeadlineExceeded(_))));
}

#[test]
fn the_backoff_between_failovers_runs_on_the_clock() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 2,
            backoff: RetryBackoff::Constant {
                delay: Duration::from_millis(50),
            },
            ..Default::default()
        },
    );
    let _ = f.call(|_, _| Err::<(), _>("503"));
    assert_eq!(clock.now().as_duration(), Duration::from_millis(100));
}

#[test]
fn failover_records_every_attempt_on_its_endpoint() {
    let clock = ManualClock::new();
    let c = cluster(2, &clock);
    let f = failover(
        &c,
        FailoverConfig {
            retries: 1,
            ..Default::default()
        },
    );
    let r = f.call(|e, _| {
        if e.id().as_str() == "e0" {
            Err("503")
        } else {
            Ok(1)
        }
    });
    assert_eq!(r, Ok(1));
    let m0 = c.endpoint("e0").unwrap().breaker().metrics();
    let m1 = c.endpoint("e1").unwrap().breaker().metrics();
    assert_eq!((m0.calls.failed, m1.calls.successful), (1, 1));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_failover_tries_another_endpoint() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let f = failover(&c, FailoverConfig::default());
    let r = f
        .call_async(|e, a| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if a.number() == 1 {
                Err(e.id().to_string())
            } else {
                Ok(a.number())
            }
        })
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(f.stats().failovers, 1);
}
