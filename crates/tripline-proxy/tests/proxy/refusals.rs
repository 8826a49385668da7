//! Refusals that do not need a failing upstream: a full bulkhead, a
//! half-open breaker whose probe slot is taken.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::support::*;

#[tokio::test]
async fn a_full_bulkhead_refuses_at_once() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let route = "bulkhead = { max_concurrent = 1 }";
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, "")).await;
    let first = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    let refused = get(addr, "/").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("bulkhead_full"));
    assert_eq!(refused.header("x-tripline-flag"), Some("BF"));
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    // The permit is released with the answer's end: room again.
    let again = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    release.notify_one();
    assert_eq!(again.await.unwrap().status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_half_open_breaker_with_its_probe_taken_refuses_the_rest() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let route = r#"breaker = { open_duration = "5s", half_open = { policy = "consecutive", successes = 1 } }"#;
    let (proxy, running, addr, clock) = start_proxy(&config(&[upstream], route, "")).await;
    proxy
        .route_breaker("api")
        .unwrap()
        .open_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(5));
    let probe = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    let refused = get(addr, "/").await;
    assert_eq!(refused.status, 503);
    assert_eq!(
        refused.header("x-tripline-rejected"),
        Some("half_open_full")
    );
    assert_eq!(refused.header("x-tripline-flag"), Some("HF"));
    assert_eq!(refused.header("x-tripline-breaker"), Some("api"));
    release.notify_one();
    assert_eq!(probe.await.unwrap().status, 200);
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Closed
    );
    running.shutdown().await;
}
