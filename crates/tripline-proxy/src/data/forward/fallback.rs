//! Answering with a route's fallback: a fixed answer, or the request sent
//! to the secondary cluster, in place of a refusal or a failure (see the
//! [fallback](crate::table::fallback) module for the rules), marked
//! degraded.

use std::time::Duration;

use http::{HeaderValue, Response, header};
use http_body::Body as _;
use http_body_util::BodyExt;

use crate::config::UPSTREAM_FAILURE;
use crate::data::Ctx;
use crate::data::access_log::Trail;
use crate::http::body::{ProxyBody, RequestBody, full};
use crate::http::method::is_idempotent;
use crate::http::rejection::{DEGRADED_HEADER, RETRY_REFUSED_HEADER};
use crate::table::fallback::Kind;
use crate::table::route::Route;
use crate::upstream::Outbound;

use super::limits::LazyLimits;

/// How long a replaced upstream answer may take to be read to its end
/// (so it settles the breakers) before it is dropped, neutrally.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// Replaces `response` by the route's fallback when it stands for a cause
/// the fallback covers.
pub(crate) async fn apply(
    proxy: &Ctx,
    route: &Route,
    parts: &Outbound,
    body: &mut RequestBody,
    limits: LazyLimits,
    response: Response<ProxyBody>,
    trail: Option<&mut Trail>,
) -> Response<ProxyBody> {
    let Some(fallback) = &route.guard.fallback else {
        return response;
    };
    let Some(cause) = fallback.replaces(route, &response) else {
        return response;
    };
    // A retry the budget refused stays told on the degraded answer (the
    // access log and the metrics read it there).
    let retry_refused = response.headers().get(RETRY_REFUSED_HEADER).cloned();
    let mut answer = match &fallback.kind {
        Kind::Fixed {
            status,
            body,
            content_type,
        } => {
            drain(response);
            let mut answer = Response::new(full(body.clone()));
            *answer.status_mut() = *status;
            if let Some(ct) = content_type {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, ct.clone());
            }
            answer
        }
        Kind::Cluster(secondary) => {
            let maybe_received = matches!(
                cause,
                UPSTREAM_FAILURE | "upstream_timeout" | "upstream_reset"
            );
            let may_repeat = route.retry.retryable || is_idempotent(&parts.method);
            if !body.can_send() || (maybe_received && !may_repeat) {
                return response;
            }
            drain(response);
            super::answer_from(proxy, secondary, parts, body, limits.take(), trail).await
        }
    };
    let headers = answer.headers_mut();
    headers.insert(DEGRADED_HEADER, HeaderValue::from_static(cause));
    if let Some(refused) = retry_refused {
        headers.insert(RETRY_REFUSED_HEADER, refused);
    }
    answer
}

/// Reads a replaced answer to its end in the background, so its outcome
/// reaches the breakers (see the module docs).
fn drain(response: Response<ProxyBody>) {
    let body = response.into_body();
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN_LIMIT, body.collect()).await;
    });
}
