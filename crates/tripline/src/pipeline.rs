//! The composed pipeline: every policy in the one order that makes them
//! help each other instead of fighting.
//!
//! Policies amplify or cancel each other depending on their order (seed 001
//! §6). The pipeline fixes the canonical order, outermost first:
//!
//! ```text
//! fallback → overall deadline → retry (with budget) → circuit breaker → bulkhead → per-attempt timeout → call
//! ```
//!
//! * The **deadline** is checked before anything runs and bounds the whole
//!   loop, backoff included; below the floor the call fails fast.
//! * The **breaker** counts each *logical* call's final outcome once, while
//!   the retry loop checks it before every attempt — "outer statistics,
//!   inner short-circuit" (§6.1.2): statistics keep business meaning, and an
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

mod call;
mod call_async;
mod error;
mod order;

use std::fmt;
use std::time::Duration;

pub use call::{Attempt, Call};
pub use call_async::AsyncAttempt;
pub use error::{CircuitOpen, PolicyConfigError, PolicyError};
pub use order::{OrderWarning, Stage, check_order};

use crate::breaker::{CircuitBreaker, ConfigWarning};
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::classify::DefaultClassifier;
use crate::clock::{Clock, SharedClock, Timestamp};
use crate::retry::{Retry, RetryConfig, RetryOnError, RetryPolicy, RetryStats};
use crate::sync::Arc;
use crate::timeout::{Deadline, DeadlineExceeded, SharedTimer, TimeoutConfig};

type Sleeper = Arc<dyn Fn(Duration) + Send + Sync>;

pub(crate) struct Inner {
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) bulkhead: Option<Bulkhead>,
    pub(crate) timeouts: TimeoutConfig,
    pub(crate) clock: SharedClock,
    pub(crate) timer: Option<SharedTimer>,
    sleeper: Option<Sleeper>,
    pub(crate) irreversible: bool,
}

/// Retry, budget, breaker, bulkhead and timeouts composed in the canonical
/// order; a cheap handle, clones share every policy.
#[derive(Clone)]
pub struct Pipeline {
    pub(crate) inner: Arc<Inner>,
}

/// Builds a [`Pipeline`]; every part is optional.
#[derive(Default)]
pub struct PipelineBuilder {
    retry: Option<RetryConfig>,
    retry_policy: Option<RetryPolicy>,
    budget: Option<RetryBudget>,
    seed: Option<u64>,
    breaker: Option<CircuitBreaker>,
    bulkhead: Option<Bulkhead>,
    timeouts: TimeoutConfig,
    clock: Option<SharedClock>,
    timer: Option<SharedTimer>,
    sleeper: Option<Sleeper>,
    irreversible: bool,
    order: Option<Vec<Stage>>,
}

impl PipelineBuilder {
    /// Retries with `config` (a fresh policy; see [`share_retry`](Self::share_retry)).
    pub fn retry(mut self, config: RetryConfig) -> Self {
        self.retry = Some(config);
        self
    }

    /// Uses an existing [`Retry`]'s policy: its counters, jitter and budget.
    pub fn share_retry(mut self, retry: &Retry) -> Self {
        self.retry_policy = Some(retry.policy().clone());
        self
    }

    pub(crate) fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry_policy = Some(policy);
        self
    }

    /// Bounds retries with `budget` (shared with whoever else holds it).
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Seeds the retry jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Protects the calls with `breaker`. The pipeline also takes the
    /// breaker's clock unless [`clock`](Self::clock) sets one.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// Limits concurrency with `bulkhead`.
    pub fn bulkhead(mut self, bulkhead: Bulkhead) -> Self {
        self.bulkhead = Some(bulkhead);
        self
    }

    /// Per-attempt timeout, overall deadline and floor.
    pub fn timeouts(mut self, timeouts: TimeoutConfig) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The clock deadlines and durations are measured on.
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// The timer async calls sleep and time out on (default: tokio's, with
    /// the `tokio` feature). Without one, async timeouts are judged after
    /// the fact like sync ones, and backoff blocks the thread.
    pub fn timer(mut self, timer: SharedTimer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// How sync calls wait between attempts (default: advance a
    /// `ManualClock`, else block the thread).
    pub fn sleeper(mut self, sleeper: impl Fn(Duration) + Send + Sync + 'static) -> Self {
        self.sleeper = Some(Arc::new(sleeper));
        self
    }

    /// Marks the operation irreversible (payments, stock deduction,
    /// authorization): it refuses a fallback and must fail explicitly
    /// (seed 001 §6.3.3).
    pub fn irreversible(mut self) -> Self {
        self.irreversible = true;
        self
    }

    /// Declares the stack order you intend (outermost first) to have it
    /// checked: the pipeline runs only the canonical order, so any other is
    /// refused with the reason it would hurt.
    pub fn order(mut self, stages: &[Stage]) -> Self {
        self.order = Some(stages.to_vec());
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Pipeline, PolicyConfigError> {
        self.build_with_warnings().map(|(p, _)| p)
    }

    /// Like [`build`](Self::build), also returning soft warnings (a slow-call
    /// threshold not below the per-attempt timeout, say).
    pub fn build_with_warnings(self) -> Result<(Pipeline, Vec<ConfigWarning>), PolicyConfigError> {
        self.timeouts.validate()?;
        if let Some(order) = &self.order {
            order::check_canonical(order)?;
        }
        let retry = match (self.retry_policy, self.retry) {
            (Some(p), _) => Some(p),
            (None, Some(config)) => Some(RetryPolicy::new(config, self.budget.clone(), self.seed)?),
            (None, None) => None,
        };
        if self.budget.is_some() && retry.is_none() {
            return Err(PolicyConfigError::new(
                "pipeline",
                "budget",
                "needs a retry policy to bound (add `retry`)",
            ));
        }
        let mut warnings = Vec::new();
        if let (Some(b), Some(t)) = (&self.breaker, self.timeouts.per_attempt)
            && let Some(slow) = b.config().slow_call_duration
            && slow >= t
        {
            warnings.push(ConfigWarning {
                field: "timeouts.per_attempt".into(),
                message: format!(
                    "the breaker's slow_call_duration ({}) is not below the per-attempt timeout \
                     ({}): no call can be slow without first timing out",
                    humantime::format_duration(slow),
                    humantime::format_duration(t)
                ),
            });
        }
        if let Some(r) = &retry
            && r.config().max_attempts > 1
            && self.timeouts.overall.is_none()
            && self.timeouts.per_attempt.is_none()
        {
            warnings.push(ConfigWarning {
                field: "timeouts".into(),
                message: "retries without any timeout: a hung dependency holds every attempt \
                          forever and the breaker never sees it fail"
                    .into(),
            });
        }
        for w in &warnings {
            tracing::warn!(target: "tripline::pipeline", "{w}");
        }
        let clock = self
            .clock
            .or_else(|| self.breaker.as_ref().map(|b| b.clock().clone()))
            .unwrap_or_default();
        Ok((
            Pipeline {
                inner: Arc::new(Inner {
                    retry,
                    breaker: self.breaker,
                    bulkhead: self.bulkhead,
                    timeouts: self.timeouts,
                    clock,
                    timer: self.timer.or_else(default_timer),
                    sleeper: self.sleeper,
                    irreversible: self.irreversible,
                }),
            },
            warnings,
        ))
    }
}

#[cfg(feature = "tokio")]
fn default_timer() -> Option<SharedTimer> {
    Some(Arc::new(crate::timeout::TokioTimer))
}

#[cfg(not(feature = "tokio"))]
fn default_timer() -> Option<SharedTimer> {
    None
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

    /// Fails fast when less than the floor is left (seed 001 §6.2.2).
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
    pub(crate) fn breaker_admits(&self, is_probe: bool) -> Result<(), CircuitOpen> {
        let Some(b) = &self.breaker else {
            return Ok(());
        };
        let state = b.state();
        if state.admits_freely() || (state == crate::State::HalfOpen && is_probe) {
            return Ok(());
        }
        let now = self.clock.now();
        Err(CircuitOpen {
            state,
            retry_after: b.open_until_time().map(|t| t - now),
        })
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
