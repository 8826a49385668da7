//! An admin front for a real proxy: forwards `/api/faults` and
//! `/metrics` to the proxy's admin listener and serves the proxy's route
//! breaker `api` transitions as Server-Sent Events at `/api/events`, in
//! the shape the proxy's admin API documents.

#![allow(dead_code)] // each test binary uses a subset

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, channel::Channel};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline_proxy::Proxy;

pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `answer` on a free port.
pub async fn serve<F, Fut>(answer: F) -> SocketAddr
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

pub fn full(text: impl Into<Bytes>) -> Body {
    Full::new(text.into()).boxed()
}

/// One SSE `transition` event in the admin API's shape.
pub fn sse_event(breaker: &str, from: &str, to: &str, reason: &str) -> String {
    let data = serde_json::json!({
        "breaker": breaker, "from": from, "to": to, "reason": reason,
        "at": "2026-12-01T07:00:00Z", "message": format!("{breaker}: {from} → {to}"),
        "window": {"calls": 10, "failures": 6, "slow": 0},
    });
    format!("event: transition\ndata: {data}\n\n")
}

/// The admin front of `proxy`, whose own admin listener is `admin`.
pub async fn admin_front(proxy: Proxy, admin: SocketAddr) -> SocketAddr {
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
