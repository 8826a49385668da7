//! `BulkheadLayer`: a concurrency limit around a tower service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tower_layer::Layer;
use tower_service::Service;

use super::ready::Wrapped;
use super::refusal::Refusable;
use super::{BoxError, BulkheadFull, NotReady};
use crate::bulkhead::{Acquire, Bulkhead, OwnedBulkheadPermit};
use crate::timeout::SharedTimer;

/// Wraps services in `bulkhead`: `poll_ready` takes a slot (waiting in the
/// bounded queue when one is configured and a timer is given), the
/// response future holds it until the response is complete or dropped.
///
/// ```
/// use tower::{Service, ServiceExt};
/// use tripline::bulkhead::{Bulkhead, BulkheadConfig};
/// use tripline::tower::BulkheadLayer;
///
/// # futures_executor::block_on(async {
/// let bulkhead = Bulkhead::try_new(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(BulkheadLayer::new(bulkhead.clone(), None))
///     .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
/// let pending = svc.ready().await.unwrap().call(1); // holds the only slot
/// let err = svc.ready().await.unwrap().call(2).await.unwrap_err();
/// assert!(err.is::<tripline::tower::BulkheadFull>());
/// assert_eq!(pending.await.unwrap(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct BulkheadLayer {
    bulkhead: Bulkhead,
    timer: Option<SharedTimer>,
}

impl BulkheadLayer {
    /// Limits with `bulkhead`; `timer` lets calls wait in its queue.
    pub fn new(bulkhead: Bulkhead, timer: Option<SharedTimer>) -> Self {
        BulkheadLayer { bulkhead, timer }
    }
}

impl std::fmt::Debug for BulkheadLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkheadLayer")
            .field("bulkhead", &self.bulkhead)
            .field("queues", &self.timer.is_some())
            .finish()
    }
}

impl<S> Layer<S> for BulkheadLayer {
    type Service = BulkheadService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BulkheadService {
            inner,
            bulkhead: self.bulkhead.clone(),
            timer: self.timer.clone(),
            state: State::Idle,
        }
    }
}

enum State {
    Idle,
    Waiting(Acquire),
    /// A slot is held; the inner service is (being made) ready.
    Slot(OwnedBulkheadPermit),
    Ready(OwnedBulkheadPermit),
    Rejected(BulkheadFull),
}

/// A service behind a bulkhead; see [`BulkheadLayer`].
pub struct BulkheadService<S> {
    inner: S,
    bulkhead: Bulkhead,
    timer: Option<SharedTimer>,
    state: State,
}

impl<S: Clone> Clone for BulkheadService<S> {
    /// A clone starts not ready, without a slot.
    fn clone(&self) -> Self {
        BulkheadService {
            inner: self.inner.clone(),
            bulkhead: self.bulkhead.clone(),
            timer: self.timer.clone(),
            state: State::Idle,
        }
    }
}

impl<S> std::fmt::Debug for BulkheadService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkheadService")
            .field("bulkhead", &self.bulkhead)
            .finish()
    }
}

impl<S: Wrapped<Req>, Req> Service<Req> for BulkheadService<S> {
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        loop {
            self.state = match std::mem::replace(&mut self.state, State::Idle) {
                State::Idle => match self.bulkhead.try_acquire_owned() {
                    Ok(p) => State::Slot(p),
                    Err(full) if self.timer.is_none() || self.bulkhead.config().max_queue == 0 => {
                        State::Rejected(full)
                    }
                    Err(_) => State::Waiting(self.bulkhead.acquire(self.timer.as_ref(), None)),
                },
                State::Waiting(mut acquire) => match Pin::new(&mut acquire).poll(cx) {
                    Poll::Ready(Ok(p)) => State::Slot(p),
                    Poll::Ready(Err(full)) => State::Rejected(full),
                    Poll::Pending => {
                        self.state = State::Waiting(acquire);
                        return Poll::Pending;
                    }
                },
                State::Slot(p) => match self.inner.poll_ready(cx) {
                    Poll::Ready(Ok(())) => State::Ready(p),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                    Poll::Pending => {
                        self.state = State::Slot(p);
                        return Poll::Pending;
                    }
                },
                s @ (State::Ready(_) | State::Rejected(_)) => {
                    self.state = s;
                    return Poll::Ready(Ok(()));
                }
            };
        }
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Ready(permit) => ResponseFuture {
                call: Refusable::running({
                    let _in = super::enter(super::IN_BULKHEAD);
                    self.inner.call(req)
                }),
                permit: Some(permit),
            },
            State::Rejected(full) => ResponseFuture::refused(Box::new(full)),
            other => {
                self.state = other;
                ResponseFuture::refused(Box::new(NotReady { layer: "bulkhead" }))
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of a [`BulkheadService`]: holds the slot until the
    /// response is complete, or the future is dropped (the call's future
    /// drops first: fields drop in order).
    pub struct ResponseFuture<F> {
        #[pin]
        call: Refusable<F>,
        permit: Option<OwnedBulkheadPermit>,
    }
}

impl<F> ResponseFuture<F> {
    fn refused(e: BoxError) -> Self {
        ResponseFuture {
            call: Refusable::refused(e),
            permit: None,
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.call.poll_answer(cx, "bulkhead"))?.map_err(Into::into);
        this.permit.take();
        Poll::Ready(out)
    }
}
