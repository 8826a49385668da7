//! The admin listener: `GET /metrics`, the admin API under `/api/` and
//! the live dashboard at `GET /`.
//!
//! | path | what |
//! |---|---|
//! | `GET /` | the [dashboard](dashboard) |
//! | `GET /metrics` | Prometheus, through `tripline-prometheus`'s [`MetricsHandler`] |
//! | `GET /api/breakers`, `GET /api/breakers/{name}` | every breaker: state, window, rates, open-until, recent transitions ([`breakers`]) |
//! | `POST /api/breakers/{name}/force-open\|disable\|metrics-only\|reset` | operator overrides |
//! | `GET /api/outliers` | per cluster, endpoints' ejections and panic mode ([`outliers`]) |
//! | `GET`/`PUT /api/config` | the config in force; replace it like a reload ([`config_api`]) |
//! | `GET /api/audit` | configs applied and refused (reloads, `PUT /api/config`, and documents from the `[config_source]`), operator actions ([`audit`]) |
//! | `GET /api/events` | Server-Sent Events: transitions, ejections, config documents ([`events`]) |
//! | `/api/faults` | fault drills ([`faults`]) |
//!
//! `docs/admin-api.yaml` describes them (OpenAPI 3); a test keeps it and
//! [`ROUTES`] in step. With `[admin] token` set, every mutating call needs
//! it as a bearer token ([`auth`]); without one, only the machine's own
//! programs and the dashboard may call: a request must name a loopback
//! host, come from no other web page, and declare its body's type
//! ([`browser`]).
//!
//! It is a listener of its own, never a data-plane one, so a scrape is not
//! routed, counted or refused like traffic, and a route cannot shadow it.
//! The listener drains with the proxy: it stops accepting when the drain
//! starts, event streams end, and calls in flight finish within the drain
//! timeout.

mod api;
mod audit;
mod auth;
mod breakers;
mod browser;
mod config_api;
mod dashboard;
mod events;
mod faults;
mod fleet;
mod hub;
#[cfg(test)]
mod openapi_sync;
mod outliers;
mod readiness;
mod respond;

pub(crate) use config_api::after_reload;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use self::audit::Audit;
use self::auth::AdminToken;
use self::hub::Hub;
use self::respond::{AdminBody, error, from_metrics, json};
use crate::config::{ConfigError, ProxyConfig};
use crate::control::Control;
use crate::http::drain::{accept_until_drain, serve_until_cut};
use crate::table::Table;

/// Accepts admin connections until the drain starts.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    inner: Arc<Control>,
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
    inner: Arc<Control>,
    header_read_timeout: Duration,
    mut stop: watch::Receiver<u8>,
    _alive: mpsc::Sender<()>,
) {
    let streams = stop.clone();
    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
        let inner = inner.clone();
        let streams = streams.clone();
        async move { Ok::<_, Infallible>(answer(inner, req, streams).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    serve_until_cut!(std::pin::pin!(conn), &mut stop);
}

/// Every path the admin listener serves, by method, as the OpenAPI file
/// names them.
pub(crate) const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/metrics"),
    ("GET", "/healthz"),
    ("GET", "/ready"),
    ("GET", "/api/drain"),
    ("POST", "/api/drain"),
    ("DELETE", "/api/drain"),
    ("GET", "/api/breakers"),
    ("GET", "/api/breakers/{name}"),
    ("POST", "/api/breakers/{name}/force-open"),
    ("POST", "/api/breakers/{name}/disable"),
    ("POST", "/api/breakers/{name}/metrics-only"),
    ("POST", "/api/breakers/{name}/reset"),
    ("GET", "/api/outliers"),
    ("GET", "/api/fleet"),
    ("GET", "/api/config"),
    ("PUT", "/api/config"),
    ("GET", "/api/audit"),
    ("GET", "/api/events"),
    ("GET", "/api/faults"),
    ("POST", "/api/faults"),
    ("DELETE", "/api/faults"),
    ("DELETE", "/api/faults/{id}"),
];

/// The admin side of a proxy: the token, the event hub, the audit ring.
pub(crate) struct AdminState {
    pub(crate) token: AdminToken,
    pub(crate) hub: Arc<Hub>,
    pub(crate) audit: Audit,
    /// Whether there is an admin listener at all: without one nothing
    /// subscribes to the breakers, so their events cost nothing extra.
    enabled: bool,
    /// The listener is bound to a loopback address: every request must
    /// name a loopback host, token or not (see [`browser`]).
    on_loopback: bool,
}

impl AdminState {
    /// From the `[admin]` section; reads `token_file`.
    pub(crate) fn build(config: &ProxyConfig) -> Result<AdminState, ConfigError> {
        Ok(AdminState {
            token: AdminToken::load(config.admin.as_ref())?,
            hub: Hub::new(),
            audit: Audit::default(),
            enabled: config.admin.is_some(),
            on_loopback: config.admin.as_ref().is_some_and(|a| {
                a.address
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|addr| addr.ip().is_loopback())
            }),
        })
    }

    /// Registers the admin listener's own metrics (SSE events dropped).
    pub(crate) fn register(
        &self,
        registry: &mut prometheus_client::registry::Registry,
        prefix: &str,
    ) {
        registry.register(
            format!("{prefix}_proxy_events_dropped"),
            "Events /api/events readers lost by falling behind the feed, summed over readers",
            self.hub.dropped.clone(),
        );
    }

    /// Subscribes the hub to `table`'s breakers and clusters.
    pub(crate) fn follow(&self, table: &Table) {
        if self.enabled {
            self.hub.follow(table);
        }
    }
}

/// Puts every record of the `[config_source]` applier into the audit log
/// and the event feed (`event: config`), as it is made.
pub(crate) fn follow_applier(inner: &Arc<Control>, applier: &tripline_config::Applier) {
    let weak = Arc::downgrade(inner);
    applier.subscribe(move |record| {
        if let Some(inner) = weak.upgrade() {
            let value = inner.admin.audit.record_config(record);
            inner.admin.hub.publish("config", &value);
        }
    });
}

/// Routes one admin request.
async fn answer<B>(
    inner: Arc<Control>,
    req: Request<B>,
    streams: watch::Receiver<u8>,
) -> Response<AdminBody>
where
    B: http_body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let admin = &inner.admin;
    if let Some(denied) = admin.token.check(req.method(), req.headers()) {
        return denied;
    }
    let refused = match (admin.token.is_set(), admin.on_loopback) {
        (false, _) => browser::refuse_foreign(req.method(), req.uri(), req.headers()),
        (true, true) => browser::refuse_rebinding(req.method(), req.uri(), req.headers()),
        (true, false) => None,
    };
    if let Some(refused) = refused {
        return refused;
    }
    let who = if admin.token.is_set() {
        "admin-api"
    } else {
        "local"
    };
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let proxy = &*inner;
    let get_only = |value: fn(&Table, &AdminState) -> serde_json::Value| {
        if method == Method::GET {
            json(StatusCode::OK, &value(&inner.table.load(), admin))
        } else {
            not_allowed("GET")
        }
    };
    match path.as_str() {
        "/" => dashboard::page(&method),
        "/healthz" => readiness::healthz(&method),
        "/ready" => readiness::ready(proxy, &method, &streams),
        "/api/drain" => readiness::drain(proxy, &method, who),
        "/metrics" => from_metrics(inner.metrics.handler().respond(&req)),
        "/api/breakers" if method == Method::GET => {
            let applier = inner.config_source.as_ref().map(|c| c.applier());
            json(
                StatusCode::OK,
                &breakers::list(&inner.table.load(), &admin.hub, applier),
            )
        }
        "/api/breakers" => not_allowed("GET"),
        "/api/outliers" if method == Method::GET => {
            let mut value = outliers::list(&inner.table.load(), &admin.hub);
            inner.discovery.annotate(&mut value);
            inner.health.annotate(&mut value);
            json(StatusCode::OK, &value)
        }
        "/api/outliers" => not_allowed("GET"),
        "/api/fleet" => fleet::answer(proxy, &method).await,
        "/api/audit" => get_only(|_, a| a.audit.to_json()),
        "/api/config" => match method {
            Method::GET => config_api::get(proxy),
            Method::PUT => {
                let format = config_api::format_of(req.headers());
                config_api::put(proxy, req.into_body(), format, who).await
            }
            _ => not_allowed("GET, PUT"),
        },
        "/api/events" if method == Method::GET => events::stream(&admin.hub, streams),
        "/api/events" => not_allowed("GET"),
        p if faults::serves(p) => {
            let response = faults::answer(&inner, req).await;
            if method != Method::GET && response.status().is_success() {
                admin.audit.record(audit::Entry {
                    source: "admin-api",
                    who,
                    action: "fault",
                    target: None,
                    summary: format!("{method} {path} → {}", response.status().as_u16()),
                });
            }
            from_metrics(response)
        }
        p => match p.strip_prefix("/api/breakers/") {
            Some(rest) => {
                let applier = inner.config_source.as_ref().map(|c| c.applier());
                api::breaker_call(&inner.table.load(), admin, applier, &method, rest, who)
            }
            None => error(
                StatusCode::NOT_FOUND,
                &format!("no admin path {p:?}"),
                &[(
                    "paths",
                    serde_json::json!(ROUTES.iter().map(|(_, p)| *p).collect::<Vec<_>>()),
                )],
            ),
        },
    }
}

/// 405 with the methods the path takes.
pub(crate) fn not_allowed(allow: &'static str) -> Response<AdminBody> {
    let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed", &[]);
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    r
}
