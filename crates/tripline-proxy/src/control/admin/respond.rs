//! The admin listener's answers: one body type for fixed answers, the
//! exporter's streamed scrape and the endless event stream.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::mpsc;
use tripline_prometheus::http::MetricsBody;

/// Every admin answer's body.
pub(crate) type AdminBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A fixed body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> AdminBody {
    http_body_util::Full::new(bytes.into())
        .map_err(|e: Infallible| match e {})
        .boxed_unsync()
}

/// The exporter's (or the faults API's) answer, as an admin answer.
pub(crate) fn from_metrics(response: Response<MetricsBody>) -> Response<AdminBody> {
    response.map(|b| b.map_err(Into::into).boxed_unsync())
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<AdminBody> {
    let mut r = Response::new(full(format!("{value}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A JSON error: `{"error": message}` plus `extra`'s fields.
pub(crate) fn error(
    status: StatusCode,
    message: &str,
    extra: &[(&str, serde_json::Value)],
) -> Response<AdminBody> {
    let mut body = serde_json::json!({ "error": message });
    for (k, v) in extra {
        body[*k] = v.clone();
    }
    json(status, &body)
}

/// A body fed chunk by chunk from a channel, ending when the sender goes:
/// the event stream. The channel is bounded; its writer decides what to
/// do when the client reads too slowly.
pub(crate) struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    pub(crate) fn boxed(rx: mpsc::Receiver<Bytes>) -> AdminBody {
        ChannelBody { rx }.boxed_unsync()
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
    }
}
