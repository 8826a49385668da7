//! `CircuitBreakerLayer`: a breaker around a tower service.

use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tower_layer::Layer;
use tower_service::Service;

use super::ready::Wrapped;
use super::{BoxError, IgnoreLocalRejections, NotReady};
use crate::breaker::{CircuitBreaker, DetachedPermit, Rejected};
use crate::classify::Classifier;
use crate::clock::Timestamp;

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
/// assert!(err.is::<tripline::tower::Rejected>());
/// # });
/// ```
///
/// `H` is how services and response futures hold the breaker: a
/// [`CircuitBreaker`] handle of their own ([`new`](Self::new)), or a
/// `&'static CircuitBreaker` ([`from_static`](Self::from_static)).
#[derive(Clone, Debug)]
pub struct CircuitBreakerLayer<C = IgnoreLocalRejections, H = CircuitBreaker> {
    breaker: H,
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

impl CircuitBreakerLayer<IgnoreLocalRejections, &'static CircuitBreaker> {
    /// Like [`new`](CircuitBreakerLayer::new), for a breaker that lives as
    /// long as the program (a `static`, a `LazyLock`, or `Box::leak` at
    /// start-up, as most services hold theirs): response futures borrow it
    /// instead of each taking a counted handle, which saves an atomic
    /// increment and decrement per call — about a third of the layer's
    /// overhead.
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use tower::{Service, ServiceExt};
    /// use tripline::tower::CircuitBreakerLayer;
    /// use tripline::CircuitBreaker;
    ///
    /// static PAYMENTS: LazyLock<CircuitBreaker> =
    ///     LazyLock::new(|| CircuitBreaker::try_new(Default::default()).unwrap());
    /// # futures_executor::block_on(async {
    /// let mut svc = tower::ServiceBuilder::new()
    ///     .layer(CircuitBreakerLayer::from_static(&PAYMENTS))
    ///     .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x + 1) });
    /// assert_eq!(svc.ready().await.unwrap().call(1).await.unwrap(), 2);
    /// assert_eq!(PAYMENTS.metrics().calls.successful, 1);
    /// # });
    /// ```
    pub fn from_static(breaker: &'static CircuitBreaker) -> Self {
        CircuitBreakerLayer {
            breaker,
            classifier: IgnoreLocalRejections,
            allow_harmful_order: false,
        }
    }
}

impl<C, H> CircuitBreakerLayer<C, H> {
    /// Classifies with `classifier` (a closure over `&Result<Response, BoxError>`).
    pub fn classify<C2>(self, classifier: C2) -> CircuitBreakerLayer<C2, H> {
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

impl<S, C: Clone, H: Borrow<CircuitBreaker> + Clone> Layer<S> for CircuitBreakerLayer<C, H> {
    type Service = CircuitBreakerService<S, C, H>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService {
            inner,
            timed: timed(self.breaker.borrow()),
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            reserved: Reserved::Nothing,
            allow_harmful_order: self.allow_harmful_order,
        }
    }
}

/// Whether calls must be timed: only slow-call detection uses the duration,
/// so without it the response future reads no clock at all.
fn timed(breaker: &CircuitBreaker) -> bool {
    breaker.config().slow_call_duration.is_some()
}

/// The reservation `poll_ready` made for the next `call`: a permit held
/// apart from the breaker (the service keeps the breaker), so reserving
/// costs no reference count; `call` hands it to the response future with
/// the handle that future needs (a counted one, or a `'static` borrow).
#[derive(Debug)]
enum Reserved {
    Nothing,
    Permit(DetachedPermit),
    Rejected(Rejected),
}

/// A service behind a circuit breaker; see [`CircuitBreakerLayer`].
#[derive(Debug)]
pub struct CircuitBreakerService<S, C, H = CircuitBreaker>
where
    H: Borrow<CircuitBreaker>,
{
    inner: S,
    timed: bool,
    breaker: H,
    classifier: C,
    reserved: Reserved,
    allow_harmful_order: bool,
}

impl<S, C, H: Borrow<CircuitBreaker>> CircuitBreakerService<S, C, H> {
    /// Drops the reservation unused: a reserved permit is released with a
    /// neutral verdict (its half-open probe slot freed).
    fn unreserve(&mut self) {
        if let Reserved::Permit(mut permit) =
            std::mem::replace(&mut self.reserved, Reserved::Nothing)
        {
            permit.release(self.breaker.borrow());
        }
    }
}

impl<S, C, H: Borrow<CircuitBreaker>> Drop for CircuitBreakerService<S, C, H> {
    /// A ready service dropped unused releases what it reserved.
    fn drop(&mut self) {
        self.unreserve();
    }
}

impl<S: Clone, C: Clone, H: Borrow<CircuitBreaker> + Clone> Clone
    for CircuitBreakerService<S, C, H>
{
    /// A clone starts not ready: the permit stays with the original.
    fn clone(&self) -> Self {
        CircuitBreakerService {
            inner: self.inner.clone(),
            timed: self.timed,
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            reserved: Reserved::Nothing,
            allow_harmful_order: self.allow_harmful_order,
        }
    }
}

impl<S, C, H, Req> Service<Req> for CircuitBreakerService<S, C, H>
where
    S: Wrapped<Req>,
    C: Classifier<S::Response, BoxError> + Clone,
    H: Borrow<CircuitBreaker> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, C, H>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if !matches!(self.reserved, Reserved::Nothing) {
            return Poll::Ready(Ok(()));
        }
        ready!(self.inner.poll_ready(cx)).map_err(Into::into)?;
        self.reserved = match self.breaker.borrow().try_acquire_detached() {
            Ok(p) => Reserved::Permit(p),
            Err(r) => Reserved::Rejected(r),
        };
        Poll::Ready(Ok(()))
    }

    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        if let Some(misordered) =
            super::check_breaker_placement(self.breaker.borrow(), self.allow_harmful_order)
        {
            // The reservation is released unrecorded: a refused stack is
            // not evidence about the dependency.
            self.unreserve();
            return ResponseFuture::failed(Box::new(misordered), &self.classifier);
        }
        match std::mem::replace(&mut self.reserved, Reserved::Nothing) {
            Reserved::Permit(permit) => {
                let permit = Held {
                    breaker: self.breaker.clone(),
                    permit,
                };
                let start = self.timed.then(|| permit.now());
                ResponseFuture {
                    fut: Some(self.inner.call(req)),
                    hold: Hold::Admitted { permit, start },
                    classifier: self.classifier.clone(),
                }
            }
            Reserved::Rejected(rejected) => {
                ResponseFuture::failed(Box::new(rejected), &self.classifier)
            }
            Reserved::Nothing => ResponseFuture::failed(
                Box::new(NotReady {
                    layer: "circuit_breaker",
                }),
                &self.classifier,
            ),
        }
    }
}

/// The permit a [`ResponseFuture`] holds, with the breaker it records
/// into: a counted handle, or a `'static` borrow. Dropped unsettled (the
/// future was cancelled), it releases the permit neutrally.
struct Held<H: Borrow<CircuitBreaker>> {
    breaker: H,
    permit: DetachedPermit,
}

impl<H: Borrow<CircuitBreaker>> Held<H> {
    #[inline(always)]
    fn now(&self) -> Timestamp {
        crate::clock::Clock::now(self.breaker.borrow().clock())
    }

    /// Records the outcome, once: a future polled again after its answer
    /// records nothing more.
    #[inline(always)]
    fn record_in_place(&mut self, outcome: crate::classify::Outcome, elapsed_nanos: u64) {
        self.permit
            .record(self.breaker.borrow(), outcome, elapsed_nanos);
    }
}

impl<H: Borrow<CircuitBreaker>> Drop for Held<H> {
    #[inline]
    fn drop(&mut self) {
        self.permit.release(self.breaker.borrow());
    }
}

/// What a [`ResponseFuture`] answers with besides its inner future's result.
enum Hold<H: Borrow<CircuitBreaker>> {
    /// Admitted: the outcome is recorded when the inner future completes;
    /// dropped unsettled (the future was cancelled), the permit releases
    /// itself neutrally. `start` is set for a timed call.
    Admitted {
        permit: Held<H>,
        start: Option<Timestamp>,
    },
    /// Refused at `call`: this error is the answer.
    Failed(BoxError),
    /// The refusal was returned.
    Done,
}

pin_project_lite::pin_project! {
    /// The response of a [`CircuitBreakerService`]: records the outcome
    /// when it completes; dropped early, it releases the permit neutrally
    /// (after dropping the inner future: fields drop in order).
    pub struct ResponseFuture<F, C, H = CircuitBreaker>
    where
        H: Borrow<CircuitBreaker>,
    {
        #[pin]
        fut: Option<F>,
        hold: Hold<H>,
        classifier: C,
    }
}

impl<F, C: Clone, H: Borrow<CircuitBreaker>> ResponseFuture<F, C, H> {
    fn failed(e: BoxError, classifier: &C) -> Self {
        ResponseFuture {
            fut: None,
            hold: Hold::Failed(e),
            classifier: classifier.clone(),
        }
    }
}

impl<F, T, E, C, H> Future for ResponseFuture<F, C, H>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classifier<T, BoxError>,
    H: Borrow<CircuitBreaker>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(fut) = this.fut.as_pin_mut() else {
            return Poll::Ready(Err(match std::mem::replace(this.hold, Hold::Done) {
                Hold::Failed(e) => e,
                // Polled again after its answer: say what the caller broke.
                Hold::Admitted { .. } | Hold::Done => Box::new(NotReady {
                    layer: "circuit_breaker",
                }),
            }));
        };
        let result = ready!(fut.poll(cx)).map_err(Into::into);
        if let Hold::Admitted { permit, start } = this.hold {
            let elapsed = start.map_or(0, |start| {
                permit.now().as_nanos().saturating_sub(start.as_nanos())
            });
            // Settled in place: the permit stays in the future (its drop
            // then finds it settled) instead of being moved out.
            permit.record_in_place(this.classifier.classify(&result), elapsed);
        }
        Poll::Ready(result)
    }
}
