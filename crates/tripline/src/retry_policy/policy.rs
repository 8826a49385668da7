//! The shared state of a retry policy and the decisions the pipeline's
//! loop (and the retry layer) ask of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{RetryConfig, RetryDecision, RetryRefusal, RetryStats};
use crate::budget::RetryBudget;
use crate::error::PolicyConfigError;
use crate::sync::Arc;

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

struct RetryInner {
    config: RetryConfig,
    budget: Option<RetryBudget>,
    rng: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    refused: [AtomicU64; 6],
}

/// The shared state of a retry policy, as the pipeline holds it.
#[derive(Clone)]
pub(crate) struct RetryPolicy {
    inner: Arc<RetryInner>,
}

impl RetryPolicy {
    pub(crate) fn new(
        config: RetryConfig,
        budget: Option<RetryBudget>,
        seed: Option<u64>,
    ) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        let seed = seed.unwrap_or_else(crate::rng::random_seed);
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
