//! Bodies: streamed both ways, and kept for replay only when small.
//!
//! A response body streams from the upstream to the client as it arrives;
//! its end (or its failure) is what settles the endpoint's breaker and the
//! route's, so a connection that breaks mid-body counts as a failure (see
//! [`Tracked`]). A request body is kept in memory only when a retry might
//! need to send it again, and only up to the route's `max_buffered_body`:
//! a larger body is streamed once and the request is never retried, so
//! memory per request stays bounded whatever clients send.

mod client;
mod idle;
mod inspected;
mod replay;
mod tracked;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};

pub(crate) use client::{ClientUpload, watch};
pub(crate) use idle::{ClientBodyTimedOut, give_up_when_idle};
pub use inspected::{Inspect, Inspected, Polled};
pub use replay::{RequestBody, read_for_replay};
pub use tracked::{OnEnd, ReportsEnd, Tracked};

/// Errors a proxied body can carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every body the proxy sends, upstream or downstream.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// What one poll of a [`ProxyBody`] yields: the signature every body and
/// inspector of the proxy shares, named once.
pub type ProxyFrames = Polled<Bytes, BoxError>;

/// A body of `bytes`, all at once.
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// Any body of bytes (hyper's `Incoming`, a wrapper) as a [`ProxyBody`].
pub(crate) fn boxed<B>(body: B) -> ProxyBody
where
    B: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed()
}
