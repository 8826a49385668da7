//! Whether a try is retried: by the route's `retry_on` conditions when it
//! lists some, else (as before the conditions) when its endpoint counted
//! it failed.

use http::HeaderMap;
use tripline::cluster::EndpointOutcome;

use super::attempt::Tried;
use crate::config::TryEnd;
use crate::http::rejection::Reason;
use crate::table::route::Route;

/// Whether `tried` is the kind of try the route retries (the attempts,
/// method, body, deadline and budget are checked by the caller).
pub(super) fn wants_retry(route: &Route, tried: &Tried) -> bool {
    let Some(retry_on) = &route.retry_on else {
        return tried.outcome().is_some_and(EndpointOutcome::is_failure);
    };
    let end = match tried {
        Tried::Answered { response, .. } | Tried::Settled { response, .. } => TryEnd::Answered {
            status: response.status().as_u16(),
            grpc: grpc_status(response.headers()),
        },
        Tried::Failed { reason, outcome } => match (reason, outcome.never_sent()) {
            (Reason::UpstreamConnectFailure, _) => TryEnd::ConnectFailure,
            (_, true) => TryEnd::RefusedStream,
            (_, false) => TryEnd::Reset,
        },
        Tried::Refused(_) | Tried::ClientFault(_) => return false,
    };
    retry_on.retries(end)
}

/// The `grpc-status` of a trailers-only gRPC answer (a status in the head).
fn grpc_status(headers: &HeaderMap) -> Option<u8> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}
