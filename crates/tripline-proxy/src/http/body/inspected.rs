//! One wrapper for every body the proxy watches as it passes: the upload
//! watched for the client's faults, the upload given up when idle, the
//! answer that reports its end, the gRPC trailers noted, the answer that
//! counts itself finished. Each differs only in what it does with a poll
//! of the body it wraps; [`Inspect`] is that difference, and
//! [`Inspected`] the rest — the poll itself, `is_end_stream` and
//! `size_hint` handed through — written once. Generic, so each inspector
//! is compiled into its own wrapper: no indirect call on the measured
//! path, the same code as a wrapper written by hand.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

/// A poll's result, as a body returns it.
pub type Polled<D, E> = Poll<Option<Result<Frame<D>, E>>>;

/// What a wrapper does with each poll of the body it wraps.
pub trait Inspect<B: Body>: Unpin {
    /// The error the wrapper's body ends with.
    type Error;

    /// Sees `polled`, the result of polling `body`, and returns what the
    /// wrapper answers: the same, or another (an error in place of a
    /// wait, an error converted).
    fn inspect(
        &mut self,
        body: &B,
        polled: Polled<B::Data, B::Error>,
        cx: &mut Context<'_>,
    ) -> Polled<B::Data, Self::Error>;

    /// Whether the wrapper's body has ended: the wrapped body's answer,
    /// unless the inspector has more to say (an error still to come).
    fn is_end_stream(&self, body: &B) -> bool {
        body.is_end_stream()
    }
}

/// `body`, each of whose polls `inspector` sees.
pub struct Inspected<B, I> {
    body: B,
    inspector: I,
}

impl<B, I> Inspected<B, I> {
    /// Wraps `body`.
    pub(crate) fn wrap(body: B, inspector: I) -> Self {
        Inspected { body, inspector }
    }
}

impl<B, I> Body for Inspected<B, I>
where
    B: Body + Unpin,
    I: Inspect<B>,
{
    type Data = B::Data;
    type Error = I::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled<B::Data, I::Error> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        this.inspector.inspect(&this.body, polled, cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inspector.is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
