//! End to end through the tower stack: a real hyper client, protected by
//! the fallback, deadline and pipeline layers, against a local HTTP server
//! whose faults the test controls. Nothing here waits on time: the faults
//! are status codes and the assertions count what reached the server.
#![cfg(all(feature = "tower", feature = "tokio"))]
// Test helpers outside #[test] fns too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tripline::fallback::{Fallback, FallbackSource, FallbackValue};
use tripline::pipeline::Pipeline;
use tripline::retry::{RetryBackoff, RetryConfig};
use tripline::timeout::{TimeoutConfig, TokioTimer};
use tripline::tower::{
    BoxError, DeadlineLayer, FallbackLayer, PipelineLayer, http_retry_decision, http_retryable,
};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, State, WindowConfig};

/// The server's script: the status of each next request (200 when empty),
/// and what it saw.
#[derive(Default)]
struct Faults {
    script: VecDeque<u16>,
    hits: u32,
    deadline_headers: Vec<Option<String>>,
}

async fn server(faults: Arc<Mutex<Faults>>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let faults = faults.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let status = {
                            let mut f = faults.lock().unwrap();
                            f.hits += 1;
                            let h = req
                                .headers()
                                .get("tripline-timeout-ms")
                                .map(|v| v.to_str().unwrap().to_owned());
                            f.deadline_headers.push(h);
                            f.script.pop_front().unwrap_or(200)
                        };
                        async move {
                            Ok::<_, hyper::Error>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from(format!("status {status}"))))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Bytes>;

/// A real hyper client: one connection per request, body collected.
fn client(
    addr: SocketAddr,
) -> impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static {
    tower::service_fn(move |req: Req| async move {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let resp = sender.send_request(req).await?;
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await?.to_bytes();
        Ok::<_, BoxError>(http::Response::from_parts(parts, bytes))
    })
}

fn get(path: &str) -> Req {
    http::Request::get(path).body(Full::default()).unwrap()
}

fn status(r: &Result<Resp, BoxError>) -> Option<u16> {
    r.as_ref().ok().map(|r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tower_stack_protects_a_real_http_client() {
    let faults = Arc::new(Mutex::new(Faults::default()));
    let addr = server(faults.clone()).await;
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 4,
            failure_rate_threshold: 0.5,
            open_duration: tripline::breaker::OpenDuration::Fixed(Duration::from_secs(3600)),
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::None,
            ..Default::default()
        })
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_secs(30)),
            ..Default::default()
        })
        .clock(TokioTimer.clock())
        .build()
        .unwrap();
    let classify = |r: &Result<Resp, BoxError>| match status(r) {
        Some(s) => Outcome::from_http_status(s),
        None => Outcome::Failure,
    };
    let mut svc = ServiceBuilder::new()
        .layer(
            DeadlineLayer::new(TokioTimer.clock(), Some(Arc::new(TokioTimer)))
                .default_budget(Duration::from_secs(60)),
        )
        .layer(
            PipelineLayer::new(pipeline.clone())
                .classify(classify)
                .retry_on(http_retry_decision::<Bytes>)
                .idempotency(http_retryable::<Full<Bytes>>),
        )
        .service(client(addr));
    let hits = |f: &Arc<Mutex<Faults>>| f.lock().unwrap().hits;

    // 1. Two 503s, then a 200: retried to success, one logical call for the breaker.
    faults.lock().unwrap().script.extend([503, 503]);
    let r = svc.ready().await.unwrap().call(get("/a")).await;
    assert_eq!(status(&r), Some(200));
    assert_eq!(hits(&faults), 3);
    assert_eq!(breaker.metrics().calls.successful, 1);
    // The deadline travelled to the server, shrinking.
    let seen = faults.lock().unwrap().deadline_headers.clone();
    let ms: Vec<u64> = seen
        .iter()
        .map(|h| h.as_ref().unwrap().parse().unwrap())
        .collect();
    assert!(ms[0] <= 60_000 && ms[0] > 59_000, "{ms:?}");

    // 2. A POST without an idempotency key is not retried.
    faults.lock().unwrap().script.extend([503]);
    let post = http::Request::post("/pay").body(Full::default()).unwrap();
    let r = svc.ready().await.unwrap().call(post).await;
    assert_eq!(status(&r), Some(503));
    assert_eq!(hits(&faults), 4);

    // 3. The server fails hard: 503 forever. The breaker trips on logical calls…
    faults.lock().unwrap().script.extend([503; 64]);
    for _ in 0..3 {
        let _ = svc.ready().await.unwrap().call(get("/a")).await;
    }
    assert_eq!(breaker.state(), State::Open);
    let before = hits(&faults);
    // … and then rejects locally: the server sees nothing more.
    for _ in 0..20 {
        let e = svc
            .ready()
            .await
            .unwrap()
            .call(get("/a"))
            .await
            .unwrap_err();
        assert!(e.is::<tripline::tower::Rejected>(), "{e}");
    }
    assert_eq!(hits(&faults), before);

    // 4. With a fallback outermost the caller gets marked degraded data.
    let fallback = Fallback::builder()
        .on_rejected(FallbackValue::Static(http::Response::new(
            Bytes::from_static(b"cached page"),
        )))
        .build()
        .unwrap();
    let mut degraded = FallbackLayer::new(fallback).layer(svc.clone());
    let served = degraded
        .ready()
        .await
        .unwrap()
        .call(get("/a"))
        .await
        .unwrap();
    assert_eq!(served.value.body(), &Bytes::from_static(b"cached page"));
    let marker = served.degraded.expect("marked degraded");
    assert_eq!(marker.source, FallbackSource::Static);
    assert_eq!(hits(&faults), before);

    // 5. The server recovers; an operator closes the breaker; calls flow.
    faults.lock().unwrap().script.clear();
    breaker.reset();
    let r = svc.ready().await.unwrap().call(get("/a")).await;
    assert_eq!(status(&r), Some(200));
}
