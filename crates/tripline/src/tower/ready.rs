//! The readiness guard every pass-through service of this module keeps.
//!
//! Tower's contract: `call` only after `poll_ready` said ready, once per
//! readiness. A service that forwards readiness to its inner service must
//! remember that it was polled ready, forget it at `call`, and start a
//! clone not ready (the inner service's readiness does not travel with a
//! clone). Six services did this by hand with a `ready: bool`; this is the
//! one place that does it, so the rule cannot drift between them.
//!
//! The layers that make more than one attempt (retry, hedge, pipeline)
//! also share how readiness passes to the attempts: the service polled
//! ready goes with the call ([`take_ready`]) and serves its first attempt;
//! every later attempt polls it ready again ([`until_ready`]).

use std::future::poll_fn;
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

/// Takes the service that was polled ready for this call, leaving a clone
/// of it behind: tower's usual swap for a call that outlives `&mut self`.
/// The clone left behind starts not ready (its guard was spent by
/// [`Readiness::take`]), so the next call must poll it ready again.
#[inline]
pub(crate) fn take_ready<S: Clone>(inner: &mut S) -> S {
    let fresh = inner.clone();
    std::mem::replace(inner, fresh)
}

/// Waits until `svc` is ready, its error boxed: what an attempt after the
/// first does before calling the service [`take_ready`] handed it (the
/// first attempt spends the caller's `poll_ready`).
pub(crate) async fn until_ready<S, Req>(svc: &mut S) -> Result<(), BoxError>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    poll_fn(|cx| svc.poll_ready(cx)).await.map_err(Into::into)
}
