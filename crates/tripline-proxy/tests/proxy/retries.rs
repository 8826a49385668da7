//! Retries: only for requests that may be repeated, to another endpoint,
//! and never beyond the route's retry budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::*;

/// Endpoint breakers that will not trip within a test.
const PATIENT_ENDPOINTS: &str =
    r#"breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }"#;

#[tokio::test]
async fn a_failed_get_is_retried_on_another_endpoint() {
    let bad = Upstream::start(|_| respond(502, "bad gateway")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let route = "retry = { attempts = 2 }";
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[bad.addr, good.addr], route, "")).await;
    for _ in 0..6 {
        let answer = get(addr, "/").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "good"));
    }
    assert_eq!(good.hits(), 6);
    // Round robin advances on retries too, so every first try met `bad`
    // and every retry went elsewhere.
    assert_eq!(bad.hits(), 6);
    running.shutdown().await;
}

#[tokio::test]
async fn a_post_is_not_retried_unless_the_route_says_so() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = "retry = { attempts = 3 }";
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    assert_eq!(send(addr, "POST", "/orders", &[]).await.status, 500);
    assert_eq!(upstream.hits(), 1);
    running.shutdown().await;

    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = "retry = { attempts = 3, retryable = true }";
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    assert_eq!(send(addr, "POST", "/orders", &[]).await.status, 500);
    assert_eq!(upstream.hits(), 3);
    running.shutdown().await;
}

#[tokio::test]
async fn retries_stay_within_the_budget() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    // One retry per ten requests, no reserve: 40 requests may retry 4 times.
    let route = "retry = { attempts = 3, budget = { ratio = 0.1, min_retries_per_second = 0.0 } }";
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], route, PATIENT_ENDPOINTS)).await;
    let refused = Arc::new(AtomicUsize::new(0));
    for _ in 0..40 {
        let answer = get(addr, "/").await;
        assert_eq!(answer.status, 500);
        if answer.header("x-tripline-retry-refused") == Some("budget_exhausted") {
            refused.fetch_add(1, Ordering::SeqCst);
        }
    }
    let retries = upstream.hits() - 40;
    assert!(
        retries <= 4,
        "{retries} retries for 40 requests at a 10% budget"
    );
    assert!(retries >= 3, "the budget grants what it holds: {retries}");
    // Every request still failing wanted one more retry than it got, and says so.
    assert_eq!(refused.load(Ordering::SeqCst), 40);
    let stats = proxy.route_budget("api").unwrap().stats();
    assert_eq!((stats.deposits, stats.withdrawals), (40, retries as u64));
    running.shutdown().await;
}

#[tokio::test]
async fn a_body_over_the_replay_buffer_is_sent_once_and_never_retried() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = "retry = { attempts = 3, retryable = true, max_buffered_body = 16 }";
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let small = bytes::Bytes::from_static(b"ten bytes!");
    assert_eq!(
        send_body(addr, "POST", "/", &[], small.clone())
            .await
            .status,
        500
    );
    assert_eq!(upstream.hits(), 3);
    let large = bytes::Bytes::from(vec![b'x'; 100]);
    assert_eq!(
        send_body(addr, "POST", "/", &[], large.clone())
            .await
            .status,
        500
    );
    assert_eq!(
        upstream.hits(),
        4,
        "a body the proxy did not keep is sent once"
    );
    let bodies = upstream.bodies.lock().unwrap().clone();
    assert_eq!(
        bodies,
        vec![small.clone(), small.clone(), small, large],
        "every try carried the whole body"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_retry_with_nowhere_to_go_leaves_the_last_answer() {
    let upstream = Upstream::start(|_| respond(500, "the real error")).await;
    let route = "retry = { attempts = 3 }";
    // The only endpoint's breaker trips on its first failure.
    let cluster = r#"breaker = { window = { kind = "count", size = 1 }, minimum_calls = 1, open_duration = "60s" }"#;
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], route, cluster)).await;
    let answer = get(addr, "/").await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (500, "the real error")
    );
    assert_eq!(upstream.hits(), 1);
    running.shutdown().await;
}
