//! A response body that reports how it ended.

use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Body;

use super::{BoxError, Inspect, Inspected, Polled};

/// What to do when a body ends: `true` if it ended cleanly, `false` if
/// the stream failed. Not called when the body is dropped unfinished (the
/// client went away: not the upstream's fault, so whatever it holds —
/// leases, permits — is released neutrally by being dropped).
pub type OnEnd = Box<dyn FnOnce(bool) + Send + Sync>;

/// A body that calls `on_end` ([`OnEnd`] or any such closure) once, at
/// its end. Generic over the closure so that the proxy's own answers keep
/// it inline, in the one allocation of their boxed body, rather than
/// boxing it apart on every response.
pub type Tracked<B, F = OnEnd> = Inspected<B, ReportsEnd<F>>;

/// The end report of a [`Tracked`] body: the closure, until it is called.
pub struct ReportsEnd<F>(Option<F>);

impl<B: Body + Unpin, F: FnOnce(bool)> Tracked<B, F> {
    /// Wraps `inner`; a body already at its end reports at once.
    pub fn new(inner: B, on_end: F) -> Self {
        if inner.is_end_stream() {
            on_end(true);
            return Inspected::wrap(inner, ReportsEnd(None));
        }
        Inspected::wrap(inner, ReportsEnd(Some(on_end)))
    }
}

impl<F: FnOnce(bool)> ReportsEnd<F> {
    fn end(&mut self, ok: bool) {
        if let Some(f) = self.0.take() {
            f(ok);
        }
    }
}

impl<B, F> Inspect<B> for ReportsEnd<F>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
    F: FnOnce(bool) + Unpin,
{
    type Error = BoxError;

    fn inspect(
        &mut self,
        body: &B,
        polled: Polled<Bytes, B::Error>,
        _: &mut Context<'_>,
    ) -> Polled<Bytes, BoxError> {
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
                if frame.is_trailers() || body.is_end_stream() {
                    self.end(true);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }
}
