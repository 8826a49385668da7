//! The readiness guard every pass-through service of this module keeps.
//!
//! Tower's contract: `call` only after `poll_ready` said ready, once per
//! readiness. A service that forwards readiness to its inner service must
//! remember that it was polled ready, forget it at `call`, and start a
//! clone not ready (the inner service's readiness does not travel with a
//! clone). Six services did this by hand with a `ready: bool`; this is the
//! one place that does it, so the rule cannot drift between them.

use std::task::{Context, Poll, ready};

use tower_service::Service;

use super::{BoxError, NotReady};

/// Whether the inner service was polled ready since the last `call`.
///
/// `Clone` is deliberately not derived: a clone of a service must start
/// not ready, and [`Readiness::default`] says so where the service is
/// cloned.
#[derive(Debug, Default)]
pub(crate) struct Readiness(bool);

impl Readiness {
    /// Polls `inner` ready and remembers a success; an inner error is
    /// returned boxed and leaves the guard not ready.
    #[inline]
    pub(crate) fn poll<S, Req>(
        &mut self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>>
    where
        S: Service<Req>,
        S::Error: Into<BoxError>,
    {
        ready!(inner.poll_ready(cx)).map_err(Into::into)?;
        self.0 = true;
        Poll::Ready(Ok(()))
    }

    /// Spends the readiness on one call: `Err` names `layer` when `call`
    /// came without a successful `poll_ready` before it.
    #[inline]
    pub(crate) fn take(&mut self, layer: &'static str) -> Result<(), NotReady> {
        if std::mem::take(&mut self.0) {
            Ok(())
        } else {
            Err(NotReady { layer })
        }
    }
}
