//! Reading a request body for replay, up to a bound.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::{BoxError, ProxyBody, full};

/// A request body as the retry loop sees it.
pub enum RequestBody {
    /// The whole body, small enough to send again on a retry.
    Replayable(Bytes),
    /// A body too large to keep: it can be sent once, and the request is
    /// not retried once it has been.
    Once(ProxyBody),
}

impl RequestBody {
    /// The body for one try: a copy of a replayable body (cheap, `Bytes`
    /// is shared), or the one-shot body, taken (`None` once taken).
    pub fn for_try(&mut self) -> Option<ProxyBody> {
        match self {
            RequestBody::Replayable(bytes) => Some(full(bytes.clone())),
            RequestBody::Once(_) => {
                match std::mem::replace(self, RequestBody::Replayable(Bytes::new())) {
                    RequestBody::Once(body) => {
                        // What remains is a marker that the body is spent.
                        *self = RequestBody::Once(super::empty());
                        Some(body)
                    }
                    RequestBody::Replayable(_) => None,
                }
            }
        }
    }

    /// Whether the body can be sent again.
    pub fn is_replayable(&self) -> bool {
        matches!(self, RequestBody::Replayable(_))
    }
}

/// Reads `body` whole if it fits in `limit` bytes; otherwise returns what
/// was read in front of the rest of the stream, to be sent once. A body
/// that declares a larger length is not read at all.
pub async fn read_for_replay<B>(mut body: B, limit: usize) -> Result<RequestBody, BoxError>
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let hint = body.size_hint();
    if hint.lower() > limit as u64 {
        return Ok(RequestBody::Once(body.map_err(Into::into).boxed()));
    }
    let mut kept = BytesMut::new();
    let mut seen = VecDeque::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Into::into)?;
        match frame.into_data() {
            Ok(data) if kept.len() + data.len() <= limit => {
                kept.extend_from_slice(&data);
                seen.push_back(Frame::data(data));
            }
            Ok(data) => {
                seen.push_back(Frame::data(data));
                return Ok(once(seen, body));
            }
            Err(trailers) => {
                // Trailers cannot be replayed from bytes: send once.
                seen.push_back(trailers);
                return Ok(once(seen, body));
            }
        }
    }
    Ok(RequestBody::Replayable(kept.freeze()))
}

fn once<B>(seen: VecDeque<Frame<Bytes>>, rest: B) -> RequestBody
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    RequestBody::Once(
        Prefixed {
            prefix: seen,
            rest: rest.map_err(Into::into).boxed(),
        }
        .boxed(),
    )
}

/// Frames already read, then the rest of the stream.
struct Prefixed {
    prefix: VecDeque<Frame<Bytes>>,
    rest: ProxyBody,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(frame) = self.prefix.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let kept: u64 = self
            .prefix
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + kept);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + kept);
        }
        hint
    }
}
