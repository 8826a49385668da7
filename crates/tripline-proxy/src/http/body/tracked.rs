//! A response body that reports how it ended.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::BoxError;

/// What to do when a body ends: `true` if it ended cleanly, `false` if
/// the stream failed. Not called when the body is dropped unfinished (the
/// client went away: not the upstream's fault, so whatever it holds —
/// leases, permits — is released neutrally by being dropped).
pub type OnEnd = Box<dyn FnOnce(bool) + Send + Sync>;

/// Wraps a body and calls `on_end` ([`OnEnd`] or any such closure) once,
/// at its end. Generic over the closure so that the proxy's own answers
/// keep it inline, in the one allocation of their boxed body, rather than
/// boxing it apart on every response.
pub struct Tracked<B, F = OnEnd> {
    inner: B,
    on_end: Option<F>,
}

impl<B: Body + Unpin, F: FnOnce(bool)> Tracked<B, F> {
    /// Wraps `inner`; a body already at its end reports at once.
    pub fn new(inner: B, on_end: F) -> Self {
        if inner.is_end_stream() {
            on_end(true);
            return Tracked {
                inner,
                on_end: None,
            };
        }
        Tracked {
            inner,
            on_end: Some(on_end),
        }
    }

    fn end(&mut self, ok: bool) {
        if let Some(f) = self.on_end.take() {
            f(ok);
        }
    }
}

impl<B, F> Body for Tracked<B, F>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
    F: FnOnce(bool) + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.end(true);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.end(false);
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Some(Ok(frame))) => {
                // Trailers are always the last frame: the body has ended
                // well (and a gRPC status in them has been noted).
                if frame.is_trailers() || self.inner.is_end_stream() {
                    self.end(true);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
