//! Reading a request body for replay, up to a bound.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::{BoxError, ProxyBody, ProxyFrames, full};

/// A request body as the retry loop sees it.
pub enum RequestBody {
    /// The whole body, small enough to send again on a retry.
    Replayable(Bytes),
    /// A body too large to keep (or on a request that is never retried):
    /// it can be sent once; `None` once it has been.
    Once(Option<ProxyBody>),
}

impl RequestBody {
    /// The body for one try: a copy of a replayable body (cheap, `Bytes`
    /// is shared), or the one-shot body, taken (`None` once taken).
    pub fn for_try(&mut self) -> Option<ProxyBody> {
        match self {
            // Kept empty (a request without a body, on a route that may
            // retry): an empty body boxes nothing, a `Full` is allocated.
            RequestBody::Replayable(bytes) if bytes.is_empty() => Some(super::empty()),
            RequestBody::Replayable(bytes) => Some(full(bytes.clone())),
            RequestBody::Once(body) => body.take(),
        }
    }

    /// Whether the body can still be sent (kept, or not sent yet).
    pub fn can_send(&self) -> bool {
        !matches!(self, RequestBody::Once(None))
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
        return Ok(RequestBody::Once(Some(super::boxed(body))));
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
    RequestBody::Once(Some(
        Prefixed {
            prefix: seen,
            rest: super::boxed(rest),
        }
        .boxed(),
    ))
}

/// Frames already read, then the rest of the stream.
struct Prefixed {
    prefix: VecDeque<Frame<Bytes>>,
    rest: ProxyBody,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> ProxyFrames {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed body of `chunks` that declares no length.
    struct Chunks(VecDeque<&'static [u8]>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(
                self.0
                    .pop_front()
                    .map(|c| Ok(Frame::data(Bytes::from_static(c)))),
            )
        }
    }

    async fn whole(body: &mut RequestBody) -> Bytes {
        body.for_try().unwrap().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn a_stream_that_fits_is_kept_and_replayed() {
        let mut body = read_for_replay(Chunks(VecDeque::from([&b"abc"[..], b"def"])), 6)
            .await
            .unwrap();
        assert!(body.is_replayable());
        assert_eq!(whole(&mut body).await, "abcdef");
        assert_eq!(whole(&mut body).await, "abcdef");
    }

    #[tokio::test]
    async fn a_stream_over_the_bound_is_sent_once_whole() {
        let chunks = Chunks(VecDeque::from([&b"abc"[..], b"def", b"ghi"]));
        let mut body = read_for_replay(chunks, 4).await.unwrap();
        assert!(!body.is_replayable());
        assert_eq!(whole(&mut body).await, "abcdefghi");
        assert!(body.for_try().is_none(), "sent once");
    }
}
