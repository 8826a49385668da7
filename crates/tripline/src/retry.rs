//! Retry: another attempt for a failure that may be transient — within
//! limits that keep retries from becoming the outage.
//!
//! Seed 001 §6.1.1 gives four rules, and this policy enforces each:
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

mod backoff;
mod decision;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use backoff::RetryBackoff;
pub use decision::{RetryClassifier, RetryDecision, RetryOnError};

use crate::budget::RetryBudget;
use crate::clock::SharedClock;
use crate::pipeline::{AsyncAttempt, Attempt, Pipeline, PolicyConfigError, PolicyError};
use crate::sync::Arc;
use crate::timeout::SharedTimer;

/// How a [`Retry`] behaves.
///
/// ```
/// use tripline::retry::RetryConfig;
/// let config = RetryConfig { max_attempts: 3, idempotent: false, ..Default::default() };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RetryConfig {
    /// Attempts in all, the first included: 1 (no retry) ..= 100.
    pub max_attempts: u32,
    /// The wait between attempts.
    pub backoff: RetryBackoff,
    /// Whether the operation may safely run twice. `false` (writes,
    /// payments) allows a retry only for a call carrying an idempotency key.
    pub idempotent: bool,
    /// Whether an attempt that hit the per-attempt timeout is retried.
    pub retry_on_timeout: bool,
}

impl Default for RetryConfig {
    /// 3 attempts, decorrelated jitter 50 ms – 2 s, idempotent, timeouts retried.
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            backoff: RetryBackoff::default(),
            idempotent: true,
            retry_on_timeout: true,
        }
    }
}

impl RetryConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.max_attempts == 0 || self.max_attempts > 100 {
            let what = if self.max_attempts == 0 {
                "must be at least 1"
            } else {
                "must be at most 100"
            };
            return Err(PolicyConfigError::new(
                "retry",
                "max_attempts",
                format!("{what}, got {}", self.max_attempts),
            ));
        }
        self.backoff.validate("backoff")
    }
}

/// Whether one call may run twice, as the retry loop sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Idempotency {
    /// As [`RetryConfig::idempotent`] says.
    Configured,
    /// The call carries an idempotency key: the server deduplicates.
    Keyed,
    /// The request itself says (an HTTP method, say).
    Request(bool),
}

/// Why a wanted retry was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryRefusal {
    /// `max_attempts` reached.
    MaxAttempts,
    /// The retry budget is spent.
    Budget,
    /// The deadline cannot fit the backoff plus another attempt.
    Deadline,
    /// The circuit breaker is open: the retry would be rejected locally.
    CircuitOpen,
    /// The operation is not idempotent and the call has no idempotency key.
    NonIdempotent,
    /// The server asked not to be retried.
    Pushback,
}

impl RetryRefusal {
    /// Every reason, in code order.
    pub const ALL: [RetryRefusal; 6] = [
        RetryRefusal::MaxAttempts,
        RetryRefusal::Budget,
        RetryRefusal::Deadline,
        RetryRefusal::CircuitOpen,
        RetryRefusal::NonIdempotent,
        RetryRefusal::Pushback,
    ];

    /// The snake_case metrics label.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryRefusal::MaxAttempts => "max_attempts",
            RetryRefusal::Budget => "budget",
            RetryRefusal::Deadline => "deadline",
            RetryRefusal::CircuitOpen => "circuit_open",
            RetryRefusal::NonIdempotent => "non_idempotent",
            RetryRefusal::Pushback => "pushback",
        }
    }
}

impl fmt::Display for RetryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Cumulative counts of one retry policy (shared by its clones).
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::retry::{Retry, RetryBackoff, RetryConfig, RetryRefusal};
///
/// let retry = Retry::builder()
///     .config(RetryConfig { max_attempts: 2, backoff: RetryBackoff::None, ..Default::default() })
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let _ = retry.call(|_| Err::<(), _>("down"));
/// let stats = retry.stats();
/// assert_eq!((stats.attempts, stats.retries), (2, 1));
/// assert_eq!(stats.refused(RetryRefusal::MaxAttempts), 1);
/// assert_eq!(RetryRefusal::Budget.as_str(), "budget");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Attempts made, first attempts included.
    pub attempts: u64,
    /// Retries made (attempts after the first).
    pub retries: u64,
    /// Wanted retries refused, by [`RetryRefusal`] in code order.
    pub refused: [u64; 6],
}

impl RetryStats {
    /// Refusals for `reason`.
    pub fn refused(&self, reason: RetryRefusal) -> u64 {
        self.refused[reason as usize]
    }
}

struct RetryInner {
    config: RetryConfig,
    budget: Option<RetryBudget>,
    rng: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    refused: [AtomicU64; 6],
}

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

/// The shared state of a retry policy, as the pipeline holds it.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    inner: Arc<RetryInner>,
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
    /// The config (validated by [`build`](Self::build)).
    pub fn config(mut self, config: RetryConfig) -> Self {
        self.config = config;
        self
    }

    /// Shares `budget` with every other policy holding it.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Seeds the jitter, for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The clock for standalone calls (a `ManualClock` makes the sync
    /// backoff advance it instead of blocking).
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// The timer for standalone async calls.
    pub fn timer(mut self, timer: SharedTimer) -> Self {
        self.timer = Some(timer);
        self
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
        &self.policy.inner.config
    }

    /// The budget, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.policy.inner.budget.as_ref()
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

impl RetryPolicy {
    pub(crate) fn new(
        config: RetryConfig,
        budget: Option<RetryBudget>,
        seed: Option<u64>,
    ) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        let seed = seed.unwrap_or_else(|| {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one(0x7472_6970_6c69_6e65u64)
        });
        Ok(RetryPolicy {
            inner: Arc::new(RetryInner {
                config,
                budget,
                rng: AtomicU64::new(seed),
                attempts: AtomicU64::new(0),
                retries: AtomicU64::new(0),
                refused: Default::default(),
            }),
        })
    }

    pub(crate) fn config(&self) -> &RetryConfig {
        &self.inner.config
    }

    pub(crate) fn budget(&self) -> Option<&RetryBudget> {
        self.inner.budget.as_ref()
    }

    pub(crate) fn stats(&self) -> RetryStats {
        let i = &self.inner;
        RetryStats {
            attempts: i.attempts.load(Ordering::Relaxed),
            retries: i.retries.load(Ordering::Relaxed),
            refused: std::array::from_fn(|k| i.refused[k].load(Ordering::Relaxed)),
        }
    }

    #[inline]
    pub(crate) fn count_attempt(&self, retry: bool) {
        self.inner.attempts.fetch_add(1, Ordering::Relaxed);
        if retry {
            self.inner.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn refuse(&self, reason: RetryRefusal) -> RetryRefusal {
        self.inner.refused[reason as usize].fetch_add(1, Ordering::Relaxed);
        reason
    }

    /// Whether another attempt may follow attempt `made` (1-based) that
    /// ended with `decision` (which wants a retry or is `DoNotRetry`), and
    /// after what wait. Counts a refusal; consumes no budget (see
    /// [`withdraw`](Self::withdraw)).
    pub(crate) fn plan(
        &self,
        made: u32,
        decision: RetryDecision,
        idempotency: Idempotency,
        previous_wait: Duration,
        remaining: Option<Duration>,
        floor: Duration,
    ) -> Result<Duration, RetryRefusal> {
        let c = &self.inner.config;
        let pushback = match decision {
            RetryDecision::Done | RetryDecision::DoNotRetry => {
                return Err(self.refuse(RetryRefusal::Pushback));
            }
            RetryDecision::Retry => Duration::ZERO,
            RetryDecision::RetryAfter(d) => d,
        };
        if made >= c.max_attempts {
            return Err(self.refuse(RetryRefusal::MaxAttempts));
        }
        let may_repeat = match idempotency {
            Idempotency::Configured => c.idempotent,
            Idempotency::Keyed => true,
            Idempotency::Request(idempotent) => idempotent,
        };
        if !may_repeat {
            return Err(self.refuse(RetryRefusal::NonIdempotent));
        }
        let mut rng = self.inner.rng.load(Ordering::Relaxed);
        let backoff = c.backoff.delay(made - 1, previous_wait, &mut rng);
        self.inner.rng.store(rng, Ordering::Relaxed);
        let wait = backoff.max(pushback);
        if let Some(left) = remaining
            && left < wait.saturating_add(floor.max(Duration::from_nanos(1)))
        {
            return Err(self.refuse(RetryRefusal::Deadline));
        }
        if let Some(b) = &self.inner.budget
            && b.available() == 0
        {
            b.count_refusal();
            return Err(self.refuse(RetryRefusal::Budget));
        }
        Ok(wait)
    }

    /// Spends one retry from the budget, right before the attempt.
    pub(crate) fn withdraw(&self) -> Result<(), RetryRefusal> {
        match &self.inner.budget {
            Some(b) if !b.try_withdraw() => Err(self.refuse(RetryRefusal::Budget)),
            _ => Ok(()),
        }
    }

    /// Counts a request against the budget.
    #[inline]
    pub(crate) fn deposit(&self) {
        if let Some(b) = &self.inner.budget {
            b.deposit();
        }
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
