//! Test helpers: a hyper server on a free port, and Server-Sent Event
//! blocks in the shape the proxy's admin API sends.

#![allow(dead_code)] // each test binary uses a subset

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

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
