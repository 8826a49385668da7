//! The route breaker trips on failures, refuses without contacting the
//! upstream, explains itself, and recovers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::*;

const ROUTE: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s", half_open = { policy = "consecutive", successes = 1 } }"#;

#[tokio::test]
async fn failing_upstream_trips_the_breaker_which_refuses_without_contacting_it_then_recovers() {
    let healthy = Arc::new(AtomicBool::new(false));
    let h = healthy.clone();
    let upstream = Upstream::start(move |_| {
        if h.load(Ordering::SeqCst) {
            respond(200, "fine")
        } else {
            respond(500, "boom")
        }
    })
    .await;
    let (proxy, running, addr, clock) = start_proxy(&config(&[upstream.addr], ROUTE, "")).await;
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    assert_eq!(upstream.hits(), 4);

    let refused = get(addr, "/").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));
    assert_eq!(refused.header("x-tripline-flag"), Some("CO"));
    assert_eq!(refused.header("x-tripline-route"), Some("api"));
    assert_eq!(refused.header("x-tripline-breaker"), Some("api"));
    assert_eq!(refused.header("retry-after"), Some("10"));
    assert_eq!(refused.header("cache-control"), Some("no-store"));
    let json: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(json["rejected"], "circuit_open");
    assert_eq!(json["flag"], "CO");
    assert_eq!(
        upstream.hits(),
        4,
        "a refused request never reaches the upstream"
    );

    healthy.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(10));
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Closed
    );
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(upstream.hits(), 6);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn client_errors_count_as_successes() {
    let upstream = Upstream::start(|_| respond(404, "no such user")).await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], ROUTE, "")).await;
    for _ in 0..8 {
        assert_eq!(get(addr, "/").await.status, 404);
    }
    let breaker = proxy.route_breaker("api").unwrap();
    assert_eq!(breaker.state(), tripline::State::Closed);
    assert_eq!(breaker.window().failures, 0);
    running.shutdown().await;
}

/// An endpoint answering `status` with `Retry-After: asked` is left out of
/// rotation (its breaker open, requests refused `NH` with the wait) for
/// `kept` seconds, and tried again after.
async fn assert_left_alone_after_retry_after(
    status: u16,
    body: &'static str,
    asked: &'static str,
    kept: u64,
) {
    let upstream = Upstream::start(move |_| {
        let mut r = respond(status, body);
        r.headers_mut()
            .insert("retry-after", asked.parse().unwrap());
        r
    })
    .await;
    let (proxy, running, addr, clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let first = get(addr, "/").await;
    assert_eq!((first.status, first.body.as_str()), (status, body));
    let refused = get(addr, "/").await;
    assert_eq!(
        refused.header("x-tripline-rejected"),
        Some("no_healthy_endpoint")
    );
    assert_eq!(refused.header("x-tripline-flag"), Some("NH"));
    assert_eq!(
        refused.header("retry-after"),
        Some(kept.to_string().as_str()),
        "the endpoint's own wait, capped"
    );
    assert_eq!(upstream.hits(), 1);
    let breaker = endpoint_breaker(&proxy, upstream.addr);
    assert_eq!(breaker.state(), tripline::State::Open);
    clock.advance(Duration::from_secs(kept - 1));
    assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("NH"));
    clock.advance(Duration::from_secs(1));
    assert_eq!(get(addr, "/").await.body, body);
    assert_eq!(upstream.hits(), 2);
    running.shutdown().await;
}

#[tokio::test]
async fn retry_after_opens_the_endpoint_until_then() {
    assert_left_alone_after_retry_after(503, "busy", "30", 30).await;
}

#[tokio::test]
async fn a_429_with_retry_after_opens_the_endpoint_for_at_most_five_minutes() {
    // A day asked for, five minutes given.
    assert_left_alone_after_retry_after(429, "slow down", "86400", 300).await;
}
