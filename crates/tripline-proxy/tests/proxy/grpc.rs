//! gRPC: `grpc-status` in the trailers (or a trailers-only answer's
//! headers) decides the outcome the endpoint's breaker records.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline::State;

use crate::support::*;

/// An h2c gRPC-style upstream: HTTP 200, then `grpc-status: <status>` in
/// the trailers (or in the headers, trailers-only, when `in_headers`).
async fn grpc_upstream(status: &'static str, in_headers: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service_fn(
                move |_req: http::Request<hyper::body::Incoming>| async move {
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
                },
            );
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    addr
}

/// Endpoint breakers that open on 3 failures out of 3.
const CLUSTER: &str = r#"protocol = "h2c"
breaker = { window = { kind = "count", size = 3 }, minimum_calls = 3, failure_rate_threshold = 0.5, open_duration = "30s" }"#;

async fn breaker_after_three_calls(status: &'static str, in_headers: bool) -> (State, u64, u64) {
    let upstream = grpc_upstream(status, in_headers).await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", CLUSTER)).await;
    // A gRPC client speaks HTTP/2: trailers reach it.
    let h2: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
    for _ in 0..3 {
        let req = http::Request::post(format!("http://{addr}/pkg.Service/Call"))
            .header("content-type", "application/grpc")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = tokio::time::timeout(BOUND, h2.request(req))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 200, "HTTP says 200 either way");
        let body = tokio::time::timeout(BOUND, response.into_body().collect())
            .await
            .unwrap()
            .unwrap();
        let trailers = body.trailers().cloned();
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
