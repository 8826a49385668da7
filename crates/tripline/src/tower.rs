//! tower `Layer`s for every policy and for the composed pipeline (feature
//! `tower`).
//!
//! | layer | does | refuses with |
//! |---|---|---|
//! | [`CircuitBreakerLayer`] | reserves a breaker permit in `poll_ready`, records the outcome | [`Rejected`] |
//! | [`BulkheadLayer`] | reserves a slot (queueing as configured) in `poll_ready` | [`BulkheadFull`] |
//! | [`TimeoutLayer`] | per-attempt timeout | [`Timeout`] |
//! | [`DeadlineLayer`] | reads, tightens, enforces and forwards the request's deadline (HTTP) | [`DeadlineExceeded`] |
//! | [`RetryLayer`] | retries with budget, backoff, pushback and idempotency | [`BudgetExhausted`] |
//! | [`HedgeLayer`] | hedged requests | — |
//! | [`FallbackLayer`] | serves [`Served`](crate::fallback::Served) values, degraded ones marked | — |
//! | [`PipelineLayer`] | the whole [`Pipeline`](crate::Pipeline) in the canonical order | all of the above |
//!
//! # The readiness contract
//!
//! tower requires `poll_ready` to return `Ready(Ok)` before every `call`.
//! The layers that reserve something (a breaker permit, a bulkhead slot) do
//! it in `poll_ready` and hand it to exactly the next `call`; every layer
//! refuses a `call` without a preceding `poll_ready` with [`NotReady`], an
//! error that says how to fix it, rather than silently skipping the policy.
//! A clone starts not ready and never shares its original's reservation.
//! Dropping a response future releases whatever it holds (permit, slot,
//! half-open probe slot) with a neutral verdict: cancellation is not
//! evidence about the dependency.
//!
//! Every layer wraps any [`Wrapped`] service (its error converts into a
//! `BoxError`); retry and hedge, which call it once per attempt from a
//! boxed future, need a [`Repeatable`] one (`Clone + Send`, its futures
//! `Send`). Both are blanket-implemented names for those bounds.
//!
//! Errors are `BoxError`s: the inner service's error unchanged, or one of
//! tripline's small refusal types; [`policy_error`] turns a `BoxError` back
//! into a [`PolicyError`] to match on. The default breaker classifier,
//! [`IgnoreLocalRejections`], counts tripline's own refusals (an inner
//! bulkhead's `BulkheadFull`, say) as neither success nor failure, so a
//! bulkhead inside the breaker cannot trip it.
//!
//! Hand-stacked layers can still be put in a harmful order: check the stack
//! with [`check_order`](crate::pipeline::check_order), or use [`PipelineLayer`].
//! At run time a [`CircuitBreakerService`] also notices when it is called
//! from inside a `RetryLayer`/`PipelineLayer` (it would count every attempt)
//! or inside a `BulkheadLayer` (its calls queue for slots before it can
//! short-circuit them), and fails the call with [`MisorderedLayers`], whose
//! message names the right order: such a stack is a bug that otherwise
//! shows only as early trips in production. It also counts every such call
//! ([`misordered_calls`]) and logs a `tracing` warning once per process and
//! kind. [`CircuitBreakerLayer::allow_harmful_order`] opts out (the calls
//! then go through, still counted and warned about).

mod breaker;
mod bulkhead;
mod deadline;
mod fallback;
mod hedge;
mod order;
mod pipeline;
mod ready;
mod refusal;
mod retry;
mod timeout;

use std::fmt;

pub use breaker::{CircuitBreakerLayer, CircuitBreakerService};
pub use bulkhead::{BulkheadLayer, BulkheadService};
pub use deadline::{DeadlineLayer, DeadlineService};
pub use fallback::{FallbackLayer, FallbackService};
pub use hedge::{HedgeLayer, HedgeService};
pub(crate) use order::{IN_BULKHEAD, IN_RETRY, Marked, check_breaker_placement, enter};
pub use order::{MisorderedLayers, misordered_calls};
pub use pipeline::{PipelineLayer, PipelineService};
pub use ready::{Repeatable, Wrapped};
pub use retry::{AsConfigured, RequestIdempotency, RetryLayer, RetryService};
pub use timeout::{TimeoutLayer, TimeoutService};

/// The breaker's refusal: what [`CircuitBreakerLayer`] fails a call with,
/// the same type the breaker's own `call` and the pipeline give.
pub use crate::breaker::Rejected;
pub use crate::bulkhead::BulkheadFull;
#[allow(deprecated)]
pub use crate::pipeline::CircuitOpen;
pub use crate::timeout::{DeadlineExceeded, Timeout};

use crate::classify::{Classifier, Outcome};
use crate::pipeline::PolicyError;

/// The error type of every tripline layer.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A future boxed for a layer's response.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// `call` without a preceding successful `poll_ready`.
///
/// ```
/// use tripline::tower::NotReady;
/// let e = NotReady { layer: "circuit_breaker" };
/// assert!(e.to_string().starts_with("circuit_breaker: call() without poll_ready()"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotReady {
    /// The layer that was called.
    pub layer: &'static str,
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: call() without poll_ready(): a tower service must be polled ready before \
             every call (use ServiceExt::ready or oneshot), and a clone starts not ready",
            self.layer
        )
    }
}

impl std::error::Error for NotReady {}

/// A retry was wanted but the budget is spent; `last` is the error that
/// would have been retried.
///
/// ```
/// use tripline::tower::BudgetExhausted;
/// let e = BudgetExhausted { attempts: 2, last: "503".into() };
/// assert_eq!(e.to_string(), "retry budget exhausted after 2 attempt(s); last error: 503");
/// ```
#[derive(Debug)]
pub struct BudgetExhausted {
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's error.
    pub last: BoxError,
}

impl fmt::Display for BudgetExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "retry budget exhausted after {} attempt(s); last error: {}",
            self.attempts, self.last
        )
    }
}

impl std::error::Error for BudgetExhausted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.last)
    }
}

/// Whether `e` is one of tripline's local refusals (the call never reached
/// the dependency): breaker open, bulkhead full, deadline floor, not ready,
/// a misordered stack. Never retried, never counted against a breaker.
pub fn is_local_rejection(e: &(dyn std::error::Error + 'static)) -> bool {
    e.is::<Rejected>()
        || e.is::<BulkheadFull>()
        || e.is::<DeadlineExceeded>()
        || e.is::<NotReady>()
        || e.is::<MisorderedLayers>()
}

/// Turns a layer's `BoxError` into a [`PolicyError`] to match on.
///
/// ```
/// use tripline::pipeline::PolicyError;
/// use tripline::tower::{policy_error, BoxError, BulkheadFull};
///
/// let e: BoxError = Box::new(BulkheadFull { max_concurrent: 8, queued: false });
/// assert!(matches!(policy_error(e), PolicyError::BulkheadFull(_)));
/// ```
pub fn policy_error(e: BoxError) -> PolicyError<BoxError> {
    let e = match e.downcast::<Rejected>() {
        Ok(c) => return PolicyError::CircuitOpen(*c),
        Err(e) => e,
    };
    let e = match e.downcast::<BulkheadFull>() {
        Ok(b) => return PolicyError::BulkheadFull(*b),
        Err(e) => e,
    };
    let e = match e.downcast::<DeadlineExceeded>() {
        Ok(d) => return PolicyError::DeadlineExceeded(*d),
        Err(e) => e,
    };
    let e = match e.downcast::<Timeout>() {
        Ok(t) => return PolicyError::Timeout(*t),
        Err(e) => e,
    };
    match e.downcast::<BudgetExhausted>() {
        Ok(b) => PolicyError::BudgetExhausted {
            attempts: b.attempts,
            last: Box::new(policy_error(b.last)),
        },
        Err(e) => PolicyError::Inner(e),
    }
}

/// The inverse of [`policy_error`]: each refusal as its own error type, the
/// inner error unchanged.
pub fn box_error(e: PolicyError<BoxError>) -> BoxError {
    match e {
        PolicyError::CircuitOpen(c) => Box::new(c),
        PolicyError::BulkheadFull(b) => Box::new(b),
        PolicyError::DeadlineExceeded(d) => Box::new(d),
        PolicyError::Timeout(t) => Box::new(t),
        PolicyError::BudgetExhausted { attempts, last } => Box::new(BudgetExhausted {
            attempts,
            last: box_error(*last),
        }),
        PolicyError::Inner(e) => e,
    }
}

/// The default breaker classifier of the layers: `Ok` is a success,
/// tripline's local refusals are ignored (they say nothing about the
/// dependency), every other error is a failure.
///
/// ```
/// use tripline::tower::{BoxError, BulkheadFull, IgnoreLocalRejections};
/// use tripline::{Classifier, Outcome};
///
/// let full: Result<(), BoxError> = Err(Box::new(BulkheadFull { max_concurrent: 1, queued: false }));
/// assert_eq!(IgnoreLocalRejections.classify(&full), Outcome::Ignored);
/// let reset: Result<(), BoxError> = Err("connection reset".into());
/// assert_eq!(IgnoreLocalRejections.classify(&reset), Outcome::Failure);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct IgnoreLocalRejections;

impl<T> Classifier<T, BoxError> for IgnoreLocalRejections {
    fn classify(&self, result: &Result<T, BoxError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e) if is_local_rejection(&**e) => Outcome::Ignored,
            Err(_) => Outcome::Failure,
        }
    }
}

/// Whether an HTTP request may be retried: safe and idempotent methods
/// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) may; others (POST, PATCH) only
/// with an `Idempotency-Key` header. For [`RetryLayer::idempotency`] and
/// [`PipelineLayer::idempotency`].
///
/// ```
/// use tripline::tower::http_retryable;
/// let post = http::Request::post("/pay").body(()).unwrap();
/// assert!(!http_retryable(&post));
/// let keyed = http::Request::post("/pay").header("idempotency-key", "k1").body(()).unwrap();
/// assert!(http_retryable(&keyed));
/// ```
pub fn http_retryable<B>(req: &http::Request<B>) -> bool {
    req.method().is_idempotent() || req.headers().contains_key("idempotency-key")
}

/// A ready-made `retry_on` for HTTP clients: 429, 502, 503 and 504 are
/// retried, after the response's `Retry-After` when it has one; a
/// `grpc-retry-pushback-ms` header is obeyed (a negative value means do not
/// retry); transport errors are retried; tripline's own refusals and every
/// other status are final.
///
/// ```
/// use std::time::Duration;
/// use tripline::retry::RetryDecision;
/// use tripline::tower::{http_retry_decision, BoxError};
///
/// let busy: Result<http::Response<()>, BoxError> =
///     Ok(http::Response::builder().status(503).header("retry-after", "2").body(()).unwrap());
/// assert_eq!(http_retry_decision(&busy), RetryDecision::RetryAfter(Duration::from_secs(2)));
/// let bad: Result<http::Response<()>, BoxError> = Ok(http::Response::builder().status(400).body(()).unwrap());
/// assert_eq!(http_retry_decision(&bad), RetryDecision::Done);
/// ```
pub fn http_retry_decision<B>(
    result: &Result<http::Response<B>, BoxError>,
) -> crate::retry::RetryDecision {
    use crate::retry::RetryDecision;
    let resp = match result {
        Err(e) if is_local_rejection(&**e) => return RetryDecision::Done,
        Err(_) => return RetryDecision::Retry,
        Ok(resp) => resp,
    };
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    if let Some(v) = header("grpc-retry-pushback-ms") {
        return RetryDecision::from_grpc_pushback(v);
    }
    match resp.status().as_u16() {
        429 | 502 | 503 | 504 => {
            header("retry-after").map_or(RetryDecision::Retry, RetryDecision::from_retry_after)
        }
        _ => RetryDecision::Done,
    }
}
