//! Hedging on paused tokio time: the delay, the winner, the cancelled
//! loser, the quantile delay, max_hedges, and the shared budget.
#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
use tripline::timeout::TokioTimer;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn hedge(config: HedgeConfig, budget: Option<RetryBudget>) -> Hedge {
    let mut b = Hedge::builder()
        .config(config)
        .timer(Arc::new(TokioTimer))
        .clock(TokioTimer.clock());
    if let Some(budget) = budget {
        b = b.budget(budget);
    }
    b.build().expect("valid config")
}

fn fixed(delay: u64, max_hedges: u32) -> HedgeConfig {
    HedgeConfig {
        delay: HedgeDelay::Fixed { delay: ms(delay) },
        max_hedges,
        ..Default::default()
    }
}

/// Sets its flag when dropped: proves a future was cancelled.
struct DropFlag(Arc<AtomicU32>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_success_wins_and_the_loser_is_cancelled() {
    let h = hedge(fixed(50, 1), None);
    let dropped = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let start = tokio::time::Instant::now();
    let out = h
        .call(|n| {
            let (dropped, finished) = (dropped.clone(), finished.clone());
            async move {
                let _flag = DropFlag(dropped);
                tokio::time::sleep(ms(if n == 1 { 1000 } else { 20 })).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(n)
            }
        })
        .await;
    assert_eq!(out, Ok(2));
    assert_eq!(
        start.elapsed(),
        ms(70),
        "hedged at 50 ms, answered 20 ms later"
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 2, "both attempts are gone");
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the loser never finished: cancelled"
    );
    assert_eq!(h.stats().hedge_wins, 1);
}

#[tokio::test(start_paused = true)]
async fn a_fast_answer_sends_no_hedge_and_max_hedges_is_respected() {
    let h = hedge(fixed(50, 2), None);
    let sent = AtomicU32::new(0);
    assert_eq!(
        h.call(|n| {
            sent.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, ()>(n) }
        })
        .await,
        Ok(1)
    );
    assert_eq!(sent.swap(0, Ordering::SeqCst), 1);
    let out = h
        .call(|n| {
            sent.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(ms(1000)).await;
                Ok::<_, ()>(n)
            }
        })
        .await;
    assert_eq!(out, Ok(1), "all slow: the first still answers first");
    assert_eq!(sent.load(Ordering::SeqCst), 3, "1 attempt + max_hedges 2");
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_hedges_at_once_and_all_failing_returns_the_last_error() {
    let h = hedge(fixed(500, 2), None);
    let start = tokio::time::Instant::now();
    let out = h.call(|n| async move { Err::<(), _>(n) }).await;
    assert_eq!(out, Err(3));
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_delay_follows_the_latency_quantile_once_enough_samples_exist() {
    let h = hedge(
        HedgeConfig {
            delay: HedgeDelay::Quantile {
                quantile: 0.9,
                min_samples: 10,
                initial: ms(500),
            },
            max_hedges: 1,
            samples: 100,
        },
        None,
    );
    assert_eq!(h.current_delay(), ms(500));
    for i in 1..=10u64 {
        h.call(|_| async move {
            tokio::time::sleep(ms(i * 10)).await;
            Ok::<_, ()>(())
        })
        .await
        .unwrap();
    }
    assert_eq!(h.current_delay(), ms(90), "p90 of 10..=100 ms");
}

#[tokio::test(start_paused = true)]
async fn hedges_draw_on_the_retry_budget() {
    let budget = RetryBudget::with_clock(
        RetryBudgetConfig {
            ratio: 0.5,
            min_retries_per_second: 0.0,
            ..Default::default()
        },
        TokioTimer.clock(),
    )
    .unwrap();
    let h = hedge(fixed(10, 1), Some(budget.clone()));
    let mut sent = 0;
    for _ in 0..10 {
        let _ = h
            .call(|_| {
                sent += 1;
                async {
                    tokio::time::sleep(ms(100)).await;
                    Ok::<_, ()>(())
                }
            })
            .await;
    }
    // 10 calls deposit 10 requests; at 50 % at most 5 hedges.
    assert_eq!(sent, 15);
    assert_eq!(h.stats().hedges, 5);
    assert_eq!(h.stats().refused_budget, 5);
    assert_eq!(budget.stats().withdrawals, 5);
}
