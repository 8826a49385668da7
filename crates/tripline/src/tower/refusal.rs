//! How a layer answers a call it refuses at `call` time, before the inner
//! service sees it: no readiness ([`NotReady`]), a full bulkhead, a deadline
//! already spent.
//!
//! tower's `call` cannot return an error, only a future, so the refusal
//! travels in the response future and is its first and only answer. The
//! layers with a nameable response future keep the inner call's future or
//! the refusal in a [`Refusable`]; the layers whose future is boxed anyway
//! answer with [`boxed_refusal`]. Written once here, the refusal answers
//! the same way in every layer, including when polled again after it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{BoxError, BoxFuture, NotReady};

pin_project_lite::pin_project! {
    /// The inner call's future, or the refusal `call` answered with
    /// instead. Exactly one of the two is set when it is made; a refusal
    /// is handed out once.
    pub(crate) struct Refusable<F> {
        #[pin]
        fut: Option<F>,
        refusal: Option<BoxError>,
    }
}

impl<F> Refusable<F> {
    /// The inner service took the call: answer with its future.
    #[inline]
    pub(crate) fn running(fut: F) -> Self {
        Refusable {
            fut: Some(fut),
            refusal: None,
        }
    }

    /// The layer refused the call: answer with `e`.
    #[inline]
    pub(crate) fn refused(e: BoxError) -> Self {
        Refusable {
            fut: None,
            refusal: Some(e),
        }
    }
}

impl<F: Future> Refusable<F> {
    /// Polls the inner future (its output unchanged), or answers with the
    /// refusal. Polled again after the refusal, it says what the caller
    /// broke: a [`NotReady`] naming `layer`.
    #[inline]
    pub(crate) fn poll_answer(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        layer: &'static str,
    ) -> Poll<Result<F::Output, BoxError>> {
        let this = self.project();
        if let Some(e) = this.refusal.take() {
            return Poll::Ready(Err(e));
        }
        let Some(fut) = this.fut.as_pin_mut() else {
            return Poll::Ready(Err(Box::new(NotReady { layer })));
        };
        fut.poll(cx).map(Ok)
    }
}

/// A boxed response future that answers with `e`, for the layers whose
/// response future is boxed.
#[inline]
pub(crate) fn boxed_refusal<T: Send + 'static>(
    e: impl Into<BoxError>,
) -> BoxFuture<Result<T, BoxError>> {
    Box::pin(std::future::ready(Err(e.into())))
}
