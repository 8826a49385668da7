//! Balancers that look at load: least-outstanding and power of two
//! choices send new requests away from an endpoint that is still busy.

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;

/// With one request held by endpoint A, every new request goes to B: on
/// two endpoints, P2C always compares both, so it behaves like
/// least-outstanding (round-robin would send every other one to A).
async fn new_requests_avoid_the_busy_endpoint(balancer: &str) {
    let release = Arc::new(tokio::sync::Notify::new());
    let (busy, mut arrivals) = held_upstream(release.clone()).await;
    let idle = Upstream::start(|_| respond(200, "fine")).await;
    let cluster = format!("balancer = \"{balancer}\"");
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[busy, idle.addr], "", &cluster)).await;

    // Requests until one is held by the busy endpoint (ties may go either way).
    let held = loop {
        let mut request = tokio::spawn(get(addr, "/"));
        tokio::select! {
            _ = arrivals.recv() => break request,
            answer = &mut request => assert_eq!(answer.unwrap().body, "fine"),
        }
    };
    let before = idle.hits();
    for _ in 0..20 {
        assert_eq!(get(addr, "/").await.body, "fine", "{balancer}");
    }
    assert_eq!(idle.hits() - before, 20, "{balancer}");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), arrivals.recv())
            .await
            .is_err(),
        "{balancer}: nothing more reached the busy endpoint"
    );
    release.notify_waiters();
    assert_eq!(held.await.unwrap().body, "done");
    running.shutdown().await;
}

#[tokio::test]
async fn least_outstanding_sends_new_requests_away_from_a_busy_endpoint() {
    new_requests_avoid_the_busy_endpoint("least_outstanding").await;
}

#[tokio::test]
async fn p2c_sends_new_requests_away_from_a_busy_endpoint() {
    new_requests_avoid_the_busy_endpoint("p2c").await;
}
