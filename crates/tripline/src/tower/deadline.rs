//! `DeadlineLayer`: the request's deadline, read, tightened, enforced and
//! forwarded (HTTP).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::ready::{Readiness, Wrapped, poll_ready_through_guard};
use super::refusal::boxed_refusal;
use super::{BoxError, BoxFuture};
use crate::clock::{Clock, SharedClock};
use crate::timeout::{Deadline, DeadlineExceeded, SharedTimer, timeout};

/// Gives each HTTP request a deadline and keeps it honest:
///
/// 1. reads the caller's remaining budget from
///    [`DEADLINE_HEADER`](crate::timeout::DEADLINE_HEADER) or `grpc-timeout`
///    (a malformed value is treated as absent and counted), takes the
///    earlier of it, the context's [`Deadline::current`] and the layer's
///    default budget;
/// 2. fails fast with [`DeadlineExceeded`] when less than `floor` is left
///    — the inner service is not called;
/// 3. rewrites the header with the budget left, so the next hop inherits it;
/// 4. runs the inner call with the deadline as its task-local context and
///    abandons it when the deadline passes.
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::{sync::Arc, time::Duration};
/// use tower::{Service, ServiceExt};
/// use tripline::timeout::TokioTimer;
/// use tripline::tower::DeadlineLayer;
///
/// let layer = DeadlineLayer::new(TokioTimer.clock(), Some(Arc::new(TokioTimer)))
///     .floor(Duration::from_millis(20));
/// let mut svc = tower::ServiceBuilder::new()
///     .layer(layer)
///     .service_fn(|req: http::Request<()>| async move {
///         Ok::<_, std::io::Error>(req.headers()["tripline-timeout-ms"].to_str().unwrap().to_owned())
///     });
/// let req = http::Request::get("/").header("grpc-timeout", "500m").body(()).unwrap();
/// assert_eq!(svc.ready().await.unwrap().call(req).await.unwrap(), "500");
/// let late = http::Request::get("/").header("tripline-timeout-ms", "5").body(()).unwrap();
/// assert!(svc.ready().await.unwrap().call(late).await.unwrap_err().is::<tripline::tower::DeadlineExceeded>());
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct DeadlineLayer {
    clock: SharedClock,
    timer: Option<SharedTimer>,
    floor: Duration,
    default_budget: Option<Duration>,
    stats: Arc<Stats>,
}

#[derive(Default)]
struct Stats {
    malformed: AtomicU64,
    refused: AtomicU64,
}

impl DeadlineLayer {
    /// Deadlines on `clock`, enforced on `timer` (without one, only the
    /// floor is checked).
    pub fn new(clock: impl Into<SharedClock>, timer: Option<SharedTimer>) -> Self {
        DeadlineLayer {
            clock: clock.into(),
            timer,
            floor: Duration::from_millis(1),
            default_budget: None,
            stats: Arc::default(),
        }
    }

    /// Fail fast when less than `floor` is left (default 1 ms).
    pub fn floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// The budget of a request that carries no deadline.
    pub fn default_budget(mut self, budget: Duration) -> Self {
        self.default_budget = Some(budget);
        self
    }

    /// Malformed deadline headers seen (treated as absent).
    pub fn malformed_headers(&self) -> u64 {
        self.stats.malformed.load(Ordering::Relaxed)
    }

    /// Requests refused because too little budget was left.
    pub fn refused(&self) -> u64 {
        self.stats.refused.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for DeadlineLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineLayer")
            .field("floor", &self.floor)
            .field("default_budget", &self.default_budget)
            .finish()
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            layer: self.clone(),
            ready: Readiness::default(),
        }
    }
}

/// A service under a deadline; see [`DeadlineLayer`].
#[derive(Debug)]
pub struct DeadlineService<S> {
    inner: S,
    layer: DeadlineLayer,
    ready: Readiness,
}

impl<S: Clone> Clone for DeadlineService<S> {
    /// A clone starts not ready.
    fn clone(&self) -> Self {
        DeadlineService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            ready: Readiness::default(),
        }
    }
}

impl<S, B> Service<http::Request<B>> for DeadlineService<S>
where
    S: Wrapped<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    poll_ready_through_guard!();

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if let Err(not_ready) = self.ready.take("deadline") {
            return boxed_refusal(not_ready);
        }
        let l = &self.layer;
        let now = l.clock.now();
        let carried = match Deadline::parse_headers(req.headers(), &l.clock) {
            Ok(d) => d,
            Err(_) => {
                l.stats.malformed.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        let fallback = l.default_budget.map(|b| Deadline::at(now + b));
        let deadline =
            Deadline::earliest(Deadline::earliest(carried, Deadline::current()), fallback);
        let Some(d) = deadline else {
            let fut = self.inner.call(req);
            return Box::pin(async move { fut.await.map_err(Into::into) });
        };
        let remaining = d.instant() - now;
        if remaining < l.floor.max(Duration::from_nanos(1)) {
            l.stats.refused.fetch_add(1, Ordering::Relaxed);
            return boxed_refusal(DeadlineExceeded {
                remaining,
                floor: l.floor,
            });
        }
        d.write_headers_for_peer(req.headers_mut(), &l.clock);
        let fut = d.scope_future(d.scope(|| self.inner.call(req)));
        let floor = l.floor;
        match &l.timer {
            Some(t) => {
                let raced = timeout(t.clone(), remaining, fut);
                Box::pin(async move {
                    match raced.await {
                        Ok(r) => r.map_err(Into::into),
                        Err(_) => Err(Box::new(DeadlineExceeded {
                            remaining: Duration::ZERO,
                            floor,
                        }) as BoxError),
                    }
                })
            }
            None => Box::pin(async move { fut.await.map_err(Into::into) }),
        }
    }
}
