//! `PipelineLayer`: the whole pipeline in front of a tower service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::ready::{Readiness, Wrapped, poll_ready_through_guard, take_ready};
use super::retry::{AsConfigured, RequestIdempotency, idempotency_of};
use super::{BoxError, IgnoreLocalRejections, NotReady, box_error};
use crate::bulkhead::{Acquire, OwnedBulkheadPermit};
use crate::classify::{Classifier, Outcome};
use crate::clock::Clock;
use crate::pipeline::{Inner, Pipeline, PolicyError, Progress, Step};
use crate::retry::{RetryClassifier, RetryOnError};
use crate::retry_policy::Idempotency;
use crate::timeout::{Deadline, DeadlineExceeded, Sleep};

/// Runs every call through a [`Pipeline`]: deadline, retry with budget,
/// circuit breaker (outer statistics, inner short-circuit), bulkhead and
/// per-attempt timeout, in the canonical order. Each attempt polls a clone
/// of the inner service ready; the inner service and the request must be
/// `Clone`. Errors are the [`PolicyError`](crate::PolicyError) variants as
/// their own types (see [`policy_error`](super::policy_error)).
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tower::{Service, ServiceExt};
/// use tripline::pipeline::Pipeline;
/// use tripline::retry::RetryConfig;
/// use tripline::timeout::{TimeoutConfig, TokioTimer};
/// use tripline::tower::PipelineLayer;
/// use tripline::CircuitBreaker;
///
/// let pipeline = Pipeline::builder()
///     .circuit_breaker(CircuitBreaker::try_new(Default::default()).unwrap())
///     .retry(RetryConfig::default())
///     .timeouts(TimeoutConfig { per_attempt: Some(Duration::from_millis(200)), ..Default::default() })
///     .clock(TokioTimer.clock())
///     .build()
///     .unwrap();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(PipelineLayer::new(pipeline))
///     .service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x * 2) });
/// assert_eq!(svc.ready().await.unwrap().call(21).await.unwrap(), 42);
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone, Debug)]
pub struct PipelineLayer<C = IgnoreLocalRejections, R = RetryOnError, I = AsConfigured> {
    pipeline: Pipeline,
    classifier: C,
    retry_on: R,
    idempotency: I,
}

impl PipelineLayer {
    /// Runs calls through `pipeline`, with the layers' default classifiers.
    pub fn new(pipeline: Pipeline) -> Self {
        PipelineLayer {
            pipeline,
            classifier: IgnoreLocalRejections,
            retry_on: RetryOnError,
            idempotency: AsConfigured,
        }
    }
}

impl<C, R, I> PipelineLayer<C, R, I> {
    /// Classifies results for the breaker.
    pub fn classify<C2>(self, classifier: C2) -> PipelineLayer<C2, R, I> {
        PipelineLayer {
            pipeline: self.pipeline,
            classifier,
            retry_on: self.retry_on,
            idempotency: self.idempotency,
        }
    }

    /// Decides which results are retried.
    pub fn retry_on<R2>(self, retry_on: R2) -> PipelineLayer<C, R2, I> {
        PipelineLayer {
            pipeline: self.pipeline,
            classifier: self.classifier,
            retry_on,
            idempotency: self.idempotency,
        }
    }

    /// Decides per request whether it may be repeated, e.g.
    /// [`http_retryable`](super::http_retryable).
    pub fn idempotency<I2>(self, idempotency: I2) -> PipelineLayer<C, R, I2> {
        PipelineLayer {
            pipeline: self.pipeline,
            classifier: self.classifier,
            retry_on: self.retry_on,
            idempotency,
        }
    }
}

impl<S, C: Clone, R: Clone, I: Clone> Layer<S> for PipelineLayer<C, R, I> {
    type Service = PipelineService<S, C, R, I>;

    fn layer(&self, inner: S) -> Self::Service {
        // A TimeoutLayer anywhere in the wrapped stack bounds each attempt;
        // its service type shows in the stack's type name (a boxed stack
        // hides it, and then the warning errs on the side of telling).
        let p = &self.pipeline.inner;
        if p.untimed_retries && !std::any::type_name::<S>().contains("TimeoutService") {
            p.warn_untimed_retries("PipelineLayer over a stack without a TimeoutLayer");
        }
        PipelineService {
            inner,
            layer: self.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A service behind the pipeline; see [`PipelineLayer`].
#[derive(Debug)]
pub struct PipelineService<S, C, R, I> {
    inner: S,
    layer: PipelineLayer<C, R, I>,
    ready: Readiness,
}

impl<S: Clone, C: Clone, R: Clone, I: Clone> Clone for PipelineService<S, C, R, I> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        PipelineService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S, C, R, I, Req> Service<Req> for PipelineService<S, C, R, I>
where
    S: Wrapped<Req> + Clone,
    Req: Clone,
    C: Classifier<S::Response, BoxError> + Clone,
    R: RetryClassifier<S::Response, BoxError> + Clone,
    I: RequestIdempotency<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Req, C, R>;

    poll_ready_through_guard!();

    fn call(&mut self, req: Req) -> Self::Future {
        let stage = if self.ready.take("pipeline").is_ok() {
            Stage::Start
        } else {
            Stage::NotReady
        };
        let idempotency = idempotency_of(&self.layer.idempotency, &req);
        ResponseFuture {
            attempt: None,
            pipeline: self.layer.pipeline.clone(),
            // The ready service goes with the future; retries poll it
            // ready again.
            svc: take_ready(&mut self.inner),
            req,
            classifier: self.layer.classifier.clone(),
            retry_on: self.layer.retry_on.clone(),
            idempotency,
            stage,
            call: None,
            slot: Slot::Free,
            attempt_deadline: None,
            acquire: None,
            sleep: None,
        }
    }
}

/// Where a [`ResponseFuture`] is in its logical call. Plain data, so that
/// moving from stage to stage is a store (the queue's and the backoff's
/// futures sit in their own fields).
#[derive(Clone, Copy)]
enum Stage {
    /// `call` came without `poll_ready`: fails on the first poll.
    NotReady,
    /// Nothing done yet: the pipeline starts on the first poll.
    Start,
    /// Before the next attempt: retry checks, then a bulkhead slot.
    NextAttempt,
    /// Queued for a bulkhead slot (`acquire`).
    Acquiring,
    /// The attempt runs: `ready` once the service was polled ready for it.
    Attempt { ready: bool },
    /// Backing off before a retry (`sleep`).
    Backoff,
    /// The result was returned.
    Done,
}

/// The attempt's bulkhead slot: taken at once and held apart from the
/// bulkhead (the future owns the pipeline, hence the bulkhead, so the slot
/// costs no reference count), or handed over by the wait queue.
enum Slot {
    Free,
    Taken,
    Queued(OwnedBulkheadPermit),
}

impl Slot {
    /// Frees the slot, if one is held.
    #[inline]
    fn release(&mut self, p: &Inner) {
        match std::mem::replace(self, Slot::Free) {
            Slot::Taken => {
                if let Some(b) = &p.bulkhead {
                    b.release_detached();
                }
            }
            Slot::Queued(permit) => drop(permit),
            Slot::Free => {}
        }
    }
}

pin_project_lite::pin_project! {
    /// The response of a [`PipelineService`]: the pipeline's retry loop as
    /// a nameable future, so a call allocates nothing on the success path.
    /// It owns the pipeline (one reference count a call) and holds the
    /// breaker permit and the bulkhead slot apart from them; dropped early,
    /// it cancels the attempt, frees the slot and releases the permit with
    /// a neutral verdict.
    pub struct ResponseFuture<S, Req, C, R>
    where
        S: Service<Req>,
    {
        #[pin]
        attempt: Option<S::Future>,
        pipeline: Pipeline,
        svc: S,
        req: Req,
        classifier: C,
        retry_on: R,
        idempotency: Idempotency,
        stage: Stage,
        call: Option<Progress<S::Response, BoxError>>,
        slot: Slot,
        attempt_deadline: Option<Deadline>,
        // The wait for a bulkhead slot, while queued.
        acquire: Option<Acquire>,
        // The attempt's timer once it is pending, or the backoff.
        sleep: Option<Sleep>,
    }

    impl<S, Req, C, R> PinnedDrop for ResponseFuture<S, Req, C, R>
    where
        S: Service<Req>,
    {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            // The attempt first: what it holds ends before the slot and
            // the permit it ran under.
            this.attempt.set(None);
            let p = &*this.pipeline.inner;
            this.slot.release(p);
            if let Some(call) = this.call.as_mut() {
                call.close(p);
            }
        }
    }
}

/// Runs `f` with `deadline`, if any, as the context deadline.
#[inline(always)]
fn scoped<T>(deadline: Option<Deadline>, f: impl FnOnce() -> T) -> T {
    match deadline {
        Some(d) => d.scope(f),
        None => f(),
    }
}

impl<S, Req, C, R> Future for ResponseFuture<S, Req, C, R>
where
    S: Wrapped<Req>,
    Req: Clone,
    C: Classifier<S::Response, BoxError>,
    R: RetryClassifier<S::Response, BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    // The loop of `Pipeline::call_async` (`pipeline/call_async.rs`), as a
    // state machine: the same steps in the same order, with the attempt's
    // timer armed only once the attempt is pending and the bulkhead slot
    // held apart from the bulkhead.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let p = &*this.pipeline.inner;
        match this.stage {
            Stage::NotReady => {
                *this.stage = Stage::Done;
                return Poll::Ready(Err(Box::new(NotReady { layer: "pipeline" })));
            }
            Stage::Done => return Poll::Pending,
            _ => {}
        }
        // A breaker layer polled or called from in here is inside a retry:
        // a harmful order the breaker service refuses.
        let _inside = p.retry.is_some().then(|| super::enter(super::IN_RETRY));
        let call = match this.call.as_mut() {
            Some(call) => call,
            None => match Progress::begin(p, None, *this.idempotency) {
                Ok(call) => this.call.insert(call),
                Err(e) => {
                    *this.stage = Stage::Done;
                    return Poll::Ready(Err(box_error(e)));
                }
            },
        };
        macro_rules! finish {
            ($result:expr) => {{
                let result = $result;
                call.close(p);
                *this.stage = Stage::Done;
                return Poll::Ready(result.map_err(box_error));
            }};
        }
        loop {
            match this.stage {
                Stage::NotReady | Stage::Done => return Poll::Pending,
                Stage::Start | Stage::NextAttempt => {
                    if let Err(done) = call.next_attempt(p) {
                        finish!(done);
                    }
                    match &p.bulkhead {
                        Some(b) if b.try_take_detached() => *this.slot = Slot::Taken,
                        Some(b) => {
                            let limit = call.deadline.map(|d| d.remaining(&p.clock));
                            *this.acquire = Some(b.acquire(p.timer.as_ref(), limit));
                            *this.stage = Stage::Acquiring;
                            continue;
                        }
                        None => {}
                    }
                    if call.made > 1 {
                        // After a backoff: the floor again, from now.
                        call.now = p.clock.now();
                        if let Err(e) = p.check_floor(call.deadline, call.now) {
                            this.slot.release(p);
                            finish!(Err(PolicyError::DeadlineExceeded(e)));
                        }
                    }
                    *this.attempt_deadline = call.attempt_deadline(p);
                    *this.stage = Stage::Attempt {
                        ready: call.made == 1,
                    };
                }
                Stage::Acquiring => {
                    let Some(acquire) = this.acquire.as_mut() else {
                        return Poll::Pending;
                    };
                    let got = ready!(Pin::new(acquire).poll(cx));
                    *this.acquire = None;
                    call.now = p.clock.now();
                    if let Err(e) = p.check_floor(call.deadline, call.now) {
                        drop(got);
                        finish!(Err(PolicyError::DeadlineExceeded(e)));
                    }
                    match got {
                        Ok(permit) => *this.slot = Slot::Queued(permit),
                        Err(full) => finish!(Err(PolicyError::BulkheadFull(full))),
                    }
                    *this.attempt_deadline = call.attempt_deadline(p);
                    *this.stage = Stage::Attempt {
                        ready: call.made == 1,
                    };
                }
                Stage::Backoff => {
                    if let Some(sleep) = this.sleep.as_mut() {
                        ready!(sleep.as_mut().poll(cx));
                    }
                    *this.sleep = None;
                    call.now = p.clock.now();
                    *this.stage = Stage::NextAttempt;
                }
                Stage::Attempt { ready } => {
                    let deadline = *this.attempt_deadline;
                    let mut attempt = this.attempt.as_mut();
                    let svc = &mut *this.svc;
                    let req = &*this.req;
                    let polled = scoped(deadline, || {
                        if attempt.is_none() {
                            if !*ready {
                                match svc.poll_ready(cx) {
                                    Poll::Pending => return Poll::Pending,
                                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                                    Poll::Ready(Ok(())) => *ready = true,
                                }
                            }
                            attempt.set(Some(svc.call(req.clone())));
                        }
                        match attempt.as_mut().as_pin_mut() {
                            Some(fut) => fut.poll(cx).map_err(Into::into),
                            None => Poll::Pending,
                        }
                    });
                    let raced = match polled {
                        Poll::Ready(result) => Ok(result),
                        Poll::Pending => {
                            let (Some(d), Some(timer)) = (deadline, &p.timer) else {
                                return Poll::Pending;
                            };
                            let sleep = this
                                .sleep
                                .get_or_insert_with(|| timer.sleep(d.remaining(&p.clock)));
                            ready!(sleep.as_mut().poll(cx));
                            Err(())
                        }
                    };
                    this.attempt.set(None);
                    *this.sleep = None;
                    let end = p.clock.now();
                    this.slot.release(p);
                    let elapsed = end - call.now;
                    let (outcome, decision, result) = match raced {
                        Err(()) if call.deadline.is_some_and(|d| end >= d.instant()) => {
                            call.settle(Outcome::Failure, elapsed);
                            finish!(Err(PolicyError::DeadlineExceeded(DeadlineExceeded {
                                remaining: Duration::ZERO,
                                floor: p.timeouts.min_remaining,
                            })));
                        }
                        Err(()) => call.timed_out(p, elapsed),
                        Ok(_) if p.timeouts.per_attempt.is_some_and(|t| elapsed > t) => {
                            call.timed_out(p, elapsed)
                        }
                        Ok(result) => (
                            this.classifier.classify(&result),
                            this.retry_on.decide(&result),
                            result.map_err(PolicyError::Inner),
                        ),
                    };
                    match call.after(p, end, outcome, decision, result) {
                        Step::Finish(result) => finish!(result),
                        Step::Retry(wait) => {
                            *this.stage = Stage::NextAttempt;
                            match (&p.timer, p.clock.as_manual()) {
                                _ if wait.is_zero() => {}
                                (_, Some(manual)) => {
                                    manual.advance(wait);
                                }
                                (Some(timer), None) => {
                                    *this.sleep = Some(timer.sleep(wait));
                                    *this.stage = Stage::Backoff;
                                    continue;
                                }
                                (None, None) => p.sleep_sync(wait),
                            }
                            call.now = p.clock.now();
                        }
                    }
                }
            }
        }
    }
}
