//! A real hyper client protected by tripline's tower layers, calling a
//! local HTTP server that fails in the usual ways.
//!
//! ```text
//! cargo run -p tripline --example flaky_http --features tower,tokio
//! ```
//!
//! The server (on 127.0.0.1, an ephemeral port) answers 503 to one request
//! in ten, hangs for 2 s on one in seven, and goes down completely
//! (always 503) for 1.5 s from its 40th request. The client stack, outermost first:
//! fallback → deadline → pipeline (retry with budget → breaker → bulkhead →
//! per-attempt timeout) → hyper. The run makes 120 requests, prints what
//! each got, and a summary; it stops by itself in a few seconds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tower::{Service, ServiceBuilder, ServiceExt};
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::fallback::{Fallback, FallbackValue};
use tripline::pipeline::Pipeline;
use tripline::retry::{RetryBackoff, RetryConfig};
use tripline::timeout::{TimeoutConfig, TokioTimer};
use tripline::tower::{
    BoxError, DeadlineLayer, FallbackLayer, PipelineLayer, http_retry_decision, http_retryable,
};
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, WindowConfig};

type Req = http::Request<Full<Bytes>>;
type Resp = http::Response<Bytes>;

/// The flaky server; returns its address and its hit counter.
async fn flaky_server() -> Result<(SocketAddr, Arc<AtomicU32>), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let hits = Arc::new(AtomicU32::new(0));
    let counter = hits.clone();
    let outage = Arc::new(std::sync::Mutex::new(None::<tokio::time::Instant>));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (counter, outage) = (counter.clone(), outage.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    let now = tokio::time::Instant::now();
                    let down = {
                        let mut started = outage.lock().unwrap_or_else(|e| e.into_inner());
                        if n == 40 {
                            *started = Some(now);
                        }
                        started.is_some_and(|t| now < t + Duration::from_millis(1500))
                    };
                    async move {
                        if n % 7 == 6 {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                        }
                        let status = if down || n % 10 == 9 { 503 } else { 200 };
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(format!("reply {n}"))))
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok((addr, hits))
}

/// A hyper client as a tower service: one connection per request.
fn hyper_client(
    addr: SocketAddr,
) -> impl Service<Req, Response = Resp, Error = BoxError, Future: Send> + Clone + Send + 'static {
    tower::service_fn(move |req: Req| async move {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let (parts, body) = sender.send_request(req).await?.into_parts();
        Ok::<_, BoxError>(http::Response::from_parts(
            parts,
            body.collect().await?.to_bytes(),
        ))
    })
}

fn status(r: &Result<Resp, BoxError>) -> Option<u16> {
    r.as_ref().ok().map(|r| r.status().as_u16())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (addr, hits) = flaky_server().await?;
    let clock = TokioTimer.clock();
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "flaky".into(),
            window: WindowConfig::Count { size: 20 },
            minimum_calls: 10,
            failure_rate_threshold: 0.5,
            open_duration: tripline::breaker::OpenDuration::Fixed(Duration::from_millis(300)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()?;
    let budget = RetryBudget::with_clock(
        RetryBudgetConfig {
            ratio: 0.2,
            min_retries_per_second: 2.0,
            ..Default::default()
        },
        clock.clone(),
    )?;
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::DecorrelatedJitter {
                base: Duration::from_millis(10),
                max: Duration::from_millis(100),
            },
            ..Default::default()
        })
        .budget(budget.clone())
        .bulkhead(Bulkhead::try_new(BulkheadConfig {
            max_concurrent: 8,
            ..Default::default()
        })?)
        .timeouts(TimeoutConfig {
            per_attempt: Some(Duration::from_millis(150)),
            overall: Some(Duration::from_millis(600)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()?;
    let fallback = Fallback::builder()
        .on_any(FallbackValue::Static(http::Response::new(
            Bytes::from_static(b"(fallback page)"),
        )))
        .build()?;
    let mut svc = ServiceBuilder::new()
        .layer(FallbackLayer::new(fallback))
        .layer(DeadlineLayer::new(
            clock.clone(),
            Some(Arc::new(TokioTimer)),
        ))
        .layer(
            PipelineLayer::new(pipeline.clone())
                .classify(|r: &Result<Resp, BoxError>| match status(r) {
                    Some(s) => Outcome::from_http_status(s),
                    None => Outcome::Failure,
                })
                .retry_on(http_retry_decision::<Bytes>)
                .idempotency(http_retryable::<Full<Bytes>>),
        )
        .service(hyper_client(addr));

    let (mut fresh, mut degraded, mut errors) = (0, 0, 0);
    for i in 0..120 {
        let req = http::Request::get("/item").body(Full::default())?;
        match svc.ready().await?.call(req).await {
            Ok(served) if served.is_degraded() => {
                degraded += 1;
                let d = served
                    .degraded
                    .map(|d| format!("{:?}", d.reason))
                    .unwrap_or_default();
                println!("{i:3}: degraded ({d}), breaker {}", breaker.state());
            }
            Ok(served) => {
                fresh += 1;
                println!("{i:3}: {} {:?}", served.value.status(), served.value.body());
            }
            Err(e) => {
                errors += 1;
                println!("{i:3}: error: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let retry = pipeline.retry_stats().unwrap_or_default();
    println!(
        "\n{fresh} fresh, {degraded} degraded, {errors} errors; the server saw {} requests",
        hits.load(Ordering::SeqCst)
    );
    println!(
        "retries {} (refused: budget {}, deadline {}, circuit open {}); budget {:?}",
        retry.retries,
        retry.refused(tripline::retry::RetryRefusal::Budget),
        retry.refused(tripline::retry::RetryRefusal::Deadline),
        retry.refused(tripline::retry::RetryRefusal::CircuitOpen),
        budget.stats()
    );
    println!("breaker: {:?}", breaker.metrics().calls);
    Ok(())
}
