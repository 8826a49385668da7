//! The bookkeeping of one logical call, shared by the sync and the async
//! loop: the deadline, the breaker permit and the outcome it will record,
//! the budget, and the decision after each attempt. The two loops differ
//! only in how they wait, take a bulkhead slot and run an attempt.

use std::time::Duration;

use super::{Inner, PolicyError};
use crate::breaker::DetachedPermit;
use crate::classify::Outcome;
use crate::clock::{Clock, Timestamp, duration_to_nanos};
use crate::retry_policy::{Idempotency, RetryDecision, RetryRefusal};
use crate::timeout::{Deadline, Timeout};

/// What the loop does after an attempt.
pub(crate) enum Step<T, E> {
    /// Return this.
    Finish(Result<T, PolicyError<E>>),
    /// Wait this long, then make the next attempt.
    Retry(Duration),
}

/// One logical call in progress, bound to the pipeline it runs in: the
/// sync and async loops' view of [`Progress`], which settles the breaker
/// permit when it drops (an early return, a panic).
pub(crate) struct Logical<'a, T, E> {
    p: &'a Inner,
    call: Progress<T, E>,
}

impl<T, E> std::ops::Deref for Logical<'_, T, E> {
    type Target = Progress<T, E>;

    #[inline(always)]
    fn deref(&self) -> &Progress<T, E> {
        &self.call
    }
}

impl<T, E> std::ops::DerefMut for Logical<'_, T, E> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Progress<T, E> {
        &mut self.call
    }
}

// The success path runs begin → next_attempt → attempt_deadline → after
// once each; `inline(always)` keeps them in the caller's loop. Measured:
// left to LLVM they are outlined and the sync pipeline costs ~35 ns more
// per call (benches/benches/pipeline.rs).
impl<'a, T, E> Logical<'a, T, E> {
    /// See [`Progress::begin`].
    #[inline(always)]
    pub(crate) fn begin(
        p: &'a Inner,
        explicit: Option<Deadline>,
        idempotency: Idempotency,
    ) -> Result<Self, PolicyError<E>> {
        Ok(Logical {
            p,
            call: Progress::begin(p, explicit, idempotency)?,
        })
    }

    /// See [`Progress::next_attempt`].
    #[inline(always)]
    pub(crate) fn next_attempt(&mut self) -> Result<(), Result<T, PolicyError<E>>> {
        self.call.next_attempt(self.p)
    }

    /// See [`Progress::attempt_deadline`].
    #[inline(always)]
    pub(crate) fn attempt_deadline(&self) -> Option<Deadline> {
        self.call.attempt_deadline(self.p)
    }

    /// See [`Progress::timed_out`].
    pub(crate) fn timed_out(
        &self,
        elapsed: Duration,
    ) -> (Outcome, RetryDecision, Result<T, PolicyError<E>>) {
        self.call.timed_out(self.p, elapsed)
    }

    /// See [`Progress::after`].
    #[inline(always)]
    pub(crate) fn after(
        &mut self,
        end: Timestamp,
        outcome: Outcome,
        decision: RetryDecision,
        result: Result<T, PolicyError<E>>,
    ) -> Step<T, E> {
        self.call.after(self.p, end, outcome, decision, result)
    }
}

impl<T, E> Drop for Logical<'_, T, E> {
    #[inline(always)]
    fn drop(&mut self) {
        self.call.close(self.p);
    }
}

/// The state of one logical call, apart from the pipeline: every step
/// takes the pipeline's [`Inner`], and the owner calls
/// [`close`](Self::close) when the call ends however it ends. The tower
/// layer's future keeps this next to the pipeline it owns, so a call costs
/// no reference count beyond that one handle.
pub(crate) struct Progress<T, E> {
    pub(crate) deadline: Option<Deadline>,
    /// Start of the current attempt.
    pub(crate) now: Timestamp,
    pub(crate) made: u32,
    idempotency: Idempotency,
    wait: Duration,
    last: Option<Result<T, PolicyError<E>>>,
    /// The logical call's breaker permit and the outcome it will record:
    /// the last attempt's, once, at [`close`](Self::close). No attempt ran:
    /// released, a neutral verdict.
    permit: Option<DetachedPermit>,
    recorded: Option<(Outcome, Duration)>,
}

impl<T, E> Progress<T, E> {
    /// Checks the deadline floor, takes the call's breaker permit (a
    /// rejection ends the call: no retry, no budget) and deposits in the budget.
    #[inline(always)]
    pub(crate) fn begin(
        p: &Inner,
        explicit: Option<Deadline>,
        idempotency: Idempotency,
    ) -> Result<Self, PolicyError<E>> {
        let start = p.clock.now();
        let deadline = p.deadline(explicit, start);
        p.check_floor(deadline, start)
            .map_err(PolicyError::DeadlineExceeded)?;
        let permit = match &p.breaker {
            Some(b) => Some(b.try_acquire_detached().map_err(PolicyError::CircuitOpen)?),
            None => None,
        };
        if let Some(r) = &p.retry {
            r.deposit();
        }
        Ok(Progress {
            deadline,
            now: start,
            made: 0,
            idempotency,
            wait: Duration::ZERO,
            last: None,
            permit,
            recorded: None,
        })
    }

    fn is_probe(&self) -> bool {
        self.permit.as_ref().is_some_and(DetachedPermit::is_probe)
    }

    /// Before each attempt: for a retry, the breaker short-circuit and the
    /// budget withdrawal. `Err` ends the call with that result.
    #[inline(always)]
    pub(crate) fn next_attempt(&mut self, p: &Inner) -> Result<(), Result<T, PolicyError<E>>> {
        self.made += 1;
        let Some(r) = &p.retry else {
            return Ok(());
        };
        if let Some(prev) = self.last.take() {
            if let Err(open) = p.breaker_admits(self.is_probe()) {
                r.refuse(RetryRefusal::CircuitOpen);
                return Err(Err(PolicyError::CircuitOpen(open)));
            }
            if r.withdraw().is_err() {
                return Err(exhausted(self.made - 1, prev));
            }
        }
        r.count_attempt(self.made > 1);
        Ok(())
    }

    /// The attempt's deadline: the call's, cut by the per-attempt timeout.
    #[inline(always)]
    pub(crate) fn attempt_deadline(&self, p: &Inner) -> Option<Deadline> {
        let per_attempt = p.timeouts.per_attempt;
        Deadline::earliest(
            self.deadline,
            per_attempt.map(|t| Deadline::at(self.now + t)),
        )
    }

    /// An attempt that overran its timeout (judged after the fact, or cut by a timer).
    pub(crate) fn timed_out(
        &self,
        p: &Inner,
        elapsed: Duration,
    ) -> (Outcome, RetryDecision, Result<T, PolicyError<E>>) {
        let decision = match &p.retry {
            Some(r) if r.config().retry_on_timeout => RetryDecision::Retry,
            _ => RetryDecision::Done,
        };
        let after = p.timeouts.per_attempt.unwrap_or(elapsed);
        (
            Outcome::Failure,
            decision,
            Err(PolicyError::Timeout(Timeout { after })),
        )
    }

    /// After an attempt that ended at `end`: records its outcome as the
    /// call's latest, and either finishes or plans the next attempt.
    #[inline(always)]
    pub(crate) fn after(
        &mut self,
        p: &Inner,
        end: Timestamp,
        outcome: Outcome,
        decision: RetryDecision,
        result: Result<T, PolicyError<E>>,
    ) -> Step<T, E> {
        self.recorded = Some((outcome, end - self.now));
        let Some(r) = p.retry.as_ref().filter(|_| decision != RetryDecision::Done) else {
            return Step::Finish(result);
        };
        let remaining = self.deadline.map(|d| d.instant() - end);
        let floor = p.timeouts.min_remaining;
        match r.plan(
            self.made,
            decision,
            self.idempotency,
            self.wait,
            remaining,
            floor,
        ) {
            Ok(w) => {
                self.wait = w;
                self.last = Some(result);
                Step::Retry(w)
            }
            Err(RetryRefusal::Budget) => Step::Finish(exhausted(self.made, result)),
            Err(_) => Step::Finish(result),
        }
    }

    /// Records a final outcome without a retry decision (the deadline cut
    /// the attempt).
    pub(crate) fn settle(&mut self, outcome: Outcome, elapsed: Duration) {
        self.recorded = Some((outcome, elapsed));
    }

    /// Settles the breaker permit on `p`'s breaker: records the last
    /// attempt's outcome, or releases it neutrally if no attempt ended.
    /// Later calls do nothing.
    #[inline(always)]
    pub(crate) fn close(&mut self, p: &Inner) {
        if let (Some(permit), Some(breaker)) = (&mut self.permit, &p.breaker) {
            match self.recorded {
                Some((outcome, elapsed)) => {
                    permit.record(breaker, outcome, duration_to_nanos(elapsed));
                }
                None => permit.release(breaker),
            }
        }
    }
}

/// The budget refused the retry `result` wanted: say so, keeping the
/// last error (a retried `Ok` is returned as it is).
fn exhausted<T, E>(attempts: u32, result: Result<T, PolicyError<E>>) -> Result<T, PolicyError<E>> {
    result.map_err(|e| PolicyError::BudgetExhausted {
        attempts,
        last: Box::new(e),
    })
}
