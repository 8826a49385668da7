//! One logical call through the pipeline, synchronous flavour.
//!
//! The loop, per logical call: check the deadline floor; take one breaker
//! permit (a rejection ends the call: no retry, no budget); deposit in the
//! budget; then per attempt: re-check the breaker (short-circuit), spend a
//! retry from the budget, take a bulkhead slot, run the attempt under its
//! deadline, classify, and either finish or plan the next attempt. The
//! breaker permit records the *final* outcome once, when the call ends.
//!
//! Sync code cannot be preempted: an attempt that overran the per-attempt
//! timeout is judged [`Timeout`](crate::timeout::Timeout) after it returns
//! (its value discarded, exactly as if an async attempt had been dropped),
//! and the attempt's [`Attempt::deadline`] is meant for the client's own
//! socket timeout. The success path allocates nothing.

use std::time::Duration;

use super::logical::{Logical, Step};
use super::{Pipeline, PolicyError};
use crate::classify::{Classifier, Outcome};
use crate::clock::Clock;
use crate::retry_policy::{Idempotency, RetryClassifier, RetryDecision};
use crate::timeout::Deadline;

/// What an attempt knows about itself.
///
/// ```
/// use tripline::pipeline::Pipeline;
/// let p = Pipeline::builder().build().unwrap();
/// let n = p.call(|attempt| Ok::<_, ()>(attempt.number())).unwrap();
/// assert_eq!(n, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub(crate) number: u32,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) timeout: Option<Duration>,
}

impl Attempt {
    /// 1 for the first attempt, 2 for the first retry, …
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether this attempt is a retry.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// The attempt's deadline (the earlier of the call's deadline and the
    /// per-attempt timeout): give it to the client's own timeout.
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The per-attempt timeout, if configured.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// One call's options: deadline, idempotency key, classifiers.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::ManualClock;
/// use tripline::pipeline::{Pipeline, PolicyError};
/// use tripline::retry::{RetryConfig, RetryDecision};
/// use tripline::timeout::Deadline;
/// use tripline::Outcome;
///
/// let clock = ManualClock::new();
/// let p = Pipeline::builder()
///     .retry(RetryConfig { idempotent: false, ..Default::default() })
///     .clock(clock.clone())
///     .build()
///     .unwrap();
/// let r = p
///     .request()
///     .deadline(Deadline::after(&clock, Duration::from_secs(2)))
///     .idempotency_key("order-42") // non-idempotent, but keyed: may retry
///     .classify(|r: &Result<u16, u16>| match r { Err(400) => Outcome::Ignored, Err(_) => Outcome::Failure, Ok(_) => Outcome::Success })
///     .retry_on(|r: &Result<u16, u16>| match r { Err(503) => RetryDecision::Retry, _ => RetryDecision::Done })
///     .call(|a| if a.number() == 1 { Err(503) } else { Ok(200) });
/// assert_eq!(r, Ok(200));
/// ```
pub struct Call<'p, C, R> {
    pub(crate) pipeline: &'p Pipeline,
    pub(crate) classifier: C,
    pub(crate) retry_on: R,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) idempotency: Idempotency,
}

impl<'p> Call<'p, crate::classify::DefaultClassifier, crate::retry_policy::RetryOnError> {
    pub(crate) fn new(pipeline: &'p Pipeline) -> Self {
        Call {
            pipeline,
            classifier: crate::classify::DefaultClassifier,
            retry_on: crate::retry_policy::RetryOnError,
            deadline: None,
            idempotency: Idempotency::Configured,
        }
    }
}

impl<'p, C, R> Call<'p, C, R> {
    /// What an attempt that finished in time came to, for both the sync and
    /// the async call: its outcome for the breaker, the retry decision, and
    /// the result as the pipeline returns it. One place, so the twins
    /// cannot judge a result differently.
    #[inline]
    pub(super) fn judge<T, E>(
        &self,
        result: Result<T, E>,
    ) -> (Outcome, RetryDecision, Result<T, PolicyError<E>>)
    where
        C: Classifier<T, E>,
        R: RetryClassifier<T, E>,
    {
        (
            self.classifier.classify(&result),
            self.retry_on.decide(&result),
            result.map_err(PolicyError::Inner),
        )
    }

    /// The call's deadline, as an explicit parameter (else the context's,
    /// [`Deadline::current`]); the configured overall budget still applies.
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The call carries an idempotency key, so a non-idempotent operation
    /// may be retried (the server deduplicates by key).
    pub fn idempotency_key(mut self, key: &str) -> Self {
        if !key.is_empty() {
            self.idempotency = Idempotency::Keyed;
        }
        self
    }

    /// Overrides the operation's configured idempotency for this call (the
    /// tower layers set it from the request, e.g. its HTTP method).
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        if self.idempotency != Idempotency::Keyed {
            self.idempotency = Idempotency::Request(idempotent);
        }
        self
    }

    /// Classifies results for the breaker.
    pub fn classify<C2>(self, classifier: C2) -> Call<'p, C2, R> {
        Call {
            pipeline: self.pipeline,
            classifier,
            retry_on: self.retry_on,
            deadline: self.deadline,
            idempotency: self.idempotency,
        }
    }

    /// Decides which results are retried.
    pub fn retry_on<R2>(self, retry_on: R2) -> Call<'p, C, R2> {
        Call {
            pipeline: self.pipeline,
            classifier: self.classifier,
            retry_on,
            deadline: self.deadline,
            idempotency: self.idempotency,
        }
    }

    /// Runs `op` (sync).
    pub fn call<T, E>(
        self,
        mut op: impl FnMut(&Attempt) -> Result<T, E>,
    ) -> Result<T, PolicyError<E>>
    where
        C: Classifier<T, E>,
        R: RetryClassifier<T, E>,
    {
        let p = &*self.pipeline.inner;
        if p.untimed_retries {
            p.warn_untimed_retries("Pipeline::call");
        }
        let mut call = Logical::begin(p, self.deadline, self.idempotency)?;
        loop {
            if let Err(done) = call.next_attempt() {
                return done;
            }
            let slot = match &p.bulkhead {
                Some(b) => Some(b.try_acquire().map_err(PolicyError::BulkheadFull)?),
                None => None,
            };
            let attempt = Attempt {
                number: call.made,
                deadline: call.attempt_deadline(),
                timeout: p.timeouts.per_attempt,
            };
            let result = match attempt.deadline {
                Some(d) => d.scope(|| op(&attempt)),
                None => op(&attempt),
            };
            let end = p.clock.now();
            drop(slot);
            let (outcome, decision, result) = match p.timeouts.per_attempt {
                Some(after) if end - call.now > after => call.timed_out(end - call.now),
                _ => self.judge(result),
            };
            match call.after(end, outcome, decision, result) {
                Step::Finish(r) => return r,
                Step::Retry(wait) => {
                    p.sleep_sync(wait);
                    call.now = p.clock.now();
                }
            }
        }
    }
}
