//! Failfast, failsafe, broadcast (sync and async) and forking (on paused
//! tokio time): one attempt, a degraded default, every endpoint, and the
//! first success with the losers cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{
    Broadcast, BroadcastConfig, BroadcastError, Cluster, ClusterError, EndpointConfig,
    EndpointFailure, Failfast, Failsafe,
};
use tripline::fallback::{DegradedReason, FallbackSource};
use tripline::timeout::Deadline;

fn cluster(n: usize, clock: &ManualClock) -> Cluster {
    Cluster::builder()
        .name("svc")
        .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
        .clock(clock.clone())
        .seed(5)
        .build()
        .unwrap()
}

/// A clock that counts its reads, over a manual clock.
#[derive(Clone)]
struct CountingClock {
    inner: ManualClock,
    reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl tripline::clock::Clock for CountingClock {
    fn now(&self) -> tripline::Timestamp {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.now()
    }

    fn resolution(&self) -> Duration {
        self.inner.resolution()
    }
}

/// The sync and async failfast make the same decision before their one
/// attempt: without a context deadline neither reads the clock for one
/// (the async twin used to read it on every call regardless).
#[test]
fn async_failfast_reads_the_clock_no_more_often_than_sync_failfast() {
    use std::sync::atomic::Ordering;
    use tripline::clock::{Clock, SharedClock};
    let clock = CountingClock {
        inner: ManualClock::new(),
        reads: Default::default(),
    };
    let reads = clock.reads.clone();
    let c = Cluster::builder()
        .name("svc")
        .endpoints([EndpointConfig::new("e0", "e0:80")])
        .clock(SharedClock::custom(clock.clone()))
        .seed(5)
        .build()
        .unwrap();
    let ff = Failfast::new(c);
    let _ = clock.now();
    let before = reads.load(Ordering::Relaxed);
    ff.call(|_, _| Ok::<_, ()>(1)).unwrap();
    let sync_reads = reads.load(Ordering::Relaxed) - before;
    let before = reads.load(Ordering::Relaxed);
    futures_executor::block_on(ff.call_async(|_, _| async { Ok::<_, ()>(1) })).unwrap();
    let async_reads = reads.load(Ordering::Relaxed) - before;
    assert_eq!(
        async_reads, sync_reads,
        "sync {sync_reads}, async {async_reads}"
    );
}

#[test]
fn failfast_makes_one_attempt_and_returns_the_error_as_is() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    let ff = Failfast::new(c.clone());
    let mut n = 0;
    let r = ff.call(|e, a| {
        n += 1;
        assert_eq!(a.number(), 1);
        Err::<(), _>(format!("{} refused the order", e.id()))
    });
    assert_eq!(n, 1);
    match r {
        Err(ClusterError::Failed {
            endpoint,
            attempts: 1,
            error,
        }) => {
            assert_eq!(error, format!("{endpoint} refused the order"));
        }
        other => panic!("{other:?}"),
    }
    // Open breakers everywhere: no attempt, a local error.
    for e in c.endpoints() {
        e.breaker().force_open();
    }
    let r = ff.call(|_, _| -> Result<(), ()> { unreachable!("no endpoint can take it") });
    assert!(matches!(&r, Err(e) if e.is_local()));
}

#[test]
fn failfast_refuses_a_spent_deadline() {
    let clock = ManualClock::new();
    let ff = Failfast::new(cluster(1, &clock));
    let d = Deadline::after(&clock, Duration::from_millis(5));
    clock.advance(Duration::from_millis(5));
    let r = d.scope(|| ff.call(|_, _| Ok::<_, ()>(1)));
    assert!(matches!(r, Err(ClusterError::DeadlineExceeded(_))));
}

#[test]
fn failsafe_serves_a_degraded_default_and_counts_it() {
    let clock = ManualClock::new();
    let c = cluster(2, &clock);
    let fs = Failsafe::new(c.clone());
    let fresh = fs.call_or_default(|_, _| Ok::<Vec<u32>, &str>(vec![1]));
    assert_eq!(fresh.value, vec![1]);
    assert!(!fresh.is_degraded());
    let swallowed = fs.call_or_default(|_, _| Err::<Vec<u32>, _>("log sink down"));
    assert!(swallowed.value.is_empty());
    let d = swallowed.degraded.unwrap();
    assert_eq!(
        (d.reason, d.source, d.as_of),
        (DegradedReason::Failed, FallbackSource::Static, None)
    );
    let computed = fs.call_or(|e| e.to_string().len(), |_, _| Err::<usize, _>("x"));
    assert_eq!(computed.degraded.unwrap().source, FallbackSource::Function);
    assert!(computed.value > 0);
    for e in c.endpoints() {
        e.breaker().force_open();
    }
    let rejected = fs.call_or_default(|_, _| Ok::<u8, &str>(1));
    assert_eq!(rejected.degraded.unwrap().reason, DegradedReason::Rejected);
    let s = fs.stats();
    assert_eq!((s.calls, s.degraded), (4, 3));
}

#[test]
fn broadcast_calls_every_endpoint_even_ejected_ones() {
    let clock = ManualClock::new();
    let c = cluster(3, &clock);
    c.mark_unhealthy("e1", true);
    let b = Broadcast::try_new(c.clone(), BroadcastConfig::default()).unwrap();
    let mut called = Vec::new();
    let report = b
        .call(|e, a| {
            called.push((e.id().to_string(), a.number()));
            Ok::<_, ()>(())
        })
        .unwrap();
    assert_eq!(
        called,
        [("e0".into(), 1), ("e1".into(), 2), ("e2".into(), 3)]
    );
    assert_eq!((report.succeeded(), report.failed()), (3, 0));
}

#[test]
fn broadcast_fails_if_any_fails_or_beyond_fail_percent() {
    let clock = ManualClock::new();
    let c = cluster(10, &clock);
    let fail_two = |e: &tripline::cluster::Endpoint, _: &_| {
        if ["e3", "e7"].contains(&e.id().as_str()) {
            Err("stale")
        } else {
            Ok(())
        }
    };
    let strict = Broadcast::try_new(c.clone(), BroadcastConfig::default()).unwrap();
    match strict.call(fail_two) {
        Err(BroadcastError::Failed {
            fail_percent: None,
            report,
        }) => {
            assert_eq!((report.failed(), report.results.len()), (2, 10));
        }
        other => panic!("{other:?}"),
    }
    let lenient = Broadcast::try_new(
        c.clone(),
        BroadcastConfig {
            fail_percent: Some(20),
        },
    )
    .unwrap();
    assert_eq!(
        lenient.call(fail_two).unwrap().failed(),
        2,
        "2 of 10 is not more than 20%"
    );
    let tight = Broadcast::try_new(
        c.clone(),
        BroadcastConfig {
            fail_percent: Some(19),
        },
    )
    .unwrap();
    let err = tight.call(fail_two).unwrap_err();
    assert_eq!(
        err.to_string(),
        "broadcast failed on 2 of 10 endpoint(s), more than the 19% `fail_percent`"
    );
    // A breaker's refusal is that endpoint's failure: the message did not arrive.
    c.endpoint("e0").unwrap().breaker().force_open();
    match strict.call(|_, _| Ok::<_, ()>(())) {
        Err(BroadcastError::Failed { report, .. }) => {
            assert!(matches!(
                report.results[0].1,
                Err(EndpointFailure::Rejected(_))
            ));
        }
        other => panic!("{other:?}"),
    }
    let empty = Broadcast::try_new(
        Cluster::builder().name("none").build().unwrap(),
        BroadcastConfig::default(),
    )
    .unwrap();
    assert_eq!(
        empty.call(|_, _| Ok::<_, ()>(())).unwrap_err().to_string(),
        "cluster `none` has no endpoints"
    );
}

#[test]
fn bad_strategy_settings_are_named() {
    let clock = ManualClock::new();
    let c = cluster(1, &clock);
    let e = Broadcast::try_new(
        c.clone(),
        BroadcastConfig {
            fail_percent: Some(101),
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid broadcast config: `fail_percent` is a percentage and must be between 0 and 100, got 101"
    );
    let e = tripline::cluster::Forking::try_new(c, tripline::cluster::ForkingConfig { forks: 0 })
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid forking config: `forks` must be at least 1, got 0"
    );
}

#[cfg(feature = "tokio")]
mod with_tokio {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tripline::budget::{RetryBudget, RetryBudgetConfig};
    use tripline::cluster::{Forking, ForkingConfig};
    use tripline::timeout::TokioTimer;

    /// Counts drops: proves a future was cancelled.
    struct DropFlag(Arc<AtomicU32>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn tokio_cluster(n: usize) -> Cluster {
        Cluster::builder()
            .name("svc")
            .endpoints((0..n).map(|i| EndpointConfig::new(format!("e{i}"), format!("e{i}:80"))))
            .clock(TokioTimer.clock())
            .seed(5)
            .build()
            .unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn forking_takes_the_first_success_and_cancels_the_losers() {
        let c = tokio_cluster(3);
        let forking = Forking::try_new(c.clone(), ForkingConfig { forks: 3 }).unwrap();
        let dropped = Arc::new(AtomicU32::new(0));
        let finished = Arc::new(AtomicU32::new(0));
        let started = std::sync::Mutex::new(Vec::new());
        let t0 = tokio::time::Instant::now();
        let winner = forking
            .call(|e, a| {
                started.lock().unwrap().push(e.id().to_string());
                let (dropped, finished) = (dropped.clone(), finished.clone());
                async move {
                    let _flag = DropFlag(dropped);
                    tokio::time::sleep(ms(10 * u64::from(a.number()))).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ()>(e.id().to_string())
                }
            })
            .await
            .unwrap();
        assert_eq!(t0.elapsed(), ms(10), "the fastest fork answered");
        let mut started = started.into_inner().unwrap();
        assert_eq!(winner, started[0]);
        started.sort();
        started.dedup();
        assert_eq!(started.len(), 3, "three distinct endpoints");
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            3,
            "the two losers were cancelled"
        );
        // Cancelled forks released their places and permits neutrally.
        for e in c.endpoints() {
            assert_eq!(e.outstanding(), 0);
            assert_eq!(e.breaker().metrics().calls.failed, 0);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_fork_does_not_win() {
        let c = tokio_cluster(2);
        let forking = Forking::try_new(c, ForkingConfig { forks: 2 }).unwrap();
        let r = forking
            .call(|_, a| async move {
                if a.number() == 1 {
                    Err("fast failure")
                } else {
                    tokio::time::sleep(ms(50)).await;
                    Ok(a.number())
                }
            })
            .await;
        assert_eq!(r, Ok(2));
        let all_fail = forking
            .call(|_, a| async move {
                tokio::time::sleep(ms(u64::from(a.number()))).await;
                Err::<(), _>(a.number())
            })
            .await;
        assert!(matches!(
            all_fail,
            Err(ClusterError::Failed {
                attempts: 2,
                error: 2,
                ..
            })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn forks_are_limited_by_endpoints_and_budget() {
        let c = tokio_cluster(2);
        let forking = Forking::try_new(c.clone(), ForkingConfig { forks: 5 }).unwrap();
        let n = AtomicU32::new(0);
        forking
            .call(|_, _| {
                n.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, ()>(()) }
            })
            .await
            .unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 2, "only two endpoints");
        let budget = RetryBudget::with_clock(
            RetryBudgetConfig {
                ratio: 0.0,
                min_retries_per_second: 0.0,
                ..Default::default()
            },
            TokioTimer.clock(),
        )
        .unwrap();
        let thrifty = Forking::try_new(c, ForkingConfig { forks: 2 })
            .unwrap()
            .with_budget(budget);
        let n = AtomicU32::new(0);
        thrifty
            .call(|_, _| {
                n.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, ()>(()) }
            })
            .await
            .unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1, "no budget: one fork");
    }

    #[tokio::test(start_paused = true)]
    async fn forking_is_bounded_by_the_deadline_on_a_timer() {
        let c = tokio_cluster(2);
        let forking = Forking::try_new(c, ForkingConfig { forks: 2 })
            .unwrap()
            .with_timer(Arc::new(TokioTimer));
        let deadline = Deadline::after(&TokioTimer.clock(), ms(100));
        let r = deadline
            .scope_future(forking.call(|_, _| async {
                tokio::time::sleep(ms(1000)).await;
                Ok::<_, ()>(())
            }))
            .await;
        assert!(matches!(r, Err(ClusterError::DeadlineExceeded(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn async_broadcast_calls_all_endpoints_at_once() {
        let c = tokio_cluster(4);
        let b = Broadcast::try_new(c, BroadcastConfig::default()).unwrap();
        let t0 = tokio::time::Instant::now();
        let report = b
            .call_async(|e, _| async move {
                tokio::time::sleep(ms(20)).await;
                Ok::<_, ()>(e.id().to_string())
            })
            .await
            .unwrap();
        assert_eq!(t0.elapsed(), ms(20), "in parallel, not one after another");
        let ids: Vec<String> = report
            .results
            .into_iter()
            .map(|(_, r)| r.unwrap())
            .collect();
        assert_eq!(ids, ["e0", "e1", "e2", "e3"]);
    }
}
