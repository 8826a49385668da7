//! gRPC answers: HTTP 200 says nothing, `grpc-status` says how the call
//! went.
//!
//! A gRPC server answers nearly every call with HTTP 200 and puts the
//! call's status in the trailers (or in the headers, for a
//! "trailers-only" answer without a body). So for an answer whose
//! `content-type` is `application/grpc*`:
//!
//! - a `grpc-status` in the headers classifies the answer at once (the
//!   retry loop sees it, like a 5xx);
//! - otherwise the answer's body is watched for trailers, and when it
//!   ends, the trailer's `grpc-status` decides the outcome that settles
//!   the endpoint's breaker, outlier detection and the route's breaker.
//!
//! The failing codes are the route's `grpc_failure_codes` (UNAVAILABLE,
//! DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED by default): the server is
//! unable, not the request wrong. UNAVAILABLE and DEADLINE_EXCEEDED count
//! as gateway failures (like 503 and 504), the others as upstream errors.
//! An HTTP failure status stays a failure whatever `grpc-status` says.
//!
//! The trailers are seen as the answer is streamed to the client. gRPC
//! clients speak HTTP/2, which carries trailers, so every answer is read
//! to them. Relayed to an HTTP/1.1 client, the answer may end before its
//! trailers are read (observed with a sized body); it then settles
//! neutrally, neither success nor failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::Body;
use tripline::cluster::EndpointOutcome;

use crate::http::body::{Inspect, Inspected, Polled};

/// No `grpc-status` seen yet.
const UNSEEN: u32 = u32::MAX;

/// Which gRPC statuses are failures, for one route.
#[derive(Clone, Copy)]
pub(crate) struct GrpcClassifier {
    /// Indexed by code (0..=16).
    failure: [bool; 17],
}

impl GrpcClassifier {
    /// Failing on `codes` (validated: 1..=16).
    pub(crate) fn new(codes: &[u32]) -> GrpcClassifier {
        let mut failure = [false; 17];
        for c in codes {
            if let Some(slot) = failure.get_mut(*c as usize) {
                *slot = true;
            }
        }
        GrpcClassifier { failure }
    }

    /// The outcome of an answer with status `code`.
    pub(crate) fn outcome(&self, code: u32) -> EndpointOutcome {
        match self.failure.get(code as usize) {
            Some(true) if matches!(code, 4 | 14) => EndpointOutcome::GatewayFailure,
            Some(true) => EndpointOutcome::UpstreamFailure,
            _ => EndpointOutcome::Success,
        }
    }

    /// Refines `http` (the status's outcome) by the headers of a gRPC
    /// answer (`grpc`: [`is_grpc`] of them, looked up once per answer): a
    /// trailers-only answer's `grpc-status` decides a success.
    pub(crate) fn classify_headers(
        &self,
        headers: &HeaderMap,
        grpc: bool,
        http: EndpointOutcome,
    ) -> EndpointOutcome {
        if http.is_failure() || !grpc {
            return http;
        }
        status_of(headers).map_or(http, |code| self.outcome(code))
    }
}

/// Whether an answer is gRPC (`application/grpc`, `application/grpc+proto`, …).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

fn status_of(headers: &HeaderMap) -> Option<u32> {
    headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The `grpc-status` a watched body's trailers carried, read when the
/// body has ended.
#[derive(Clone, Default)]
pub(crate) struct TrailerStatus(Option<Arc<AtomicU32>>);

impl TrailerStatus {
    /// The status code, if trailers with one went by.
    pub(crate) fn code(&self) -> Option<u32> {
        let code = self.0.as_ref()?.load(Ordering::Acquire);
        (code != UNSEEN).then_some(code)
    }
}

/// A body that notes the `grpc-status` of its trailers as they pass.
pub(crate) type WatchTrailers<B> = Inspected<B, NotesStatus>;

/// Where a watched body's trailer status goes (`None`: not gRPC, frames
/// only pass through).
pub(crate) struct NotesStatus(Option<Arc<AtomicU32>>);

/// Wraps `body` to watch its trailers when its answer is gRPC (`grpc`,
/// [`is_grpc`]; otherwise the wrapper only passes frames through).
pub(crate) fn watch<B>(grpc: bool, body: B) -> (WatchTrailers<B>, TrailerStatus) {
    let seen = grpc.then(|| Arc::new(AtomicU32::new(UNSEEN)));
    let status = TrailerStatus(seen.clone());
    (Inspected::wrap(body, NotesStatus(seen)), status)
}

impl<B> Inspect<B> for NotesStatus
where
    B: Body<Data = Bytes> + Unpin,
{
    type Error = B::Error;

    fn inspect(
        &mut self,
        _: &B,
        polled: Polled<Bytes, B::Error>,
        _: &mut Context<'_>,
    ) -> Polled<Bytes, B::Error> {
        if let (Poll::Ready(Some(Ok(frame))), Some(seen)) = (&polled, &self.0)
            && let Some(code) = frame.trailers_ref().and_then(status_of)
        {
            seen.store(code, Ordering::Release);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use http::HeaderValue;

    fn grpc_headers(status: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_static("application/grpc+proto"),
        );
        if let Some(s) = status {
            h.insert("grpc-status", HeaderValue::from_static(s));
        }
        h
    }

    #[test]
    fn default_codes_fail_and_others_succeed() {
        let c = GrpcClassifier::new(&[4, 8, 14]);
        let ok = EndpointOutcome::Success;
        assert_eq!(
            c.classify_headers(&grpc_headers(Some("14")), true, ok),
            EndpointOutcome::GatewayFailure
        );
        assert_eq!(
            c.classify_headers(&grpc_headers(Some("8")), true, ok),
            EndpointOutcome::UpstreamFailure
        );
        assert_eq!(
            c.classify_headers(&grpc_headers(Some("5")), true, ok),
            ok,
            "NOT_FOUND is an answer"
        );
        assert_eq!(
            c.classify_headers(&grpc_headers(None), true, ok),
            ok,
            "status still to come"
        );
        let mut plain = grpc_headers(Some("14"));
        plain.insert("content-type", HeaderValue::from_static("application/json"));
        assert_eq!(
            c.classify_headers(&plain, is_grpc(&plain), ok),
            ok,
            "not gRPC: grpc-status means nothing"
        );
        let failed = EndpointOutcome::GatewayFailure;
        assert_eq!(
            c.classify_headers(&grpc_headers(Some("0")), true, failed),
            failed
        );
    }
}
