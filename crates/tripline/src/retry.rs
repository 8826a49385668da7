//! Retry: another attempt for a failure that may be transient — within
//! limits that keep retries from becoming the outage.
//!
//! Four rules make retrying safe, and this policy enforces each:
//!
//! 1. *Retry in one layer only* — use the [`Pipeline`]
//!    (or one `RetryLayer`) at the edge, not in every hop.
//! 2. *A retry budget* — with a [`RetryBudget`], retries are at most a
//!    fraction of recent requests across every clone and task.
//! 3. *Backoff with jitter* — [`RetryBackoff`], with a seeded generator.
//! 4. *Only idempotent operations* — an operation configured as
//!    non-idempotent (`idempotent: false`) is never retried unless the call
//!    carries an idempotency key.
//!
//! The loop also obeys server pushback ([`RetryDecision::RetryAfter`],
//! [`RetryDecision::DoNotRetry`]) and stops when the deadline cannot fit the
//! backoff plus another attempt's floor. Every refused retry is counted
//! with its reason ([`RetryRefusal`], [`RetryStats`]).
//!
//! The order of checks before retry *n*: pushback, `max_attempts`,
//! idempotency, the deadline (after the backoff), a non-consuming look at
//! the budget; then, after the backoff and right before the attempt, the
//! circuit breaker (an open breaker stops the loop and costs no budget)
//! and finally the budget withdrawal itself.

use std::fmt;
use std::future::Future;

use crate::retry_policy::RetryPolicy;
pub use crate::retry_policy::{
    RetryBackoff, RetryClassifier, RetryConfig, RetryDecision, RetryOnError, RetryRefusal,
    RetryStats,
};

use crate::budget::RetryBudget;
use crate::clock::SharedClock;
use crate::error::{PolicyConfigError, PolicyError};
use crate::pipeline::{AsyncAttempt, Attempt, Pipeline, PipelineBuilder};
use crate::setters::setters;
use crate::timeout::SharedTimer;

/// A retry policy: config, optional budget, seeded jitter and counters.
/// Cheap to clone; clones share counters, jitter stream and budget.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::{Clock, ManualClock};
/// use tripline::retry::{Retry, RetryBackoff, RetryConfig};
///
/// let clock = ManualClock::new();
/// let retry = Retry::builder()
///     .config(RetryConfig {
///         max_attempts: 3,
///         backoff: RetryBackoff::Constant { delay: Duration::from_millis(100) },
///         ..Default::default()
///     })
///     .clock(clock.clone()) // a ManualClock: backoff advances it, no real sleep
///     .build()
///     .unwrap();
/// let mut calls = 0;
/// let r = retry.call(|_| {
///     calls += 1;
///     if calls < 3 { Err("flaky") } else { Ok(calls) }
/// });
/// assert_eq!(r.unwrap(), 3);
/// assert_eq!(clock.now().as_duration(), Duration::from_millis(200));
/// assert_eq!(retry.stats().retries, 2);
/// ```
#[derive(Clone)]
pub struct Retry {
    policy: RetryPolicy,
    /// A pipeline with this retry only, for the standalone entry points.
    pipeline: Pipeline,
}

/// Builds a [`Retry`].
#[derive(Default)]
pub struct RetryBuilder {
    config: RetryConfig,
    budget: Option<RetryBudget>,
    seed: Option<u64>,
    clock: Option<SharedClock>,
    timer: Option<SharedTimer>,
}

impl RetryBuilder {
    setters! {
        /// The config (validated by [`build`](Self::build)).
        config: RetryConfig,

        /// Shares `budget` with every other policy holding it.
        budget: Some(RetryBudget),

        /// Seeds the jitter, for reproducible runs.
        seed: Some(u64),

        /// The clock for standalone calls (a `ManualClock` makes the sync
        /// backoff advance it instead of blocking).
        clock: Some(impl Into<SharedClock>),

        /// The timer for standalone async calls.
        timer: Some(SharedTimer),
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Retry, PolicyConfigError> {
        let policy = RetryPolicy::new(self.config, self.budget, self.seed)?;
        let mut b = Pipeline::builder().retry_policy(policy.clone());
        if let Some(c) = self.clock {
            b = b.clock(c);
        }
        if let Some(t) = self.timer {
            b = b.timer(t);
        }
        Ok(Retry {
            pipeline: b.build()?,
            policy,
        })
    }
}

impl Retry {
    /// A retry policy with `config`, no budget, on the production clock.
    pub fn try_new(config: RetryConfig) -> Result<Self, PolicyConfigError> {
        Self::builder().config(config).build()
    }

    /// A builder.
    pub fn builder() -> RetryBuilder {
        RetryBuilder::default()
    }

    pub(crate) fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The config.
    pub fn config(&self) -> &RetryConfig {
        self.policy.config()
    }

    /// The budget, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.policy.budget()
    }

    /// Cumulative counts.
    pub fn stats(&self) -> RetryStats {
        self.policy.stats()
    }

    /// Runs `op` with retries (sync). `Err` is retried.
    pub fn call<T, E>(
        &self,
        op: impl FnMut(&Attempt) -> Result<T, E>,
    ) -> Result<T, PolicyError<E>> {
        self.pipeline.call(op)
    }

    /// Runs `op` with retries, deciding with `retry_on`.
    pub fn call_with<T, E>(
        &self,
        retry_on: impl RetryClassifier<T, E>,
        op: impl FnMut(&Attempt) -> Result<T, E>,
    ) -> Result<T, PolicyError<E>> {
        self.pipeline.request().retry_on(retry_on).call(op)
    }

    /// Runs the futures `op` makes with retries (async).
    pub async fn call_async<T, E, F, Fut>(&self, op: F) -> Result<T, PolicyError<E>>
    where
        F: FnMut(AsyncAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.pipeline.call_async(op).await
    }

    /// The single-policy pipeline behind the standalone entry points, for
    /// per-call options ([`Pipeline::request`]).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
}

/// The pipeline's side of sharing a standalone [`Retry`]. It lives here,
/// with the facade, so that the pipeline never names `Retry`: the facade
/// is built on the pipeline, not the other way round.
impl PipelineBuilder {
    /// Uses an existing [`Retry`]'s policy: its counters, jitter and budget.
    pub fn share_retry(self, retry: &Retry) -> Self {
        self.retry_policy(retry.policy().clone())
    }
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("config", self.config())
            .field("budget", &self.budget())
            .field("stats", &self.stats())
            .finish()
    }
}
