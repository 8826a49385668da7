//! One logical call through the pipeline, asynchronous flavour: the same
//! loop as [`Call::call`](super::Call::call), with the bulkhead's queue,
//! timers that really abandon a slow attempt, and the deadline installed as
//! the attempt's task-local context.

use std::future::Future;
use std::time::Duration;

use super::logical::{Logical, Step};
use super::{Call, PolicyError};
use crate::bulkhead::SharedBulkheadPermit;
use crate::classify::{Classifier, Outcome};
use crate::clock::Clock;
use crate::retry_policy::RetryClassifier;
use crate::timeout::{Deadline, DeadlineExceeded, timeout};

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
        if p.untimed_retries {
            p.warn_untimed_retries("Pipeline::call_async");
        }
        let clock = &p.clock;
        let mut call = Logical::begin(p, self.deadline, self.idempotency)?;
        loop {
            if let Err(done) = call.next_attempt() {
                return done;
            }
            let slot = match &p.bulkhead {
                Some(b) => {
                    let limit = call.deadline.map(|d| d.remaining(clock));
                    let permit = b.acquire(p.timer.as_ref(), limit).await;
                    call.now = clock.now();
                    p.check_floor(call.deadline, call.now)
                        .map_err(PolicyError::DeadlineExceeded)?;
                    Some(permit.map_err(PolicyError::BulkheadFull)?.into_shared())
                }
                None => None,
            };
            let attempt_deadline = call.attempt_deadline();
            let fut = op(AsyncAttempt {
                number: call.made,
                deadline: attempt_deadline,
                timeout: p.timeouts.per_attempt,
                permit: slot.clone(),
            });
            let raced = match (attempt_deadline, &p.timer) {
                (Some(d), Some(timer)) => {
                    timeout(timer.clone(), d.remaining(clock), d.scope_future(fut)).await
                }
                (Some(d), None) => Ok(d.scope_future(fut).await),
                (None, _) => Ok(fut.await),
            };
            let end = clock.now();
            drop(slot);
            let elapsed = end - call.now;
            let (outcome, decision, result) = match raced {
                Err(_) if call.deadline.is_some_and(|d| end >= d.instant()) => {
                    call.settle(Outcome::Failure, elapsed);
                    return Err(PolicyError::DeadlineExceeded(DeadlineExceeded {
                        remaining: Duration::ZERO,
                        floor: p.timeouts.min_remaining,
                    }));
                }
                Err(_) => call.timed_out(elapsed),
                Ok(_) if p.timeouts.per_attempt.is_some_and(|t| elapsed > t) => {
                    call.timed_out(elapsed)
                }
                Ok(result) => self.judge(result),
            };
            match call.after(end, outcome, decision, result) {
                Step::Finish(r) => return r,
                Step::Retry(wait) => {
                    p.sleep_async(wait).await;
                    call.now = clock.now();
                }
            }
        }
    }
}
