//! `PipelineLayer`: the whole pipeline in front of a tower service.

use std::future::poll_fn;
use std::task::{Context, Poll, ready};

use tower_layer::Layer;
use tower_service::Service;

use super::retry::{AsConfigured, RequestIdempotency};
use super::{BoxError, BoxFuture, IgnoreLocalRejections, NotReady, box_error};
use crate::classify::Classifier;
use crate::pipeline::Pipeline;
use crate::retry::{RetryClassifier, RetryOnError};

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
            ready: false,
        }
    }
}

/// A service behind the pipeline; see [`PipelineLayer`].
#[derive(Debug)]
pub struct PipelineService<S, C, R, I> {
    inner: S,
    layer: PipelineLayer<C, R, I>,
    ready: bool,
}

impl<S: Clone, C: Clone, R: Clone, I: Clone> Clone for PipelineService<S, C, R, I> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        PipelineService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            ready: false,
        }
    }
}

impl<S, C, R, I, Req> Service<Req> for PipelineService<S, C, R, I>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    S::Response: Send + 'static,
    Req: Clone + Send + 'static,
    C: Classifier<S::Response, BoxError> + Clone + Send + 'static,
    R: RetryClassifier<S::Response, BoxError> + Clone + Send + 'static,
    I: RequestIdempotency<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        ready!(self.inner.poll_ready(cx)).map_err(Into::into)?;
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        if !std::mem::take(&mut self.ready) {
            return Box::pin(async { Err(Box::new(NotReady { layer: "pipeline" }) as BoxError) });
        }
        let proto = self.inner.clone();
        let first = std::mem::replace(&mut self.inner, proto.clone());
        let idempotent = self.layer.idempotency.idempotent(&req);
        let pipeline = self.layer.pipeline.clone();
        let classifier = self.layer.classifier.clone();
        let retry_on = self.layer.retry_on.clone();
        let marks = if pipeline.retry_stats().is_some() {
            super::IN_RETRY
        } else {
            0
        };
        Box::pin(super::Marked::new(marks, async move {
            let mut first = Some(first);
            let mut call = pipeline.request().classify(classifier).retry_on(retry_on);
            if let Some(i) = idempotent {
                call = call.idempotent(i);
            }
            call.call_async(move |_| {
                let (mut svc, ready) = match first.take() {
                    Some(s) => (s, true),
                    None => (proto.clone(), false),
                };
                let req = req.clone();
                async move {
                    if !ready {
                        poll_fn(|cx| svc.poll_ready(cx)).await.map_err(Into::into)?;
                    }
                    svc.call(req).await.map_err(Into::into)
                }
            })
            .await
            .map_err(box_error)
        }))
    }
}
