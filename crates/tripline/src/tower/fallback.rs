//! `FallbackLayer`: degraded values, marked, instead of errors.

use tower_layer::Layer;
use tower_service::Service;

use super::ready::{Readiness, Wrapped, poll_ready_through_guard};
use super::refusal::boxed_refusal;
use super::{BoxError, BoxFuture, box_error, policy_error};
use crate::fallback::{Fallback, Served};

/// Turns errors into fallback values per a [`Fallback`] over
/// `(Response, BoxError)`; every response becomes a [`Served`], with the
/// [`Degraded`](crate::fallback::Degraded) marker on substitutes. Errors
/// whose cause has no fallback pass through.
///
/// ```
/// use tower::{Service, ServiceExt};
/// use tripline::fallback::{Fallback, FallbackValue};
/// use tripline::tower::FallbackLayer;
///
/// # futures_executor::block_on(async {
/// let fallback = Fallback::builder().on_failure(FallbackValue::Static("default")).build().unwrap();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(FallbackLayer::new(fallback))
///     .service_fn(|_: ()| async { Err::<&str, _>(std::io::Error::other("boom")) });
/// let served = svc.ready().await.unwrap().call(()).await.unwrap();
/// assert_eq!(served.value, "default");
/// assert!(served.is_degraded());
/// # });
/// ```
pub struct FallbackLayer<T> {
    fallback: Fallback<T, BoxError>,
}

impl<T> Clone for FallbackLayer<T> {
    fn clone(&self) -> Self {
        FallbackLayer {
            fallback: self.fallback.clone(),
        }
    }
}

impl<T> std::fmt::Debug for FallbackLayer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackLayer")
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl<T> FallbackLayer<T> {
    /// Falls back per `fallback`.
    pub fn new(fallback: Fallback<T, BoxError>) -> Self {
        FallbackLayer { fallback }
    }
}

impl<S, T> Layer<S> for FallbackLayer<T> {
    type Service = FallbackService<S, T>;

    fn layer(&self, inner: S) -> Self::Service {
        FallbackService {
            inner,
            fallback: self.fallback.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A service with fallbacks; see [`FallbackLayer`].
pub struct FallbackService<S, T> {
    inner: S,
    fallback: Fallback<T, BoxError>,
    ready: Readiness,
}

impl<S: Clone, T> Clone for FallbackService<S, T> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        FallbackService {
            inner: self.inner.clone(),
            fallback: self.fallback.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S, T> std::fmt::Debug for FallbackService<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackService")
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl<S, T, Req> Service<Req> for FallbackService<S, T>
where
    S: Wrapped<Req, Response = T>,
    S::Future: Send + 'static,
    T: Clone + Send + Sync + 'static,
{
    type Response = Served<T>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Served<T>, BoxError>>;

    poll_ready_through_guard!();

    fn call(&mut self, req: Req) -> Self::Future {
        if let Err(not_ready) = self.ready.take("fallback") {
            return boxed_refusal(not_ready);
        }
        let fut = self.inner.call(req);
        let fallback = self.fallback.clone();
        Box::pin(async move {
            let result = fut.await.map_err(|e| policy_error(e.into()));
            fallback.apply(result).map_err(box_error)
        })
    }
}
