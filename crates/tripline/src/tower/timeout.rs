//! `TimeoutLayer`: a per-attempt timeout around a tower service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::BoxError;
use super::ready::{Readiness, Wrapped, poll_ready_through_guard};
use super::refusal::Refusable;
use crate::timeout::{SharedTimer, TimeoutFuture, timeout};

/// Abandons a response future after `after`, with [`Timeout`](super::Timeout).
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::{sync::Arc, time::Duration};
/// use tower::{Service, ServiceExt};
/// use tripline::timeout::TokioTimer;
/// use tripline::tower::TimeoutLayer;
///
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(TimeoutLayer::new(Duration::from_millis(100), Arc::new(TokioTimer)))
///     .service_fn(|_: ()| async {
///         tokio::time::sleep(Duration::from_secs(5)).await;
///         Ok::<_, std::io::Error>(())
///     });
/// let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
/// assert!(err.is::<tripline::tower::Timeout>());
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct TimeoutLayer {
    after: Duration,
    timer: SharedTimer,
}

impl TimeoutLayer {
    /// Times out after `after` on `timer`.
    pub fn new(after: Duration, timer: SharedTimer) -> Self {
        TimeoutLayer { after, timer }
    }
}

impl std::fmt::Debug for TimeoutLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeoutLayer")
            .field("after", &self.after)
            .finish()
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimeoutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimeoutService {
            inner,
            after: self.after,
            timer: self.timer.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A service with a per-attempt timeout; see [`TimeoutLayer`].
pub struct TimeoutService<S> {
    inner: S,
    after: Duration,
    timer: SharedTimer,
    ready: Readiness,
}

impl<S: Clone> Clone for TimeoutService<S> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        TimeoutService {
            inner: self.inner.clone(),
            after: self.after,
            timer: self.timer.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S> std::fmt::Debug for TimeoutService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeoutService")
            .field("after", &self.after)
            .finish()
    }
}

impl<S: Wrapped<Req>, Req> Service<Req> for TimeoutService<S> {
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    poll_ready_through_guard!();

    fn call(&mut self, req: Req) -> Self::Future {
        let call = match self.ready.take("timeout") {
            Ok(()) => Refusable::running(timeout(
                self.timer.clone(),
                self.after,
                self.inner.call(req),
            )),
            Err(not_ready) => Refusable::refused(Box::new(not_ready)),
        };
        ResponseFuture { call }
    }
}

pin_project_lite::pin_project! {
    /// The response of a [`TimeoutService`].
    pub struct ResponseFuture<F> {
        #[pin]
        call: Refusable<TimeoutFuture<F>>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let raced = ready!(self.project().call.poll_answer(cx, "timeout"))?;
        Poll::Ready(match raced {
            Ok(r) => r.map_err(Into::into),
            Err(t) => Err(Box::new(t)),
        })
    }
}
