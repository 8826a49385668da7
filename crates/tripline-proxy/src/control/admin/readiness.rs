//! What orchestrators ask the admin listener: is the process alive
//! (`GET /healthz`), should it get traffic (`GET /ready`), and the
//! operator's drain for a rolling restart (`POST /api/drain`, undone by
//! `DELETE /api/drain`).
//!
//! `/ready` answers 200 once the config is loaded and the listeners are
//! bound (the admin listener is bound after them, so any answer it gives
//! comes after), and 503 after `POST /api/drain`. On SIGTERM the admin
//! listener stops accepting with the others, so a probe then fails to
//! connect (a request already on an admin connection is answered 503,
//! `shutting_down`): the operator's drain is how a load balancer is told
//! before the process stops. The operator's drain keeps serving — a load
//! balancer that reads `/ready` stops sending new clients, and every
//! HTTP/1 answer carries `connection: close` so clients reconnect
//! elsewhere — and a later SIGTERM finds few connections to wait for.
//! `/healthz` answers 200 for as long as the process serves its admin
//! listener: liveness, which a drain does not change.

use http::{Method, Response, StatusCode};
use serde_json::json;
use tokio::sync::watch;

use super::audit::Entry;
use super::not_allowed;
use super::respond::{AdminBody, json};
use crate::control::Control;
use crate::http::drain::DRAINING;

/// `GET /healthz`.
pub(super) fn healthz(method: &Method) -> Response<AdminBody> {
    match *method {
        Method::GET | Method::HEAD => json(StatusCode::OK, &json!({ "live": true })),
        _ => not_allowed("GET"),
    }
}

/// `GET /ready`: 503 with the reason while draining.
pub(super) fn ready(
    control: &Control,
    method: &Method,
    level: &watch::Receiver<u8>,
) -> Response<AdminBody> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        return not_allowed("GET");
    }
    let reason = if *level.borrow() >= DRAINING {
        Some("shutting_down")
    } else if control.drain.is_on() {
        Some("drain_requested")
    } else {
        None
    };
    match reason {
        None => json(StatusCode::OK, &json!({ "ready": true })),
        Some(reason) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "reason": reason }),
        ),
    }
}

/// `POST /api/drain` (on) and `DELETE /api/drain` (off), audited and
/// logged; the token check has already passed.
pub(super) fn drain(control: &Control, method: &Method, who: &str) -> Response<AdminBody> {
    let on = match *method {
        Method::POST => true,
        Method::DELETE => false,
        Method::GET => {
            let on = control.drain.is_on();
            return json(StatusCode::OK, &json!({ "draining": on }));
        }
        _ => return not_allowed("GET, POST, DELETE"),
    };
    let was = control.drain.set(on);
    let summary = match (was, on) {
        (false, true) => {
            "drain requested: /ready answers 503, HTTP/1 connections close after their answer"
        }
        (true, false) => "drain cancelled: /ready answers 200, connections are kept again",
        (true, true) => "drain requested again: already draining",
        (false, false) => "drain cancelled: was not draining",
    };
    if was != on {
        tracing::warn!(target: "tripline_proxy::admin", who, draining = on, "{summary}");
    }
    control.admin.audit.record(Entry {
        source: "admin-api",
        who,
        action: if on { "drain" } else { "drain_cancelled" },
        target: None,
        summary: summary.to_owned(),
    });
    json(
        StatusCode::OK,
        &json!({ "draining": on, "changed": was != on }),
    )
}
