//! `CircuitBreakerLayer`: a breaker around a tower service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tower_layer::Layer;
use tower_service::Service;

use super::{BoxError, CircuitOpen, IgnoreLocalRejections, NotReady};
use crate::breaker::{CircuitBreaker, OwnedPermit};
use crate::classify::Classifier;
use crate::clock::{Clock, SharedClock, Timestamp};

/// Wraps services in `breaker`, classifying results with `C`.
///
/// ```
/// use tower::{Service, ServiceExt};
/// use tripline::tower::CircuitBreakerLayer;
/// use tripline::CircuitBreaker;
///
/// # futures_executor::block_on(async {
/// let breaker = CircuitBreaker::try_new(Default::default()).unwrap();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(CircuitBreakerLayer::new(breaker.clone()))
///     .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x + 1) });
/// assert_eq!(svc.ready().await.unwrap().call(1).await.unwrap(), 2);
/// breaker.force_open();
/// let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
/// assert!(err.is::<tripline::tower::CircuitOpen>());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct CircuitBreakerLayer<C = IgnoreLocalRejections> {
    breaker: CircuitBreaker,
    classifier: C,
    allow_harmful_order: bool,
}

impl CircuitBreakerLayer {
    /// Counts `Ok` as success, tripline's refusals as neither, other errors as failures.
    pub fn new(breaker: CircuitBreaker) -> Self {
        CircuitBreakerLayer {
            breaker,
            classifier: IgnoreLocalRejections,
            allow_harmful_order: false,
        }
    }
}

impl<C> CircuitBreakerLayer<C> {
    /// Classifies with `classifier` (a closure over `&Result<Response, BoxError>`).
    pub fn classify<C2>(self, classifier: C2) -> CircuitBreakerLayer<C2> {
        CircuitBreakerLayer {
            breaker: self.breaker,
            classifier,
            allow_harmful_order: self.allow_harmful_order,
        }
    }

    /// Lets calls through even when this layer is stacked inside a retry or
    /// a bulkhead layer (they are still counted in
    /// [`misordered_calls`](super::misordered_calls) and warned about).
    /// By default such a call fails with
    /// [`MisorderedLayers`](super::MisorderedLayers): only opt out for a
    /// stack you have measured, e.g. a retry that is itself bounded by
    /// something the breaker cannot see.
    pub fn allow_harmful_order(mut self) -> Self {
        self.allow_harmful_order = true;
        self
    }
}

impl<S, C: Clone> Layer<S> for CircuitBreakerLayer<C> {
    type Service = CircuitBreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            timed: timed(&self.breaker),
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            reserved: None,
            allow_harmful_order: self.allow_harmful_order,
        }
    }
}

/// Whether calls must be timed: only slow-call detection uses the duration,
/// so without it the response future reads no clock at all.
fn timed(breaker: &CircuitBreaker) -> bool {
    breaker.config().slow_call_duration.is_some()
}

/// The reservation `poll_ready` made for the next `call`.
#[derive(Debug)]
enum Reserved {
    Permit(OwnedPermit),
    Rejected(CircuitOpen),
}

/// A service behind a circuit breaker; see [`CircuitBreakerLayer`].
#[derive(Debug)]
pub struct CircuitBreakerService<S, C> {
    inner: S,
    timed: bool,
    breaker: CircuitBreaker,
    classifier: C,
    reserved: Option<Reserved>,
    allow_harmful_order: bool,
}

impl<S: Clone, C: Clone> Clone for CircuitBreakerService<S, C> {
    /// A clone starts not ready: the permit stays with the original.
    fn clone(&self) -> Self {
        CircuitBreakerService {
            inner: self.inner.clone(),
            timed: self.timed,
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            reserved: None,
            allow_harmful_order: self.allow_harmful_order,
        }
    }
}

impl<S, C, Req> Service<Req> for CircuitBreakerService<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classifier<S::Response, BoxError> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if self.reserved.is_some() {
            return Poll::Ready(Ok(()));
        }
        ready!(self.inner.poll_ready(cx)).map_err(Into::into)?;
        self.reserved = Some(match self.breaker.try_acquire_owned() {
            Ok(p) => Reserved::Permit(p),
            Err(r) => Reserved::Rejected(r.into()),
        });
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        if let Some(misordered) =
            super::check_breaker_placement(self.breaker.name(), self.allow_harmful_order)
        {
            // The reservation is released unrecorded: a refused stack is
            // not evidence about the dependency.
            self.reserved = None;
            return ResponseFuture::failed(Box::new(misordered), &self.classifier);
        }
        match self.reserved.take() {
            Some(Reserved::Permit(permit)) => {
                let clock = self.timed.then(|| self.breaker.clock().clone());
                ResponseFuture {
                    start: clock.as_ref().map_or(Timestamp::ZERO, Clock::now),
                    fut: Some(self.inner.call(req)),
                    error: None,
                    permit: Some(permit),
                    clock,
                    classifier: self.classifier.clone(),
                }
            }
            Some(Reserved::Rejected(open)) => {
                ResponseFuture::failed(Box::new(open), &self.classifier)
            }
            None => ResponseFuture::failed(
                Box::new(NotReady {
                    layer: "circuit_breaker",
                }),
                &self.classifier,
            ),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of a [`CircuitBreakerService`]: records the outcome
    /// when it completes; dropped early, it releases the permit neutrally.
    pub struct ResponseFuture<F, C> {
        #[pin]
        fut: Option<F>,
        error: Option<BoxError>,
        permit: Option<OwnedPermit>,
        start: Timestamp,
        clock: Option<SharedClock>,
        classifier: C,
    }
}

impl<F, C: Clone> ResponseFuture<F, C> {
    fn failed(e: BoxError, classifier: &C) -> Self {
        ResponseFuture {
            fut: None,
            error: Some(e),
            permit: None,
            start: Timestamp::ZERO,
            clock: None,
            classifier: classifier.clone(),
        }
    }
}

impl<F, T, E, C> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classifier<T, BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(e) = this.error.take() {
            return Poll::Ready(Err(e));
        }
        let Some(fut) = this.fut.as_pin_mut() else {
            return Poll::Ready(Err(Box::new(NotReady {
                layer: "circuit_breaker",
            })));
        };
        let result = ready!(fut.poll(cx)).map_err(Into::into);
        if let Some(permit) = this.permit.as_mut() {
            let elapsed = this.clock.as_ref().map_or(0, |c| {
                c.now().as_nanos().saturating_sub(this.start.as_nanos())
            });
            // Settled in place: the permit stays in the future (dropped with
            // it) instead of being moved out, which is cheaper per call.
            permit.record_in_place(this.classifier.classify(&result), elapsed);
        }
        Poll::Ready(result)
    }
}
