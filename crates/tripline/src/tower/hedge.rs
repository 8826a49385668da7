//! `HedgeLayer`: hedged requests around a tower service.

use tower_layer::Layer;
use tower_service::Service;

use super::ready::{Readiness, Repeatable, poll_ready_through_guard, take_ready, until_ready};
use super::refusal::boxed_refusal;
use super::{BoxError, BoxFuture};
use crate::hedge::Hedge;

/// Sends hedges per a [`Hedge`] policy; the first success wins and the
/// other in-flight requests are dropped (cancelled). The inner service and
/// the request must be `Clone`.
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::{sync::Arc, time::Duration};
/// use tower::{Service, ServiceExt};
/// use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
/// use tripline::timeout::TokioTimer;
/// use tripline::tower::HedgeLayer;
///
/// let hedge = Hedge::builder()
///     .config(HedgeConfig { delay: HedgeDelay::Fixed { delay: Duration::from_millis(5) }, ..Default::default() })
///     .timer(Arc::new(TokioTimer))
///     .clock(TokioTimer.clock())
///     .build()
///     .unwrap();
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(HedgeLayer::new(hedge))
///     .service_fn(|_: ()| async { Ok::<_, std::io::Error>("pong") });
/// assert_eq!(svc.ready().await.unwrap().call(()).await.unwrap(), "pong");
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone, Debug)]
pub struct HedgeLayer {
    hedge: Hedge,
}

impl HedgeLayer {
    /// Hedges with `hedge`.
    pub fn new(hedge: Hedge) -> Self {
        HedgeLayer { hedge }
    }
}

impl<S> Layer<S> for HedgeLayer {
    type Service = HedgeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            hedge: self.hedge.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A hedged service; see [`HedgeLayer`].
#[derive(Debug)]
pub struct HedgeService<S> {
    inner: S,
    hedge: Hedge,
    ready: Readiness,
}

impl<S: Clone> Clone for HedgeService<S> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        HedgeService {
            inner: self.inner.clone(),
            hedge: self.hedge.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S: Repeatable<Req>, Req: Clone + Send + 'static> Service<Req> for HedgeService<S> {
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    poll_ready_through_guard!();

    fn call(&mut self, req: Req) -> Self::Future {
        if let Err(not_ready) = self.ready.take("hedge") {
            return boxed_refusal(not_ready);
        }
        let first = take_ready(&mut self.inner);
        let proto = self.inner.clone();
        let hedge = self.hedge.clone();
        Box::pin(async move {
            let mut first = Some(first);
            hedge
                .call(move |_| {
                    let (mut svc, ready) = match first.take() {
                        Some(s) => (s, true),
                        None => (proto.clone(), false),
                    };
                    let req = req.clone();
                    async move {
                        if !ready {
                            until_ready(&mut svc).await?;
                        }
                        svc.call(req).await.map_err(Into::into)
                    }
                })
                .await
        })
    }
}
