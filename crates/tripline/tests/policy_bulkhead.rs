//! Bulkhead: the limit, the bounded queue with max_wait, rejection, and
//! permits that live as long as the work.

use std::time::Duration;

use tripline::bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
use tripline::clock::ManualClock;
use tripline::pipeline::{Pipeline, PolicyError};
use tripline::timeout::TimeoutConfig;

fn bulkhead(max: u32, queue: u32, wait_ms: u64) -> Bulkhead {
    Bulkhead::try_new(BulkheadConfig {
        max_concurrent: max,
        max_queue: queue,
        max_wait: Duration::from_millis(wait_ms),
    })
    .expect("valid config")
}

#[test]
fn rejects_beyond_the_limit_and_frees_on_drop() {
    let b = bulkhead(2, 0, 0);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire_owned().unwrap();
    assert_eq!(
        b.try_acquire().unwrap_err(),
        BulkheadFull {
            max_concurrent: 2,
            queued: false
        }
    );
    drop(p1);
    assert!(b.try_acquire().is_ok());
    drop(p2);
    let s = b.stats();
    assert_eq!((s.in_flight, s.admitted, s.rejected), (0, 3, 1));
}

#[test]
fn bad_config_is_refused_naming_the_field() {
    let e = Bulkhead::try_new(BulkheadConfig {
        max_concurrent: 4,
        max_queue: 10,
        max_wait: Duration::ZERO,
    })
    .unwrap_err();
    assert_eq!((e.policy, e.field), ("bulkhead", "max_wait"));
}

/// Sync: the permit is held for the whole call, even one that overran its
/// timeout (sync calls are judged after they return).
#[test]
fn a_sync_permit_covers_a_call_that_overran_its_timeout() {
    let clock = ManualClock::new();
    let b = bulkhead(1, 0, 0);
    let p = Pipeline::builder()
        .bulkhead(b.clone())
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_millis(100)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let out = p.call(|_| {
        clock.advance(Duration::from_millis(500)); // long past the timeout…
        assert_eq!(b.stats().in_flight, 1, "…the slot is still taken");
        assert!(b.try_acquire().is_err());
        Ok::<_, ()>(())
    });
    assert!(matches!(out, Err(PolicyError::Timeout(_))));
    assert_eq!(b.stats().in_flight, 0);
}

#[cfg(feature = "tokio")]
mod on_tokio {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::oneshot;
    use tripline::timeout::{SharedTimer, TokioTimer};

    fn timer() -> SharedTimer {
        Arc::new(TokioTimer)
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded_and_waits_at_most_max_wait() {
        let b = bulkhead(1, 1, 50);
        let t = timer();
        let held = b.try_acquire_owned().unwrap();
        // One may queue …
        let b2 = b.clone();
        let t2 = t.clone();
        let queued = tokio::spawn(async move { b2.acquire(Some(&t2), None).await });
        tokio::task::yield_now().await;
        assert_eq!(b.stats().waiting, 1);
        // … the next is rejected at once, never queued without bound.
        assert_eq!(
            b.acquire(Some(&t), None).await.unwrap_err(),
            BulkheadFull {
                max_concurrent: 1,
                queued: false
            }
        );
        // The waiter gives up after max_wait.
        let start = tokio::time::Instant::now();
        let r = queued.await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(50));
        assert!(r.unwrap_err().queued);
        assert_eq!(b.stats().waiting, 0);
        drop(held);
        assert_eq!(b.stats().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_slot_goes_to_the_first_waiter() {
        let b = bulkhead(1, 4, 1000);
        let t = timer();
        let held = b.try_acquire_owned().unwrap();
        let (b2, t2) = (b.clone(), t.clone());
        let waiter = tokio::spawn(async move { b2.acquire(Some(&t2), None).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(b.try_acquire().is_err(), "no barging past the queue");
        drop(held);
        assert!(waiter.await.unwrap().is_ok());
        assert_eq!(b.stats().in_flight, 0);
        assert_eq!(b.stats().waiting, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let b = bulkhead(1, 1, 1000);
        let t = timer();
        let held = b.try_acquire_owned().unwrap();
        {
            let fut = b.acquire(Some(&t), None);
            tokio::pin!(fut);
            assert!(futures_poll_once(fut.as_mut()).await.is_none());
            assert_eq!(b.stats().waiting, 1);
        }
        assert_eq!(b.stats().waiting, 0);
        drop(held);
        assert_eq!(b.stats().in_flight, 0);
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = Some(f);
        std::future::poll_fn(move |cx| {
            let fut = f.as_mut().expect("valid config");
            match std::pin::Pin::new(fut).poll(cx) {
                std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
                std::task::Poll::Pending => std::task::Poll::Ready(None),
            }
        })
        .await
    }

    /// The bulkhead's rule: the permit lives as long as the actual work,
    /// including work that outlives a timeout.
    #[tokio::test(start_paused = true)]
    async fn the_permit_outlives_a_timed_out_call_while_its_work_runs() {
        let b = bulkhead(1, 0, 0);
        let p = Pipeline::builder()
            .bulkhead(b.clone())
            .timeouts(TimeoutConfig {
                per_attempt: Some(Duration::from_millis(100)),
                ..Default::default()
            })
            .timer(timer())
            .clock(TokioTimer.clock())
            .build()
            .unwrap();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let mut done_tx = Some(done_tx);
        let out = p
            .call_async(|attempt| {
                // The real work runs in its own task, keeping the slot.
                let slot = attempt.bulkhead_permit();
                let tx = done_tx.take();
                let work = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    drop(slot);
                    if let Some(tx) = tx {
                        let _ = tx.send(());
                    }
                });
                async move { work.await.map_err(|_| ()) }
            })
            .await;
        assert!(matches!(out, Err(PolicyError::Timeout(_))));
        assert_eq!(
            b.stats().in_flight,
            1,
            "the caller gave up, the work did not"
        );
        assert!(matches!(
            p.call_async(|_| async { Ok::<_, ()>(()) }).await,
            Err(PolicyError::BulkheadFull(_))
        ));
        done_rx.await.unwrap();
        assert_eq!(b.stats().in_flight, 0, "freed when the work ended");
    }
}
