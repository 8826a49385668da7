//! `RetryLayer`: retries with budget, backoff, pushback and idempotency.

use tower_layer::Layer;
use tower_service::Service;

use super::ready::{Readiness, Repeatable, poll_ready_through_guard, take_ready, until_ready};
use super::refusal::boxed_refusal;
use super::{BoxError, BoxFuture, BudgetExhausted, IN_RETRY, Marked, Rejected, is_local_rejection};
use crate::clock::Clock;
use crate::retry::{Retry, RetryClassifier, RetryDecision, RetryOnError, RetryRefusal};
use crate::retry_policy::Idempotency;
use crate::timeout::Deadline;

/// Which requests may be repeated, for the retry layers.
///
/// ```
/// use tripline::tower::{http_retryable, RequestIdempotency};
/// let get = http::Request::get("/").body(()).unwrap();
/// assert_eq!(http_retryable::<()>.idempotent(&get), Some(true));
/// ```
pub trait RequestIdempotency<Req> {
    /// `Some(true)`: the request may run twice (an idempotent method, an
    /// idempotency key); `Some(false)`: never; `None`: as the policy's
    /// `idempotent` setting says.
    fn idempotent(&self, req: &Req) -> Option<bool>;
}

/// Leaves the decision to the policy's `idempotent` setting.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsConfigured;

impl<Req> RequestIdempotency<Req> for AsConfigured {
    fn idempotent(&self, _: &Req) -> Option<bool> {
        None
    }
}

impl<Req, F: Fn(&Req) -> bool> RequestIdempotency<Req> for F {
    fn idempotent(&self, req: &Req) -> Option<bool> {
        Some(self(req))
    }
}

pub(crate) fn idempotency_of<Req>(i: &impl RequestIdempotency<Req>, req: &Req) -> Idempotency {
    match i.idempotent(req) {
        None => Idempotency::Configured,
        Some(b) => Idempotency::Request(b),
    }
}

/// Retries failed calls per a [`Retry`] policy (its budget, backoff, clock
/// and timer). The inner service must be `Clone` (each attempt polls a
/// clone ready) and so must the request. Refusals of tripline layers inside
/// it (an open breaker, a full bulkhead) are not retried.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use tower::{Service, ServiceExt};
/// use tripline::clock::ManualClock;
/// use tripline::retry::{Retry, RetryBackoff, RetryConfig};
/// use tripline::tower::RetryLayer;
///
/// # futures_executor::block_on(async {
/// let retry = Retry::builder()
///     .config(RetryConfig { backoff: RetryBackoff::None, ..Default::default() })
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let calls = Arc::new(AtomicU32::new(0));
/// let c = calls.clone();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(RetryLayer::new(retry))
///     .service_fn(move |_: ()| {
///         let n = c.fetch_add(1, Ordering::SeqCst);
///         async move { if n < 2 { Err("503") } else { Ok(n) } }
///     });
/// assert_eq!(svc.ready().await.unwrap().call(()).await.unwrap(), 2);
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct RetryLayer<R = RetryOnError, I = AsConfigured> {
    retry: Retry,
    retry_on: R,
    idempotency: I,
}

impl RetryLayer {
    /// Retries every error with `retry`.
    pub fn new(retry: Retry) -> Self {
        RetryLayer {
            retry,
            retry_on: RetryOnError,
            idempotency: AsConfigured,
        }
    }
}

impl<R, I> RetryLayer<R, I> {
    /// Decides which results are retried (over `&Result<Response, BoxError>`).
    pub fn retry_on<R2>(self, retry_on: R2) -> RetryLayer<R2, I> {
        RetryLayer {
            retry: self.retry,
            retry_on,
            idempotency: self.idempotency,
        }
    }

    /// Decides per request whether it may be repeated, e.g.
    /// [`http_retryable`](super::http_retryable).
    pub fn idempotency<I2>(self, idempotency: I2) -> RetryLayer<R, I2> {
        RetryLayer {
            retry: self.retry,
            retry_on: self.retry_on,
            idempotency,
        }
    }
}

impl<S, R: Clone, I: Clone> Layer<S> for RetryLayer<R, I> {
    type Service = RetryService<S, R, I>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            layer: self.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A retried service; see [`RetryLayer`].
#[derive(Debug)]
pub struct RetryService<S, R, I> {
    inner: S,
    layer: RetryLayer<R, I>,
    ready: Readiness,
}

impl<S: Clone, R: Clone, I: Clone> Clone for RetryService<S, R, I> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        RetryService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S, R, I, Req> Service<Req> for RetryService<S, R, I>
where
    S: Repeatable<Req>,
    Req: Clone + Send + 'static,
    R: RetryClassifier<S::Response, BoxError> + Clone + Send + 'static,
    I: RequestIdempotency<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    poll_ready_through_guard!();

    fn call(&mut self, req: Req) -> Self::Future {
        if let Err(not_ready) = self.ready.take("retry") {
            return boxed_refusal(not_ready);
        }
        let mut svc = take_ready(&mut self.inner);
        let idempotency = idempotency_of(&self.layer.idempotency, &req);
        let retry = self.layer.retry.clone();
        let retry_on = self.layer.retry_on.clone();
        let deadline = Deadline::current();
        Box::pin(Marked::new(IN_RETRY, async move {
            let policy = retry.policy();
            let pipeline = &*retry.pipeline().inner;
            let clock = &pipeline.clock;
            policy.deposit();
            let (mut made, mut wait) = (0u32, std::time::Duration::ZERO);
            loop {
                made += 1;
                if made > 1 {
                    until_ready(&mut svc).await?;
                }
                policy.count_attempt(made > 1);
                let result = svc.call(req.clone()).await.map_err(Into::into);
                let decision = match &result {
                    Err(e) if is_local_rejection(&**e) => {
                        if e.is::<Rejected>() && made < policy.config().max_attempts {
                            policy.refuse(RetryRefusal::CircuitOpen);
                        }
                        RetryDecision::Done
                    }
                    _ => retry_on.decide(&result),
                };
                if decision == RetryDecision::Done {
                    return result;
                }
                let remaining = deadline.map(|d| d.instant() - clock.now());
                let floor = pipeline.timeouts.min_remaining;
                match policy.plan(made, decision, idempotency, wait, remaining, floor) {
                    Ok(w) => {
                        pipeline.sleep_async(w).await;
                        wait = w;
                        if policy.withdraw().is_err() {
                            return exhausted(made, result);
                        }
                    }
                    Err(RetryRefusal::Budget) => return exhausted(made, result),
                    Err(_) => return result,
                }
            }
        }))
    }
}

fn exhausted<T>(attempts: u32, result: Result<T, BoxError>) -> Result<T, BoxError> {
    result.map_err(|last| Box::new(BudgetExhausted { attempts, last }) as BoxError)
}
