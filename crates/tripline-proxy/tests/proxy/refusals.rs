//! Refusals that do not need a failing upstream: a full bulkhead (at
//! once, or after waiting in its queue), a half-open breaker whose probe
//! slot is taken.

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

/// A route whose bulkhead holds one request and queues one more, waiting
/// at most `max_wait`.
fn queued_bulkhead(max_wait: &str) -> String {
    format!("bulkhead = {{ max_concurrent = 1, max_queue = 1, max_wait = \"{max_wait}\" }}")
}

#[tokio::test]
async fn over_a_full_bulkhead_one_request_waits_its_turn_and_the_next_is_refused_at_once() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let route = queued_bulkhead("60s");
    let text = config(&[upstream], &route, "") + ADMIN_SECTION;
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().expect("an admin listener");
    let first = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    // Two more while the first holds the only slot (it is held until the
    // refusal has been seen): whichever comes first takes the queue's one
    // place, and the other finds the queue full and is refused without
    // waiting for anything.
    let mut second = tokio::spawn(async move { get(addr, "/").await });
    let mut third = tokio::spawn(async move { get(addr, "/").await });
    let (refused, waiting) = tokio::select! {
        answer = &mut second => (answer.unwrap(), third),
        answer = &mut third => (answer.unwrap(), second),
    };
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("bulkhead_full"));
    assert_eq!(refused.header("x-tripline-flag"), Some("BF"));
    // The other waits in the queue: neither sent upstream nor answered.
    assert!(arrivals.try_recv().is_err(), "only the first was sent");
    assert!(!waiting.is_finished(), "{:?}", waiting.await);
    // The route's bulkhead is exported under the route's name.
    let gauge = |series: &'static str| metric(admin, series);
    assert_eq!(
        gauge("tripline_bulkhead_in_use{name=\"api\"}").await,
        Some(1.0)
    );
    assert_eq!(
        gauge("tripline_bulkhead_queued{name=\"api\"}").await,
        Some(1.0)
    );
    assert_eq!(
        gauge("tripline_bulkhead_rejected_total{name=\"api\"}").await,
        Some(1.0)
    );
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    // The first's slot, freed with the end of its answer, goes to the
    // waiting request: it is sent now, and served.
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("the waiting request is sent once the slot frees");
    release.notify_one();
    let served = waiting.await.unwrap();
    assert_eq!(served.status, 200, "{served:?}");
    assert_eq!(served.body, "done");
    running.shutdown().await;
}

/// Holds the only slot with one request, then checks that a request sent
/// with `headers` waits in the queue at least `waits` and is refused as
/// the bulkhead's (not as a spent deadline: the route had not begun
/// serving it); then that the refused request left the queue, so the
/// route serves as before once the first is done.
async fn assert_queued_then_refused(route: &str, headers: &[(&str, &str)], waits: Duration) {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, "")).await;
    let first = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    let started = tokio::time::Instant::now();
    let refused = send(addr, "GET", "/", headers).await;
    let waited = started.elapsed();
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("bulkhead_full"));
    assert!(
        waited >= waits,
        "refused after {waited:?}, before {waits:?}"
    );
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
    let again = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();
    release.notify_one();
    assert_eq!(again.await.unwrap().status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_queued_request_is_refused_when_its_max_wait_ends() {
    let route = queued_bulkhead("200ms");
    assert_queued_then_refused(&route, &[], Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_queued_request_is_refused_when_its_deadline_comes_before_max_wait() {
    // Waiting out `max_wait` (a minute) would outlast the client's
    // patience (`send` gives up after `BOUND`): the deadline cuts it.
    let route = queued_bulkhead("60s");
    let deadline = [("tripline-timeout-ms", "200")];
    assert_queued_then_refused(&route, &deadline, Duration::from_millis(200)).await;
}
