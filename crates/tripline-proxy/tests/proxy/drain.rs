//! Graceful drain: requests in flight finish, new connections are
//! refused, and a request that will not finish is cut at the drain timeout.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::support::*;

#[tokio::test]
async fn a_request_in_flight_finishes_while_new_connections_are_refused() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let in_flight = tokio::spawn(async move { get(addr, "/").await });
    arrivals.recv().await.unwrap();

    let draining = tokio::spawn(running.shutdown());
    tokio::time::timeout(BOUND, async {
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the listener closes");

    release.notify_one();
    let answer = in_flight.await.unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "done"));
    assert!(draining.await.unwrap().complete);
}

#[tokio::test]
async fn a_request_that_never_finishes_is_cut_at_the_drain_timeout() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release).await;
    let text = config(&[upstream], "", "").replace(
        "[[listeners]]",
        "[proxy]\ndrain_timeout = \"200ms\"\n\n[[listeners]]",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let in_flight = tokio::spawn(async move {
        let req = http::Request::get(format!("http://{addr}/"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        tokio::time::timeout(BOUND, client().request(req)).await
    });
    arrivals.recv().await.unwrap();
    let drained = tokio::time::timeout(BOUND, running.shutdown())
        .await
        .expect("the drain is bounded");
    assert!(!drained.complete);
    let cut = in_flight
        .await
        .unwrap()
        .expect("the client is not left hanging");
    assert!(cut.is_err(), "the cut request's connection closes: {cut:?}");
}
