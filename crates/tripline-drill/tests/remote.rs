//! A drill against a proxy it did not build, reached over HTTP only: a
//! real `tripline-proxy` on 127.0.0.1, behind a small admin front that
//! forwards `/api/faults` and `/metrics` to the proxy's admin listener
//! and serves the proxy's breaker transitions as Server-Sent Events at
//! `/api/events`, in the shape the proxy's admin API documents.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, channel::Channel};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline_drill::{Drill, parse_sse_transition, subscribe_sse};
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `answer` on a free port.
async fn serve<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = answer.clone();
            let service = service_fn(move |req| {
                let answer = answer.clone();
                async move { Ok::<_, Infallible>(answer(req).await) }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

fn full(text: impl Into<Bytes>) -> Body {
    Full::new(text.into()).boxed()
}

/// One SSE `transition` event in the admin API's shape.
fn sse_event(breaker: &str, from: &str, to: &str, reason: &str) -> String {
    let data = serde_json::json!({
        "breaker": breaker, "from": from, "to": to, "reason": reason,
        "at": "2026-12-01T07:00:00Z", "message": format!("{breaker}: {from} → {to}"),
        "window": {"calls": 10, "failures": 6, "slow": 0},
    });
    format!("event: transition\ndata: {data}\n\n")
}

/// The admin front of `proxy`, whose own admin listener is `admin`.
async fn admin_front(proxy: Proxy, admin: SocketAddr) -> SocketAddr {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    serve(move |req: Request<Incoming>| {
        let (proxy, client) = (proxy.clone(), client.clone());
        async move {
            if req.uri().path() == "/api/events" {
                let (mut tx, body) = Channel::<Bytes, Infallible>::new(16);
                let (events, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let sub = proxy.route_breaker("api").unwrap().subscribe(move |e| {
                    if let tripline::breaker::EventKind::Transition(t) = &e.kind {
                        let _ = events.send(sse_event(
                            &e.breaker,
                            t.from.as_str(),
                            t.to.as_str(),
                            t.reason.as_str(),
                        ));
                    }
                });
                tokio::spawn(async move {
                    let _sub = sub;
                    // A comment and another kind of event come first: skipped.
                    let _ = tx
                        .send_data(Bytes::from(": hello\r\n\r\nevent: ping\ndata: {}\n\n"))
                        .await;
                    while let Some(e) = rx.recv().await {
                        if tx.send_data(Bytes::from(e)).await.is_err() {
                            break;
                        }
                    }
                });
                let mut r = Response::new(body.boxed());
                r.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                return r;
            }
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let uri = format!("http://{admin}{}", parts.uri.path());
            let forwarded = Request::builder()
                .method(parts.method)
                .uri(uri)
                .body(Full::new(bytes))
                .unwrap();
            let res = client.request(forwarded).await.unwrap();
            let status = res.status();
            let bytes = res.into_body().collect().await.unwrap().to_bytes();
            let mut r = Response::new(full(bytes));
            *r.status_mut() = status;
            r
        }
    })
    .await
}

#[test]
fn sse_blocks_other_than_transitions_are_skipped() {
    let block = sse_event("api", "closed", "open", "failure_rate");
    assert_eq!(
        parse_sse_transition(&block),
        Some((
            "api".into(),
            "closed".into(),
            "open".into(),
            "failure_rate".into()
        ))
    );
    assert_eq!(parse_sse_transition(": keep-alive\n\n"), None);
    assert_eq!(parse_sse_transition("event: ping\ndata: {}\n\n"), None);
    assert_eq!(
        parse_sse_transition("event: transition\ndata: not json\n\n"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_against_a_running_proxy_trips_recovers_and_clears_its_faults() {
    let upstream = serve(|_req| async { Response::new(full("ok")) }).await;
    let config = ProxyConfig::from_toml(&format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 10 }}, minimum_calls = 5, failure_rate_threshold = 0.5, open_duration = "500ms" }}
[clusters.backend]
endpoints = ["{upstream}"]
"#
    ))
    .unwrap();
    let proxy = Proxy::try_new(config).unwrap();
    let running = proxy.start().await.unwrap();
    let admin = running.admin_addr().unwrap();
    let front = admin_front(proxy.clone(), admin).await;
    let drill = Drill::from_toml(
        "remote.toml",
        &format!(
            r#"
[target]
admin = "http://{front}"
url = "http://{}"
[load]
rate = 40.0
duration = "4s"
[[phase]]
from = "1s"
to = "2.5s"
route = "api"
abort = {{ status = 503 }}
[expect]
trip_within = "1s"
false_trips = 0
recover_within = "2s"
max_retry_amplification = 1.0
"#,
            running.local_addrs()[0]
        ),
        Path::new("."),
    )
    .unwrap();

    let outcome = tokio::time::timeout(Duration::from_secs(20), tripline_drill::run(&drill))
        .await
        .expect("a drill stops by itself")
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:#?}");
    assert!(
        outcome
            .transitions
            .iter()
            .any(|t| t.breaker == "api" && t.from == "closed" && t.to == "open"),
        "the trip arrived over SSE: {:?}",
        outcome.transitions
    );
    let amplification = outcome.measured.retry_amplification.unwrap();
    assert!(
        amplification > 0.0 && amplification <= 1.0,
        "{amplification}"
    );

    // The drill switched its fault off: none is left on the proxy.
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let res = client
        .get(format!("http://{admin}/api/faults").parse().unwrap())
        .await
        .unwrap();
    let listed: serde_json::Value =
        serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(listed["faults"], serde_json::json!([]), "{listed}");
    running.shutdown().await;
}

#[tokio::test]
async fn a_proxy_without_an_event_stream_is_refused_at_once() {
    let not_found = serve(|_req| async {
        let mut r = Response::new(full("no such page"));
        *r.status_mut() = http::StatusCode::NOT_FOUND;
        r
    })
    .await;
    let err = subscribe_sse(&format!("http://{not_found}"), tokio::time::Instant::now())
        .await
        .err()
        .expect("refused");
    let message = err.to_string();
    assert!(message.contains("/api/events answered 404"), "{message}");
}
