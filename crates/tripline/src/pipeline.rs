//! The composed pipeline: every policy in the one order that makes them
//! help each other instead of fighting.
//!
//! Policies amplify or cancel each other depending on their order.
//! The pipeline fixes the canonical order, outermost first:
//!
//! ```text
//! fallback → overall deadline → retry (with budget) → circuit breaker → bulkhead → per-attempt timeout → call
//! ```
//!
//! * The **deadline** is checked before anything runs and bounds the whole
//!   loop, backoff included; below the floor the call fails fast.
//! * The **breaker** counts each *logical* call's final outcome once, while
//!   the retry loop checks it before every attempt — "outer statistics,
//!   inner short-circuit": statistics keep business meaning, and an
//!   opening breaker stops the retries at once. A call the breaker rejects
//!   is never retried and costs no budget. Local refusals (bulkhead full,
//!   deadline floor) are never fed to the breaker as failures.
//! * The **bulkhead** holds a slot per attempt, not across backoff sleeps.
//! * The **per-attempt timeout** turns slowness into a failure the breaker
//!   and the retry can see.
//! * The **fallback** ([`FallbackPipeline`](crate::fallback::FallbackPipeline))
//!   wraps it all and marks what it serves as degraded.
//!
//! Hand-stacked tower layers can get the order wrong; [`check_order`]
//! refuses the harmful stacks and warns about the dubious ones, with reasons.
//!
//! One error type, [`PolicyError`], says which layer refused and why.
//!
//! ```
//! use std::time::Duration;
//! use tripline::clock::ManualClock;
//! use tripline::pipeline::{Pipeline, PolicyError};
//! use tripline::retry::{RetryBackoff, RetryConfig};
//! use tripline::timeout::TimeoutConfig;
//! use tripline::{CircuitBreaker, CircuitBreakerConfig};
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder()
//!     .config(CircuitBreakerConfig { minimum_calls: 5, ..Default::default() })
//!     .clock(clock.clone())
//!     .build()
//!     .unwrap();
//! let pipeline = Pipeline::builder()
//!     .circuit_breaker(breaker.clone())
//!     .retry(RetryConfig {
//!         max_attempts: 3,
//!         backoff: RetryBackoff::Constant { delay: Duration::from_millis(10) },
//!         ..Default::default()
//!     })
//!     .timeouts(TimeoutConfig { overall: Some(Duration::from_secs(1)), ..Default::default() })
//!     .build()
//!     .unwrap();
//!
//! let mut n = 0;
//! let v = pipeline.call(|attempt| {
//!     n += 1;
//!     if attempt.number() < 2 { Err("reset") } else { Ok("ok") }
//! });
//! assert_eq!(v, Ok("ok"));
//! assert_eq!(breaker.metrics().calls.successful, 1); // one logical call, one outcome
//!
//! breaker.force_open();
//! assert!(matches!(pipeline.call(|_| Ok::<_, ()>(1)), Err(PolicyError::CircuitOpen(_))));
//! ```

mod builder;
mod call;
mod call_async;
mod logical;
mod order;

use std::fmt;
use std::time::Duration;

/// The breaker's refusal, as [`PolicyError::CircuitOpen`] carries it.
pub use crate::breaker::Rejected;
#[allow(deprecated)]
pub use crate::error::CircuitOpen;
pub use crate::error::{PolicyConfigError, PolicyError};
pub use builder::PipelineBuilder;
pub use call::{Attempt, Call};
pub use call_async::AsyncAttempt;
#[cfg(feature = "tower")]
pub(crate) use logical::{Progress, Step};
pub use order::{OrderWarning, Stage, check_order};

use crate::breaker::CircuitBreaker;
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::classify::DefaultClassifier;
use crate::clock::{Clock, SharedClock, Timestamp};
use crate::retry_policy::{RetryOnError, RetryPolicy, RetryStats};
use crate::sync::Arc;
use crate::timeout::{Deadline, DeadlineExceeded, SharedTimer, TimeoutConfig};

pub(crate) type Sleeper = Arc<dyn Fn(Duration) + Send + Sync>;

pub(crate) struct Inner {
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) bulkhead: Option<Bulkhead>,
    pub(crate) timeouts: TimeoutConfig,
    pub(crate) clock: SharedClock,
    pub(crate) timer: Option<SharedTimer>,
    pub(crate) sleeper: Option<Sleeper>,
    pub(crate) irreversible: bool,
    /// Retries and no timeout of the pipeline's own. Whether that is a
    /// problem depends on what the calls run through — a `TimeoutLayer`
    /// stacked inside a `PipelineLayer` bounds every attempt — so it is
    /// logged at first direct call, or when a layer wraps a stack without a
    /// timeout, not at build.
    pub(crate) untimed_retries: bool,
    pub(crate) untimed_warned: std::sync::atomic::AtomicBool,
}

impl Inner {
    /// Logs, once per pipeline, that retries run without any timeout.
    #[cold]
    pub(crate) fn warn_untimed_retries(&self, context: &str) {
        if !self
            .untimed_warned
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!(
                target: "tripline::pipeline",
                "retries without any timeout ({context}): a hung dependency holds every attempt \
                 forever and the breaker never sees it fail; set timeouts on the pipeline, or \
                 stack a TimeoutLayer inside the PipelineLayer"
            );
        }
    }
}

/// Retry, budget, breaker, bulkhead and timeouts composed in the canonical
/// order; a cheap handle, clones share every policy.
#[derive(Clone)]
pub struct Pipeline {
    pub(crate) inner: Arc<Inner>,
}

impl Pipeline {
    /// A builder.
    pub fn builder() -> PipelineBuilder {
        PipelineBuilder::default()
    }

    /// A per-call builder: explicit deadline, idempotency key, classifiers.
    #[inline]
    pub fn request(&self) -> Call<'_, DefaultClassifier, RetryOnError> {
        Call::new(self)
    }

    /// Runs `op` through every policy (sync): `Err` is a failure and retried.
    #[inline]
    pub fn call<T, E>(
        &self,
        op: impl FnMut(&Attempt) -> Result<T, E>,
    ) -> Result<T, PolicyError<E>> {
        self.request().call(op)
    }

    /// Runs the futures `op` makes through every policy (async).
    pub async fn call_async<T, E, F, Fut>(&self, op: F) -> Result<T, PolicyError<E>>
    where
        F: FnMut(AsyncAttempt) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        self.request().call_async(op).await
    }

    /// The clock the pipeline measures on.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The breaker, if any.
    pub fn circuit_breaker(&self) -> Option<&CircuitBreaker> {
        self.inner.breaker.as_ref()
    }

    /// The bulkhead, if any.
    pub fn bulkhead(&self) -> Option<&Bulkhead> {
        self.inner.bulkhead.as_ref()
    }

    /// The retry budget, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.inner.retry.as_ref().and_then(|r| r.budget())
    }

    /// The retry counters, if the pipeline retries.
    pub fn retry_stats(&self) -> Option<RetryStats> {
        self.inner.retry.as_ref().map(|r| r.stats())
    }

    /// The timeouts.
    pub fn timeouts(&self) -> &TimeoutConfig {
        &self.inner.timeouts
    }

    /// Whether the operation was marked irreversible.
    pub fn is_irreversible(&self) -> bool {
        self.inner.irreversible
    }
}

impl Inner {
    /// The logical call's deadline: the explicit or context one, tightened
    /// by the configured overall budget.
    #[inline]
    pub(crate) fn deadline(
        &self,
        explicit: Option<Deadline>,
        start: Timestamp,
    ) -> Option<Deadline> {
        let carried = explicit.or_else(Deadline::current);
        match self.timeouts.overall {
            Some(o) => Deadline::earliest(carried, Some(Deadline::at(start + o))),
            None => carried,
        }
    }

    /// Fails fast when less than the floor is left.
    #[inline]
    pub(crate) fn check_floor(
        &self,
        deadline: Option<Deadline>,
        now: Timestamp,
    ) -> Result<(), DeadlineExceeded> {
        if let Some(d) = deadline {
            let remaining = d.instant() - now;
            if remaining < self.timeouts.min_remaining.max(Duration::from_nanos(1)) {
                return Err(DeadlineExceeded {
                    remaining,
                    floor: self.timeouts.min_remaining,
                });
            }
        }
        Ok(())
    }

    /// Waits `d` between sync attempts.
    pub(crate) fn sleep_sync(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        if let Some(s) = &self.sleeper {
            s(d);
        } else if let Some(m) = self.clock.as_manual() {
            m.advance(d);
        } else {
            crate::clock::block_thread_for(d);
        }
    }

    /// Waits `d` between async attempts: on the timer, or by advancing a
    /// `ManualClock`, or (no timer) by blocking like a sync call.
    pub(crate) async fn sleep_async(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        match (&self.timer, self.clock.as_manual()) {
            (_, Some(m)) => {
                m.advance(d);
            }
            (Some(t), None) => t.sleep(d).await,
            (None, None) => self.sleep_sync(d),
        }
    }

    /// Whether the breaker still admits the logical call holding `is_probe`.
    pub(crate) fn breaker_admits(&self, is_probe: bool) -> Result<(), Rejected> {
        let Some(b) = &self.breaker else {
            return Ok(());
        };
        let state = b.state();
        if state.admits_freely() || (state == crate::State::HalfOpen && is_probe) {
            return Ok(());
        }
        let now = self.clock.now();
        Err(Rejected::new(state, b.open_until_time().map(|t| t - now)))
    }
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Pipeline")
            .field("retry", &i.retry.as_ref().map(|r| r.config()))
            .field("breaker", &i.breaker.as_ref().map(|b| b.name()))
            .field("bulkhead", &i.bulkhead)
            .field("timeouts", &i.timeouts)
            .field("irreversible", &i.irreversible)
            .finish()
    }
}
