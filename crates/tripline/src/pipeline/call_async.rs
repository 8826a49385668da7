//! One logical call through the pipeline, asynchronous flavour: the same
//! loop as [`Call::call`](super::Call::call), with the bulkhead's queue,
//! timers that really abandon a slow attempt, and the deadline installed as
//! the attempt's task-local context.

use std::future::Future;
use std::time::Duration;

use super::call::{Ledger, exhausted, timeout_decision};
use super::{Call, PolicyError};
use crate::bulkhead::SharedBulkheadPermit;
use crate::classify::{Classifier, Outcome};
use crate::clock::Clock;
use crate::retry::{RetryClassifier, RetryDecision, RetryRefusal};
use crate::timeout::{Deadline, DeadlineExceeded, Timeout, timeout};

/// What an async attempt knows about itself, and the bulkhead slot it runs in.
///
/// The pipeline holds the slot until the attempt's future ends. Work that
/// must outlive it (a spawned task that keeps going after a timeout) takes
/// [`bulkhead_permit`](Self::bulkhead_permit): the slot then stays taken
/// until that work drops it too.
///
/// ```
/// use tripline::pipeline::Pipeline;
/// # futures_executor::block_on(async {
/// let p = Pipeline::builder().build().unwrap();
/// let n = p.call_async(|a| async move { Ok::<_, ()>(a.number()) }).await;
/// assert_eq!(n, Ok(1));
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct AsyncAttempt {
    pub(crate) number: u32,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) permit: Option<SharedBulkheadPermit>,
}

impl AsyncAttempt {
    /// 1 for the first attempt, 2 for the first retry, …
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The attempt's deadline (also [`Deadline::current`] while it runs).
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The per-attempt timeout, if configured.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The attempt's bulkhead slot, to keep it taken by work that outlives
    /// the attempt.
    pub fn bulkhead_permit(&self) -> Option<SharedBulkheadPermit> {
        self.permit.clone()
    }
}

impl<C, R> Call<'_, C, R> {
    /// Runs the futures `op` makes (async).
    pub async fn call_async<T, E, F, Fut>(self, mut op: F) -> Result<T, PolicyError<E>>
    where
        C: Classifier<T, E>,
        R: RetryClassifier<T, E>,
        F: FnMut(AsyncAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let p = &*self.pipeline.inner;
        let clock = &p.clock;
        let start = clock.now();
        let deadline = p.deadline(self.deadline, start);
        p.check_floor(deadline, start)
            .map_err(PolicyError::DeadlineExceeded)?;
        let mut ledger = Ledger::new(match &p.breaker {
            Some(b) => Some(
                b.try_acquire()
                    .map_err(|r| PolicyError::CircuitOpen(r.into()))?,
            ),
            None => None,
        });
        if let Some(r) = &p.retry {
            r.deposit();
        }
        let mut made = 0u32;
        let mut wait = Duration::ZERO;
        let mut now = start;
        let mut last: Option<Result<T, PolicyError<E>>> = None;
        loop {
            made += 1;
            if let (Some(r), Some(prev)) = (&p.retry, last.take()) {
                if let Err(open) = p.breaker_admits(ledger.is_probe()) {
                    r.refuse(RetryRefusal::CircuitOpen);
                    return Err(PolicyError::CircuitOpen(open));
                }
                if r.withdraw().is_err() {
                    return exhausted(made - 1, prev);
                }
            }
            if let Some(r) = &p.retry {
                r.count_attempt(made > 1);
            }
            let slot = match &p.bulkhead {
                Some(b) => Some(
                    b.acquire(p.timer.as_ref(), deadline.map(|d| d.remaining(clock)))
                        .await
                        .map_err(PolicyError::BulkheadFull)?
                        .into_shared(),
                ),
                None => None,
            };
            if slot.is_some() {
                now = clock.now();
                p.check_floor(deadline, now)
                    .map_err(PolicyError::DeadlineExceeded)?;
            }
            let per_attempt = p.timeouts.per_attempt;
            let attempt_deadline =
                Deadline::earliest(deadline, per_attempt.map(|t| Deadline::at(now + t)));
            let attempt = AsyncAttempt {
                number: made,
                deadline: attempt_deadline,
                timeout: per_attempt,
                permit: slot.clone(),
            };
            let fut = op(attempt);
            let raced = match (attempt_deadline, &p.timer) {
                (Some(d), Some(timer)) => {
                    timeout(timer.clone(), d.remaining(clock), d.scope_future(fut)).await
                }
                (Some(d), None) => Ok(d.scope_future(fut).await),
                (None, _) => Ok(fut.await),
            };
            let end = clock.now();
            drop(slot);
            let elapsed = end - now;
            let overall_passed = deadline.is_some_and(|d| end >= d.instant());
            let (outcome, decision, result) = match raced {
                Err(_) if overall_passed => {
                    ledger.last = Some((Outcome::Failure, elapsed));
                    return Err(PolicyError::DeadlineExceeded(DeadlineExceeded {
                        remaining: Duration::ZERO,
                        floor: p.timeouts.min_remaining,
                    }));
                }
                Err(_) => (
                    Outcome::Failure,
                    timeout_decision(p),
                    Err(PolicyError::Timeout(Timeout {
                        after: per_attempt.unwrap_or(elapsed),
                    })),
                ),
                Ok(_) if per_attempt.is_some_and(|t| elapsed > t) => (
                    Outcome::Failure,
                    timeout_decision(p),
                    Err(PolicyError::Timeout(Timeout {
                        after: per_attempt.unwrap_or(elapsed),
                    })),
                ),
                Ok(result) => (
                    self.classifier.classify(&result),
                    self.retry_on.decide(&result),
                    result.map_err(PolicyError::Inner),
                ),
            };
            ledger.last = Some((outcome, elapsed));
            let Some(r) = p.retry.as_ref().filter(|_| decision != RetryDecision::Done) else {
                return result;
            };
            let remaining = deadline.map(|d| d.instant() - end);
            match r.plan(
                made,
                decision,
                self.idempotency,
                wait,
                remaining,
                p.timeouts.min_remaining,
            ) {
                Ok(w) => {
                    wait = w;
                    p.sleep_async(w).await;
                    now = clock.now();
                    last = Some(result);
                }
                Err(RetryRefusal::Budget) => return exhausted(made, result),
                Err(_) => return result,
            }
        }
    }
}
