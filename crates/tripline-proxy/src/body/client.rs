//! A client's request body, watched so that its failures are not charged
//! to the endpoint it was being sent to.
//!
//! A request body streams from the client to the endpoint as it arrives.
//! If the client's side breaks — malformed chunks, the client gone
//! mid-upload — the upstream client reports the try as failed, exactly as
//! if the endpoint had reset it; if the client sends too slowly, the try's
//! timeout fires as if the endpoint were slow. Charged to the endpoint and
//! the route, either would let one client take a healthy endpoint out of
//! service with a few broken or crawling uploads. [`watch`] marks the body
//! so the try can tell them apart (Envoy, likewise, starts its route
//! timeout only once the whole request has arrived).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use super::{BoxError, ProxyBody};

/// The body is still arriving.
const ARRIVING: u8 = 0;
/// The body arrived whole.
const ARRIVED: u8 = 1;
/// The body broke on the client's side.
const BROKE: u8 = 2;

/// How far the client's upload has come, as the try that sends it sees.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientUpload(Arc<AtomicU8>);

impl ClientUpload {
    /// Whether the client's body broke while it was read.
    pub(crate) fn broke(&self) -> bool {
        self.0.load(Ordering::Acquire) == BROKE
    }

    /// Whether the client was still sending its body (neither finished
    /// nor broken).
    pub(crate) fn arriving(&self) -> bool {
        self.0.load(Ordering::Acquire) == ARRIVING
    }
}

/// `body`, reporting how its upload went through the returned
/// [`ClientUpload`]. A body already at its end cannot fail nor be late: it
/// is returned as it is, with nothing to watch (a bodiless request costs
/// no allocation here).
pub(crate) fn watch(body: ProxyBody) -> (ProxyBody, Option<ClientUpload>) {
    if body.is_end_stream() {
        return (body, None);
    }
    let upload = ClientUpload::default();
    let watched = Watched {
        inner: body,
        upload: upload.clone(),
    };
    (watched.boxed(), Some(upload))
}

struct Watched {
    inner: ProxyBody,
    upload: ClientUpload,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let now = match &polled {
            Poll::Ready(Some(Err(_))) => BROKE,
            Poll::Ready(None) => ARRIVED,
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => ARRIVED,
            _ => return polled,
        };
        // Release, before the frame or error is handed on: the try that
        // reads the state after the upstream client returned sees it.
        self.upload.0.store(now, Ordering::Release);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::body::{empty, full};

    /// A body whose only frame is an error, as hyper yields for a
    /// malformed chunk.
    struct Broken;

    impl Body for Broken {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(Some(Err("invalid chunk size".into())))
        }
    }

    #[tokio::test]
    async fn a_failing_body_is_marked_broken_and_passes_the_error_on() {
        let (mut body, upload) = watch(Broken.boxed());
        let upload = upload.unwrap();
        assert!(upload.arriving() && !upload.broke());
        let frame = body.frame().await.unwrap();
        assert!(frame.is_err());
        assert!(upload.broke() && !upload.arriving());
    }

    #[tokio::test]
    async fn a_body_that_ends_well_has_arrived_and_did_not_break() {
        let (body, upload) = watch(full("hello"));
        let upload = upload.unwrap();
        assert!(upload.arriving());
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.to_bytes(), "hello");
        assert!(!upload.broke() && !upload.arriving());
    }

    #[test]
    fn an_empty_body_is_not_watched() {
        let (_, upload) = watch(empty());
        assert!(upload.is_none());
    }
}
