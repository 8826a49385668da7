//! Hedging: a slow first try is raced by a second endpoint; the loser is
//! cancelled without being charged; no budget, no hedge.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::support::*;

/// Hedge after 50 ms; a budget that always has a retry to spare.
const HEDGED: &str = r#"hedge = { delay = "50ms", max_extra = 1 }"#;

/// The same hedge with a retry budget that never grants anything.
const HEDGED_NO_BUDGET: &str = r#"hedge = { delay = "50ms", max_extra = 1 }
retry = { budget = { ratio = 0.0, min_retries_per_second = 0.0 } }"#;

#[tokio::test]
async fn a_slow_first_try_is_beaten_by_the_hedge_and_not_charged() {
    let release = Arc::new(Notify::new());
    let (slow, mut arrivals) = held_upstream(release.clone()).await;
    let fast = Upstream::start(|_| respond(200, "fast")).await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[slow, fast.addr], HEDGED, "")).await;
    // Round robin sends the first try to `slow`, which never answers
    // until released: only the hedge can answer this request.
    let started = tokio::time::Instant::now();
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "fast"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered by the hedge, not after the slow endpoint"
    );
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("the first try reached the slow endpoint");
    assert_eq!(fast.hits(), 1);

    let cluster = proxy.cluster("backend").unwrap();
    let slow_calls = cluster
        .endpoint(&slow.to_string())
        .unwrap()
        .breaker()
        .metrics()
        .calls;
    assert_eq!(slow_calls.failed, 0, "the losing try is not a failure");
    assert_eq!(slow_calls.cancelled, 1, "it is settled as cancelled");
    assert_eq!(slow_calls.successful, 0);
    assert_eq!(
        cluster.endpoint(&slow.to_string()).unwrap().outstanding(),
        0,
        "its lease is released"
    );
    let budget = proxy.route_budget("api").unwrap().stats();
    assert_eq!(
        budget.withdrawals, 1,
        "the hedge was paid from the retry budget"
    );
    release.notify_waiters();
    running.shutdown().await;
}

#[tokio::test]
async fn with_the_budget_exhausted_no_hedge_is_sent() {
    let release = Arc::new(Notify::new());
    let (slow, mut arrivals) = held_upstream(release.clone()).await;
    let fast = Upstream::start(|_| respond(200, "fast")).await;
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[slow, fast.addr], HEDGED_NO_BUDGET, "")).await;
    let request = tokio::spawn(async move { get(addr, "/").await });
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("the first try reached the slow endpoint");
    // The hedge comes due after 50 ms and asks the budget, which refuses:
    // wait (bounded) for that refusal rather than for a span of time.
    let budget = proxy.route_budget("api").unwrap();
    tokio::time::timeout(BOUND, async {
        while budget.stats().refused == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the hedge asked the budget");
    assert_eq!(fast.hits(), 0, "no hedge without budget");
    release.notify_waiters();
    let answer = tokio::time::timeout(BOUND, request).await.unwrap().unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "done"),
        "the first try's answer"
    );
    assert_eq!(fast.hits(), 0);
    assert_eq!(budget.stats().withdrawals, 0);
    running.shutdown().await;
}

#[tokio::test]
async fn a_post_is_hedged_only_on_a_retryable_route() {
    let release = Arc::new(Notify::new());
    let (slow, mut arrivals) = held_upstream(release.clone()).await;
    let fast = Upstream::start(|_| respond(200, "fast")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[slow, fast.addr], HEDGED, "")).await;
    let request = tokio::spawn(async move { send(addr, "POST", "/", &[]).await });
    tokio::time::timeout(BOUND, arrivals.recv()).await.unwrap();
    // Not idempotent, route not retryable: the POST waits for its one try.
    // Six hedge delays pass first, so a hedge, if any, would have gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    release.notify_waiters();
    let answer = tokio::time::timeout(BOUND, request).await.unwrap().unwrap();
    assert_eq!(answer.body, "done");
    assert_eq!(fast.hits(), 0);
    running.shutdown().await;
}

#[tokio::test]
async fn a_body_too_large_to_replay_is_not_hedged() {
    let release = Arc::new(Notify::new());
    let (slow, mut arrivals) = held_upstream(release.clone()).await;
    let fast = Upstream::start(|_| respond(200, "fast")).await;
    let route = format!("{HEDGED}\nretry = {{ retryable = true, max_buffered_body = 16 }}");
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[slow, fast.addr], &route, "")).await;
    let large = bytes::Bytes::from(vec![b'x'; 100]);
    let request = tokio::spawn(async move { send_body(addr, "POST", "/", &[], large).await });
    tokio::time::timeout(BOUND, arrivals.recv()).await.unwrap();
    // Six hedge delays pass: a hedge, if any, would have gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    release.notify_waiters();
    let answer = tokio::time::timeout(BOUND, request).await.unwrap().unwrap();
    assert_eq!(answer.body, "done");
    assert_eq!(fast.hits(), 0, "a body sent once cannot be sent twice");
    running.shutdown().await;
}
