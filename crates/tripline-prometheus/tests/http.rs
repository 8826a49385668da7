//! The `/metrics` endpoint over real HTTP: negotiation, methods, paths, a
//! streamed large scrape, and the tower service.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/client.rs"]
mod client;

use std::net::SocketAddr;

use http::{Method, StatusCode};
use tokio::net::TcpListener;
use tower_service::Service;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock};
use tripline_prometheus::http::{Format, MetricsHandler, serve};
use tripline_prometheus::{Detail, Exporter};

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

async fn start(exporter: &Exporter) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, MetricsHandler::new(exporter)));
    addr
}

fn exporter_with_breaker() -> Exporter {
    let exporter = Exporter::default();
    // A manual clock: time in state stays put between two scrapes.
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            name: "payments".into(),
            ..Default::default()
        })
        .clock(ManualClock::new())
        .build()
        .unwrap();
    exporter.register_breaker(&b, Detail::Full).unwrap();
    exporter
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiates_openmetrics_or_text() {
    let exporter = exporter_with_breaker();
    let addr = start(&exporter).await;
    for (accept, format) in [
        (Some(PROMETHEUS_ACCEPT), Format::OpenMetrics),
        (Some("application/openmetrics-text"), Format::OpenMetrics),
        (Some("text/plain;version=0.0.4"), Format::PrometheusText),
        (
            Some("text/plain;q=0.9, application/openmetrics-text;q=0.2"),
            Format::PrometheusText,
        ),
        (
            Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily"),
            Format::PrometheusText,
        ),
        (None, Format::PrometheusText),
    ] {
        let a = client::request(addr, Method::GET, "/metrics", accept).await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(
            a.headers["content-type"],
            format.content_type(),
            "{accept:?}"
        );
        assert_eq!(a.body, exporter.render(format).unwrap(), "{accept:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_and_paths() {
    let addr = start(&exporter_with_breaker()).await;
    let head = client::request(addr, Method::HEAD, "/metrics", None).await;
    assert_eq!((head.status, head.body.as_str()), (StatusCode::OK, ""));
    let post = client::request(addr, Method::POST, "/metrics", None).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post.headers["allow"], "GET, HEAD");
    assert_eq!(client::get(addr, "/").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_scrape_streams_whole() {
    let exporter = Exporter::default();
    let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    for k in 0..3_000 {
        registry.get(&k).unwrap();
    }
    exporter
        .register_registry(&registry, Detail::Essential)
        .unwrap();
    let addr = start(&exporter).await;
    let a = client::request(addr, Method::GET, "/metrics", Some(PROMETHEUS_ACCEPT)).await;
    assert!(
        a.headers.get("content-length").is_none(),
        "streamed in chunks"
    );
    assert!(
        a.body.len() > 64 * 1024 * 4,
        "several chunks: {}",
        a.body.len()
    );
    assert!(a.body.ends_with("# EOF\n"));
    let lines = a
        .body
        .lines()
        .filter(|l| l.starts_with("tripline_breaker_state_code{"))
        .count();
    assert_eq!(lines, 3_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_is_a_tower_service() {
    let exporter = exporter_with_breaker();
    let mut handler = MetricsHandler::new(&exporter);
    let req = http::Request::get("/anything").body(()).unwrap();
    let resp = handler.call(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, exporter.render(Format::PrometheusText).unwrap());
}

#[test]
fn outside_a_runtime_the_body_is_encoded_at_once() {
    use hyper::body::Body;
    let handler = MetricsHandler::new(&exporter_with_breaker());
    let resp = handler.respond(&http::Request::get("/metrics").body(()).unwrap());
    assert!(resp.body().size_hint().exact().is_some_and(|n| n > 100));
}
