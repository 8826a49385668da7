//! `GET /`: the live dashboard, one self-contained page (inline CSS and
//! script, no external assets) compiled into the binary. It reads
//! `/api/breakers` and `/api/outliers` every second and follows
//! `/api/events` for transitions as they happen; its buttons call the
//! breaker actions, asking for the admin token when the API answers 401.

use http::{Method, Response, StatusCode, header};

use super::not_allowed;
use super::respond::{AdminBody, full};

const PAGE: &str = include_str!("dashboard.html");

/// The page.
pub(crate) fn page(method: &Method) -> Response<AdminBody> {
    if *method != Method::GET && *method != Method::HEAD {
        return not_allowed("GET, HEAD");
    }
    let mut r = Response::new(full(PAGE));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Everything the page needs is inline: forbid anything else.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'",
        ),
    );
    r
}
