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
//! timeout only once the whole request has arrived). A try that waits
//! because the endpoint does not take the body (backpressure: the body is
//! not even asked for its next frame) stays the endpoint's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use http_body::Body;
use http_body_util::BodyExt;

use super::{BoxError, Inspect, Inspected, ProxyBody, ProxyFrames};

/// The try has the body's last frame and has not asked for the next (or
/// has not begun to send it): if its time runs out now, the endpoint (or
/// the way to it) is what is slow.
const WITH_THE_TRY: u8 = 0;
/// The try asked for the next frame and the client has not sent it.
const WAITING_FOR_CLIENT: u8 = 1;
/// The body arrived whole.
const ARRIVED: u8 = 2;
/// The body broke on the client's side.
const BROKE: u8 = 3;
/// The client sent nothing for `[proxy] client_body_timeout`: the body
/// was given up ([`ClientBodyTimedOut`](super::ClientBodyTimedOut)).
const TIMED_OUT: u8 = 4;

/// How far the client's upload has come, as the try that sends it sees.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientUpload(Arc<AtomicU8>);

impl ClientUpload {
    /// Whether the client's body broke while it was read.
    /// (A body given up for the client's silence broke too.)
    pub(crate) fn broke(&self) -> bool {
        matches!(self.0.load(Ordering::Acquire), BROKE | TIMED_OUT)
    }

    /// Whether the client's body was given up because the client sent
    /// nothing for `[proxy] client_body_timeout`.
    pub(crate) fn timed_out(&self) -> bool {
        self.0.load(Ordering::Acquire) == TIMED_OUT
    }

    /// Whether the try is waiting for the client to send more of its
    /// body. Not so while the endpoint is slow to take what it was sent
    /// (backpressure leaves the body unasked): that wait is the
    /// endpoint's.
    pub(crate) fn waiting_for_client(&self) -> bool {
        self.0.load(Ordering::Acquire) == WAITING_FOR_CLIENT
    }
}

/// `body`, reporting how its upload goes through the returned
/// [`ClientUpload`]. A body already at its end cannot fail nor be late: it
/// is returned as it is, with nothing to watch (a bodiless request costs
/// no allocation here).
pub(crate) fn watch(body: ProxyBody) -> (ProxyBody, Option<ClientUpload>) {
    if body.is_end_stream() {
        return (body, None);
    }
    let upload = ClientUpload::default();
    let watched = Inspected::wrap(body, Watched(upload.clone()));
    (watched.boxed(), Some(upload))
}

/// Notes, on every poll, how far the upload has come.
struct Watched(ClientUpload);

impl Inspect<ProxyBody> for Watched {
    type Error = BoxError;

    fn inspect(
        &mut self,
        body: &ProxyBody,
        polled: ProxyFrames,
        _: &mut Context<'_>,
    ) -> ProxyFrames {
        let now = match &polled {
            Poll::Pending => WAITING_FOR_CLIENT,
            Poll::Ready(Some(Err(e))) if e.is::<super::ClientBodyTimedOut>() => TIMED_OUT,
            Poll::Ready(Some(Err(_))) => BROKE,
            Poll::Ready(None) => ARRIVED,
            Poll::Ready(Some(Ok(_))) if body.is_end_stream() => ARRIVED,
            Poll::Ready(Some(Ok(_))) => WITH_THE_TRY,
        };
        // Release, before the frame or error is handed on: the try that
        // reads the state once the upstream client has returned sees it.
        self.0.0.store(now, Ordering::Release);
        polled
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::pin::Pin;
    use std::task::Waker;

    use bytes::Bytes;
    use http_body::Frame;

    use super::*;
    use crate::http::body::{empty, full};

    /// A client body: `frames` in turn, then the client stalls.
    struct Client {
        frames: Vec<Result<Frame<Bytes>, BoxError>>,
    }

    impl Body for Client {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> ProxyFrames {
            match self.frames.is_empty() {
                true => Poll::Pending,
                false => Poll::Ready(Some(self.frames.remove(0))),
            }
        }
    }

    fn poll(body: &mut ProxyBody) -> ProxyFrames {
        Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_try_waits_for_the_client_only_once_it_asked_for_a_frame_not_sent() {
        let frames = vec![Ok(Frame::data(Bytes::from("part")))];
        let (mut body, upload) = watch(Client { frames }.boxed());
        let upload = upload.unwrap();
        // Not asked yet (the try is connecting): the wait is the endpoint's.
        assert!(!upload.waiting_for_client());
        assert!(poll(&mut body).is_ready());
        // Handed a frame, not asked for the next (backpressure).
        assert!(!upload.waiting_for_client());
        assert!(poll(&mut body).is_pending());
        assert!(upload.waiting_for_client() && !upload.broke());
    }

    #[test]
    fn a_failing_body_is_marked_broken_and_passes_the_error_on() {
        let frames = vec![Err("invalid chunk size".into())];
        let (mut body, upload) = watch(Client { frames }.boxed());
        let upload = upload.unwrap();
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Err(_)))));
        assert!(upload.broke() && !upload.waiting_for_client());
    }

    #[tokio::test]
    async fn a_body_that_arrives_whole_is_neither_waited_for_nor_broken() {
        let (body, upload) = watch(full("hello"));
        let upload = upload.unwrap();
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.to_bytes(), "hello");
        assert!(!upload.broke() && !upload.waiting_for_client());
    }

    #[test]
    fn an_empty_body_is_not_watched() {
        let (_, upload) = watch(empty());
        assert!(upload.is_none());
    }
}
