//! The admin listener: `GET /metrics`, and the fault-drill API
//! `/api/faults` (see [`faults`]).
//!
//! It is a listener of its own, never a data-plane one, so a scrape is not
//! routed, counted or refused like traffic, and a route cannot shadow it.
//! The answer is `tripline-prometheus`'s [`MetricsHandler`]: content
//! negotiation (OpenMetrics or the text format), HEAD, 405 for other
//! methods, streamed encoding off the runtime's workers. Any other path
//! is 404. The listener drains with the proxy: it stops accepting when the
//! drain starts, and scrapes in flight finish within the drain timeout.

mod faults;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tripline_prometheus::http::{MetricsBody, MetricsHandler};

use crate::proxy::Inner;
use crate::server::{CUT, DRAINING, accept_until_drain, reached};

/// Accepts admin connections until the drain starts.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    inner: Arc<Inner>,
    header_read_timeout: Duration,
    stop: watch::Receiver<u8>,
    alive: mpsc::Sender<()>,
) {
    accept_until_drain(listener, stop, "admin accept failed", |stream, _, stop| {
        tokio::spawn(serve(
            stream,
            inner.clone(),
            header_read_timeout,
            stop,
            alive.clone(),
        ));
    })
    .await;
}

/// Serves one admin connection (HTTP/1.1), closing it on drain.
async fn serve(
    stream: TcpStream,
    inner: Arc<Inner>,
    header_read_timeout: Duration,
    mut stop: watch::Receiver<u8>,
    _alive: mpsc::Sender<()>,
) {
    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
        let inner = inner.clone();
        async move {
            let response = if faults::serves(req.uri().path()) {
                faults::answer(&inner, req).await
            } else {
                answer(inner.metrics.handler(), &req)
            };
            Ok::<_, Infallible>(response)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = reached(&mut stop, DRAINING) => {}
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = reached(&mut stop, CUT) => {}
    }
}

/// `/metrics` through the exporter's handler; 404 elsewhere.
fn answer<B>(handler: &MetricsHandler, req: &Request<B>) -> Response<MetricsBody> {
    if req.uri().path() == "/metrics" {
        return handler.respond(req);
    }
    let mut response = Response::new(MetricsBody::from(
        "not found: try /metrics or /api/faults\n",
    ));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tripline_prometheus::Exporter;

    fn status(method: &str, path: &str) -> StatusCode {
        let handler = MetricsHandler::new(&Exporter::default());
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        answer(&handler, &req).status()
    }

    #[test]
    fn only_metrics_is_served() {
        assert_eq!(status("GET", "/metrics"), StatusCode::OK);
        assert_eq!(status("GET", "/"), StatusCode::NOT_FOUND);
        assert_eq!(status("GET", "/metrics/x"), StatusCode::NOT_FOUND);
        assert_eq!(status("POST", "/metrics"), StatusCode::METHOD_NOT_ALLOWED);
    }
}
