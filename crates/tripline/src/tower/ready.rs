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

/// A service a policy layer wraps: any whose error converts into a
/// [`BoxError`], the one error type every layer answers with. Named once so
/// that each layer's `Service` impl states the contract the same way; every
/// such service is one (a blanket impl), nothing to implement.
pub trait Wrapped<Req>: Service<Req, Error: Into<BoxError>> {}

impl<S: Service<Req, Error: Into<BoxError>>, Req> Wrapped<Req> for S {}

/// A service a layer calls more than once for one request (retry, hedge),
/// from a boxed future that may move between threads: cloned for each
/// attempt, its futures and answers sent across threads. Every service
/// that allows it is one (a blanket impl).
pub trait Repeatable<Req>:
    Wrapped<Req, Future: Send, Response: Send + 'static> + Clone + Send + 'static
{
}

impl<S, Req> Repeatable<Req> for S where
    S: Wrapped<Req, Future: Send, Response: Send + 'static> + Clone + Send + 'static
{
}

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
        S: Wrapped<Req>,
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

/// The `poll_ready` of a service that forwards readiness to `self.inner`
/// through its guard `self.ready`. Six services share it to the letter;
/// written once, the contract cannot drift between them.
macro_rules! poll_ready_through_guard {
    () => {
        #[inline]
        fn poll_ready(
            &mut self,
            cx: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<Result<(), $crate::tower::BoxError>> {
            self.ready.poll(&mut self.inner, cx)
        }
    };
}
pub(crate) use poll_ready_through_guard;

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
    S: Wrapped<Req>,
{
    poll_fn(|cx| svc.poll_ready(cx)).await.map_err(Into::into)
}
