//! Serving `/metrics`: content negotiation, a tower service, a hyper server.
//!
//! Prometheus asks for OpenMetrics first and accepts the older Prometheus
//! text format (0.0.4); other scrapers (and `curl`) ask for text or for
//! anything. [`Format::negotiate`] picks by the `Accept` header's quality
//! values and falls back to the text format, which every scraper reads.
//!
//! [`MetricsHandler`] answers one request — mount it at `/metrics` in any
//! tower or hyper stack — and [`serve`] is a ready server that does only
//! that. The encoding runs on tokio's blocking pool and streams (see
//! [`MetricsBody`]), so a large scrape neither stalls the runtime's worker
//! threads nor holds the whole exposition in memory.

mod body;

use std::convert::Infallible;
use std::fmt;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

pub use body::{MetricsBody, ScrapeError};

use http::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::exporter::Exporter;

/// An exposition format.
///
/// ```
/// use tripline_prometheus::http::Format;
///
/// // What Prometheus sends:
/// let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert_eq!(Format::negotiate(Some(accept)), Format::OpenMetrics);
/// assert_eq!(Format::negotiate(Some("text/plain")), Format::PrometheusText);
/// assert_eq!(Format::negotiate(None), Format::PrometheusText);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
    /// The Prometheus text format, version 0.0.4.
    PrometheusText,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub const fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format to answer an `Accept` header with: the supported media
    /// range of highest quality (OpenMetrics on a tie), the text format
    /// when none is supported or there is no header.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let mut best: Option<(f32, Format)> = None;
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut version) = (1.0_f32, None);
            for p in parts {
                match p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                    Some(("q", v)) => q = v.parse().unwrap_or(0.0),
                    Some(("version", v)) => version = Some(v.to_string()),
                    _ => {}
                }
            }
            let format = match (media.as_str(), version.as_deref()) {
                ("application/openmetrics-text", None | Some("1.0.0" | "0.0.1")) => {
                    Format::OpenMetrics
                }
                ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => {
                    Format::PrometheusText
                }
                _ => continue,
            };
            let better = match best {
                None => true,
                Some((bq, bf)) => {
                    q > bq || (q == bq && bf != format && format == Format::OpenMetrics)
                }
            };
            if q > 0.0 && better {
                best = Some((q, format));
            }
        }
        best.map_or(Format::PrometheusText, |(_, f)| f)
    }
}

/// Writes everything in `registry` to `out` in `format`.
pub fn encode(registry: &Registry, format: Format, out: &mut impl fmt::Write) -> fmt::Result {
    match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(out, registry),
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(out, registry)
        }
    }
}

impl Exporter {
    /// This exporter's metrics, whole, in `format` (for tests and for
    /// pushing elsewhere; a server streams them with [`MetricsHandler`]).
    pub fn render(&self, format: Format) -> Result<String, fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::new();
        encode(&registry, format, &mut out)?;
        Ok(out)
    }
}

/// Answers metrics requests from a `prometheus_client` registry: GET and
/// HEAD, any path (mount it where it belongs). Cheap to clone.
///
/// ```
/// use http::{Request, StatusCode};
/// use tripline_prometheus::{Exporter, http::MetricsHandler};
///
/// let handler = MetricsHandler::new(&Exporter::default());
/// let req = Request::get("/metrics").header("accept", "text/plain").body(()).unwrap();
/// let resp = handler.respond(&req);
/// assert_eq!(resp.status(), StatusCode::OK);
/// assert_eq!(resp.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
/// ```
#[derive(Clone, Debug)]
pub struct MetricsHandler {
    registry: Arc<Registry>,
}

impl MetricsHandler {
    /// Serves `exporter` alone.
    pub fn new(exporter: &Exporter) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(exporter.clone()));
        Self::with_registry(Arc::new(registry))
    }

    /// Serves a registry of the application's, into which the exporter was
    /// registered as a collector beside the application's own metrics.
    pub fn with_registry(registry: Arc<Registry>) -> Self {
        MetricsHandler { registry }
    }

    /// The response to `req`. Inside a tokio runtime the body streams from
    /// the blocking pool; elsewhere it is encoded at once.
    pub fn respond<B>(&self, req: &Request<B>) -> Response<MetricsBody> {
        let head = req.method() == Method::HEAD;
        if req.method() != Method::GET && !head {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let accept = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        let format = Format::negotiate(accept);
        let body = if head {
            MetricsBody::empty()
        } else if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (tx, rx) = mpsc::channel(body::QUEUE);
            let registry = self.registry.clone();
            rt.spawn_blocking(move || {
                let mut w = body::ChunkWriter::new(tx);
                let result = encode(&registry, format, &mut w);
                w.finish(result);
            });
            MetricsBody::stream(rx)
        } else {
            let mut out = String::new();
            match encode(&self.registry, format, &mut out) {
                Ok(()) => MetricsBody::from(out),
                Err(_) => {
                    return plain(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n");
                }
            }
        };
        let mut resp = Response::new(body);
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(format.content_type()),
        );
        resp
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<MetricsBody> {
    let mut r = Response::new(MetricsBody::from(text));
    *r.status_mut() = status;
    r
}

impl<B> tower_service::Service<Request<B>> for MetricsHandler {
    type Response = Response<MetricsBody>;
    type Error = Infallible;
    type Future = Ready<Result<Response<MetricsBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        ready(Ok(self.respond(&req)))
    }
}

/// Serves `handler` at `/metrics` on `listener` (HTTP/1.1; other paths get
/// 404) until the task is dropped. Accept errors (out of file descriptors)
/// are waited out, not returned.
pub async fn serve(listener: TcpListener, handler: MetricsHandler) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let resp = if req.uri().path() == "/metrics" {
                    handler.respond(&req)
                } else {
                    plain(StatusCode::NOT_FOUND, "not found: try /metrics\n")
                };
                ready(Ok::<_, Infallible>(resp))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
