//! `/api/faults`: switching faults on and off at run time, for drills.
//!
//! | request | answer |
//! |---|---|
//! | `POST /api/faults` `{"route": "api", "abort": {"status": 503, "percent": 100}, "delay": {"duration": "800ms", "percent": 30}, "endpoint": "10.0.0.2:8080", "header": "x-drill", "ttl": "30s"}` | `201 {"id": 1, "ttl_ms": 30000}` |
//! | `GET /api/faults` | `200 {"faults": [{"id": 1, "route": "api", …, "remaining_ms": 29120}]}` |
//! | `DELETE /api/faults/1` | `204`, or `404` if no such fault is live |
//! | `DELETE /api/faults` | `200 {"cleared": 1}` |
//!
//! Every fault needs a `ttl` (at most [`MAX_TTL`]): a drill driver that
//! dies never leaves a fault on. A bad body is refused with 400 naming the
//! field (`{"error": …, "field": "ttl"}`); a body over 64 KiB with 413.
//! The TTL runs on the proxy's clock. Faults survive a reload (a fault
//! on a route the reload removed matches nothing and expires).
//!
//! Whoever reaches the admin listener can inject faults: bind it to
//! loopback or a private interface, as for the metrics.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use tripline_prometheus::http::MetricsBody;

use crate::config::{AbortSection, DelaySection, FaultSection, ShareSection};
use crate::control::Control;
use crate::table::fault::MAX_TTL;

const PATH: &str = "/api/faults";

/// The largest body `POST /api/faults` reads.
const MAX_BODY: usize = 64 * 1024;

/// Whether `path` is this API's.
pub(super) fn serves(path: &str) -> bool {
    path == PATH || path.strip_prefix(PATH).is_some_and(|r| r.starts_with('/'))
}

/// The body of `POST /api/faults`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRequest {
    route: Option<String>,
    abort: Option<AbortSection>,
    delay: Option<DelaySection>,
    refuse: Option<ShareSection>,
    reset: Option<ShareSection>,
    hang: Option<ShareSection>,
    endpoint: Option<String>,
    header: Option<String>,
    ttl: Option<String>,
}

/// Answers one request of this API.
pub(super) async fn answer<B>(inner: &Control, req: Request<B>) -> Response<MetricsBody>
where
    B: http_body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let id = req
        .uri()
        .path()
        .strip_prefix(PATH)
        .and_then(|r| r.strip_prefix('/'))
        .map(str::to_owned);
    match (req.method().clone(), id) {
        (Method::GET, None) => json(StatusCode::OK, &inner.faults.list_json()),
        (Method::POST, None) => match add(inner, req).await {
            Ok(response) => response,
            Err(refused) => refused,
        },
        (Method::DELETE, None) => {
            let cleared = inner.faults.remove(None);
            json(StatusCode::OK, &serde_json::json!({ "cleared": cleared }))
        }
        (Method::DELETE, Some(id)) => match id.parse::<u64>() {
            Ok(id) if inner.faults.remove(Some(id)) > 0 => {
                let mut r = Response::new(MetricsBody::from(""));
                *r.status_mut() = StatusCode::NO_CONTENT;
                r
            }
            Ok(_) => refuse(StatusCode::NOT_FOUND, "id", "no live fault has this id"),
            Err(_) => refuse(
                StatusCode::BAD_REQUEST,
                "id",
                "must be a fault id (a number)",
            ),
        },
        (_, id) => {
            let allow = if id.is_some() {
                "DELETE"
            } else {
                "GET, POST, DELETE"
            };
            let mut r = refuse(StatusCode::METHOD_NOT_ALLOWED, "", "method not allowed");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            r
        }
    }
}

/// `POST /api/faults`: validates the body and switches the fault on.
async fn add<B>(
    inner: &Control,
    req: Request<B>,
) -> Result<Response<MetricsBody>, Response<MetricsBody>>
where
    B: http_body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "",
                &format!("body over {MAX_BODY} bytes"),
            ));
        }
        Err(e) => return Err(refuse(StatusCode::BAD_REQUEST, "", &e.to_string())),
    };
    let request: FaultRequest = serde_json::from_slice(&bytes)
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, "", &format!("not a fault: {e}")))?;
    let bad = |field: &str, message: &str| refuse(StatusCode::BAD_REQUEST, field, message);
    let Some(route) = request.route else {
        return Err(bad("route", "required: the name of a route"));
    };
    let table = inner.table.load();
    let Some(section) = table.config.routes.iter().find(|r| r.name == route) else {
        return Err(bad("route", &format!("{route:?} names no route")));
    };
    let ttl = match request.ttl.as_deref().map(humantime::parse_duration) {
        None => {
            return Err(bad(
                "ttl",
                "required: how long the fault stays on, e.g. \"30s\"",
            ));
        }
        Some(Err(e)) => return Err(bad("ttl", &format!("not a duration: {e}"))),
        Some(Ok(d)) if d.is_zero() || d > MAX_TTL => {
            return Err(bad("ttl", "must be more than zero and at most 1h"));
        }
        Some(Ok(d)) => d,
    };
    let fault = FaultSection {
        abort: request.abort,
        delay: request.delay,
        refuse: request.refuse,
        reset: request.reset,
        hang: request.hang,
        endpoint: request.endpoint,
        header: request.header,
    };
    let endpoints = table
        .config
        .clusters
        .get(&section.cluster)
        .map(|c| c.endpoints.as_slice())
        .unwrap_or_default();
    if let Err(e) = fault.validate("fault", endpoints) {
        let field = e.field.strip_prefix("fault.").unwrap_or("abort");
        return Err(bad(field, &e.message));
    }
    let id = inner.faults.add(route, fault, ttl);
    Ok(json(
        StatusCode::CREATED,
        &serde_json::json!({ "id": id, "ttl_ms": millis(ttl) }),
    ))
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

fn refuse(status: StatusCode, field: &str, message: &str) -> Response<MetricsBody> {
    let mut body = serde_json::json!({ "error": message });
    if !field.is_empty() {
        body["field"] = field.into();
    }
    json(status, &body)
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<MetricsBody> {
    let mut r = Response::new(MetricsBody::from(format!("{value}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}
