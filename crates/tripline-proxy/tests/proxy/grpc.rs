//! gRPC: `grpc-status` in the trailers (or a trailers-only answer's
//! headers) decides the outcome the endpoint's breaker records; the
//! remaining deadline reaches the upstream in `grpc-timeout`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline::State;
use tripline::timeout::{parse_grpc_timeout, parse_timeout_ms};

use crate::support::*;

/// The headers of every request an upstream got, in arrival order.
type Heads = Arc<Mutex<Vec<http::HeaderMap>>>;

/// An h2c gRPC-style upstream: HTTP 200, then `grpc-status: <status>` in
/// the trailers (or in the headers, trailers-only, when `in_headers`).
async fn grpc_upstream(status: &'static str, in_headers: bool) -> (std::net::SocketAddr, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Heads::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                seen.lock().unwrap().push(req.headers().clone());
                async move {
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static(status));
                    let body = if in_headers {
                        Full::new(Bytes::new()).map_err(|n| match n {}).boxed()
                    } else {
                        Full::new(Bytes::from_static(b"\0\0\0\0\0"))
                            .with_trailers(async move { Some(Ok(trailers)) })
                            .map_err(|n: std::convert::Infallible| match n {})
                            .boxed()
                    };
                    let mut response = http::Response::new(body);
                    response.headers_mut().insert(
                        "content-type",
                        http::HeaderValue::from_static("application/grpc"),
                    );
                    if in_headers {
                        response
                            .headers_mut()
                            .insert("grpc-status", http::HeaderValue::from_static(status));
                    }
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    (addr, heads)
}

/// One gRPC-style call (HTTP/2, `content-type: application/grpc`, plus
/// `headers`) through the proxy at `addr`; its answer is read whole and
/// its trailers returned (a gRPC client speaks HTTP/2: trailers reach it).
async fn grpc_call(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
) -> Option<http::HeaderMap> {
    let h2: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let mut req = http::Request::post(format!("http://{addr}/pkg.Service/Call"))
        .header("content-type", "application/grpc");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req.body(Full::new(Bytes::new())).unwrap();
    let response = tokio::time::timeout(BOUND, h2.request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200, "HTTP says 200 either way");
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .unwrap()
        .unwrap();
    body.trailers().cloned()
}

/// Endpoint breakers that open on 3 failures out of 3.
const CLUSTER: &str = r#"protocol = "h2c"
breaker = { window = { kind = "count", size = 3 }, minimum_calls = 3, failure_rate_threshold = 0.5, open_duration = "30s" }"#;

async fn breaker_after_three_calls(status: &'static str, in_headers: bool) -> (State, u64, u64) {
    let (upstream, _) = grpc_upstream(status, in_headers).await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", CLUSTER)).await;
    for _ in 0..3 {
        let trailers = grpc_call(addr, &[]).await;
        if !in_headers {
            assert_eq!(
                trailers.unwrap()["grpc-status"],
                status,
                "trailers pass through"
            );
        }
    }
    let breaker = endpoint_breaker(&proxy, upstream);
    // The outcome is recorded when the proxy reads the body's end, which
    // may be just after the client saw it: wait for it, bounded.
    tokio::time::timeout(BOUND, async {
        while breaker.metrics().calls.failed + breaker.metrics().calls.successful < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every answer's outcome is recorded");
    let calls = breaker.metrics().calls;
    running.shutdown().await;
    (breaker.state(), calls.failed, calls.successful)
}

#[tokio::test]
async fn unavailable_in_the_trailers_is_a_failure_and_opens_the_endpoint_breaker() {
    assert_eq!(
        breaker_after_three_calls("14", false).await,
        (State::Open, 3, 0)
    );
}

#[tokio::test]
async fn a_trailers_only_unavailable_is_a_failure_too() {
    assert_eq!(
        breaker_after_three_calls("14", true).await,
        (State::Open, 3, 0)
    );
}

#[tokio::test]
async fn ok_and_not_found_are_answers_not_failures() {
    assert_eq!(
        breaker_after_three_calls("0", false).await,
        (State::Closed, 0, 3)
    );
    assert_eq!(
        breaker_after_three_calls("5", false).await,
        (State::Closed, 0, 3)
    );
}

/// The deadline the upstream was told in its `n`th request: `grpc-timeout`
/// and `tripline-timeout-ms`, parsed.
fn forwarded(heads: &Heads, n: usize) -> (Duration, Duration) {
    let heads = heads.lock().unwrap();
    let head = &heads[n];
    let value = |name: &str| {
        let value = head
            .get(name)
            .unwrap_or_else(|| panic!("no {name}: {head:?}"));
        value.to_str().unwrap().to_owned()
    };
    (
        parse_grpc_timeout(&value("grpc-timeout")).unwrap(),
        parse_timeout_ms(&value("tripline-timeout-ms")).unwrap(),
    )
}

#[tokio::test]
async fn a_grpc_upstream_is_told_the_remaining_deadline_in_grpc_timeout() {
    let (upstream, heads) = grpc_upstream("0", false).await;
    let route = r#"timeout = { overall = "30s" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, CLUSTER)).await;
    grpc_call(addr, &[("grpc-timeout", "5S")]).await;
    let (grpc, ms) = forwarded(&heads, 0);
    let (low, high) = (Duration::from_secs(4), Duration::from_secs(5));
    assert!(
        low < grpc && grpc <= high,
        "the caller's 5 s, less the hop: {grpc:?}"
    );
    assert!(
        low < ms && ms <= high,
        "the same in tripline-timeout-ms: {ms:?}"
    );
    // A gRPC call that came without a deadline gets the route's: a gRPC
    // server knows no other header.
    grpc_call(addr, &[]).await;
    let (grpc, ms) = forwarded(&heads, 1);
    let (low, high) = (Duration::from_secs(29), Duration::from_secs(30));
    assert!(low < grpc && grpc <= high, "the route's 30 s: {grpc:?}");
    assert!(low < ms && ms <= high, "{ms:?}");
    running.shutdown().await;
}

#[tokio::test]
async fn a_per_try_timeout_shorter_than_the_deadline_is_what_a_grpc_upstream_is_told() {
    let (upstream, heads) = grpc_upstream("0", false).await;
    let route = r#"timeout = { per_try = "300ms" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, CLUSTER)).await;
    grpc_call(addr, &[("grpc-timeout", "10S")]).await;
    let (grpc, ms) = forwarded(&heads, 0);
    let per_try = Duration::from_millis(300);
    // The proxy gives up on the try after 300 ms: so must the upstream.
    assert!(!grpc.is_zero() && grpc <= per_try, "{grpc:?}");
    assert!(ms <= per_try, "{ms:?}");
    running.shutdown().await;
}
