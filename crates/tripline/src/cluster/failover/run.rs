//! One failover call, written once for the sync and the async loop: the
//! deadline, the endpoints tried, the budget, the decision after each
//! attempt ([`Run`]), and the loop itself ([`failover_loop!`]). What is
//! left to each flavour is how an attempt runs and how a backoff is waited
//! out — blocking or awaited — so the two cannot decide differently.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Inner;
use super::config::Stop;
use crate::breaker::Permit;
use crate::clock::Clock;
use crate::cluster::balance::Tried;
use crate::cluster::set::EndpointSet;
use crate::cluster::shared::Shared;
use crate::cluster::{ClusterAttempt, ClusterError, Endpoint, EndpointId};
use crate::endpoint::EndpointOutcome;
use crate::timeout::Deadline;

/// What the loop does after an attempt.
pub(super) enum Step<T, E> {
    /// Return this.
    Finish(Result<T, ClusterError<E>>),
    /// Wait this long, then try the next endpoint.
    Next(Duration),
}

/// One logical call in progress, shared by the sync and async loops.
pub(super) struct Run<'a, T, E> {
    s: &'a Shared,
    f: &'a Inner,
    deadline: Option<Deadline>,
    tried: Tried,
    made: u32,
    wait: Duration,
    last: Option<(EndpointId, Result<T, E>)>,
}

impl<'a, T, E> Run<'a, T, E> {
    #[inline]
    pub(super) fn begin(s: &'a Shared, f: &'a Inner) -> Result<Self, ClusterError<E>> {
        let deadline = s
            .begin_call(f.config.min_remaining)
            .map_err(ClusterError::DeadlineExceeded)?;
        f.counters.call();
        if let Some(b) = &f.budget {
            b.deposit();
        }
        Ok(Run {
            s,
            f,
            deadline,
            tried: Tried::new(),
            made: 0,
            wait: Duration::ZERO,
            last: None,
        })
    }

    /// Selects the next endpoint of `set` not yet tried and admits the
    /// attempt on it: `Err` ends the call with its final result (nothing
    /// left to select, or no budget for a failover).
    #[inline]
    #[allow(clippy::type_complexity)]
    pub(super) fn next<'s>(
        &mut self,
        set: &'s EndpointSet,
    ) -> Result<(&'s Endpoint, Permit<'s>, ClusterAttempt), Result<T, ClusterError<E>>> {
        let Some((i, permit)) = self.s.pick(set, &self.tried) else {
            return Err(match self.last.take() {
                Some(last) => {
                    self.f.counters.stop(Stop::NoEndpointLeft);
                    finish(self.made, last)
                }
                None => Err(self.s.unavailable(set, &self.tried).into()),
            });
        };
        if self.made > 0
            && let Some(b) = &self.f.budget
            && !b.try_withdraw()
        {
            self.f.counters.stop(Stop::Budget);
            let made = self.made;
            return Err(match self.last.take() {
                // A retried `Ok` (classified a failure) is returned as it is.
                Some(last) => finish(made, last).map_err(|e| ClusterError::BudgetExhausted {
                    attempts: made,
                    last: Box::new(e),
                }),
                None => Err(self.s.unavailable(set, &self.tried).into()),
            });
        }
        self.tried.push(i);
        self.made += 1;
        self.f.counters.attempt(self.made > 1);
        let attempt = ClusterAttempt {
            number: self.made,
            deadline: self.deadline,
        };
        Ok((&set.endpoints[i], permit, attempt))
    }

    /// After an attempt on `endpoint` that has just ended.
    #[inline]
    pub(super) fn after(
        &mut self,
        endpoint: &Endpoint,
        outcome: EndpointOutcome,
        result: Result<T, E>,
    ) -> Step<T, E> {
        let last = (endpoint.id().clone(), result);
        if !outcome.is_failure() {
            return Step::Finish(finish(self.made, last));
        }
        let c = &self.f.config;
        let stop = if !(c.idempotent || outcome.never_sent()) {
            Some(Stop::NonIdempotent)
        } else if self.made > c.retries {
            Some(Stop::Retries)
        } else {
            None
        };
        if let Some(stop) = stop {
            self.f.counters.stop(stop);
            return Step::Finish(finish(self.made, last));
        }
        let mut rng = self.f.rng.load(Ordering::Relaxed);
        let wait = c.backoff.delay(self.made - 1, self.wait, &mut rng);
        self.f.rng.store(rng, Ordering::Relaxed);
        if let Some(d) = self.deadline
            && d.instant() - self.s.clock.now()
                < wait + c.min_remaining.max(Duration::from_nanos(1))
        {
            self.f.counters.stop(Stop::Deadline);
            return Step::Finish(finish(self.made, last));
        }
        self.wait = wait;
        self.last = Some(last);
        Step::Next(wait)
    }
}

/// The failover loop, for both flavours: select and admit ([`Run::next`]),
/// run `$attempt` — an expression giving `(EndpointOutcome, Result<T, E>)`
/// for `$endpoint` under `$permit`, blocking or ending in `.await` — then
/// decide ([`Run::after`]) and wait out the backoff with `$backoff`. It
/// `return`s the call's result from the function it is expanded in.
///
/// A macro rather than a function because only a macro can be expanded
/// both in a blocking function and in an `async fn` (whose `.await`s must
/// stand in its own body); it costs nothing at run time.
macro_rules! failover_loop {
    (
        $run:ident over $set:expr,
        attempt($endpoint:ident, $permit:ident, $attempt:ident) => $try:expr,
        backoff($wait:ident) => $backoff:expr $(,)?
    ) => {
        loop {
            let ($endpoint, $permit, $attempt) = match $run.next($set) {
                Ok(admitted) => admitted,
                Err(done) => return done,
            };
            let (outcome, result) = $try;
            match $run.after($endpoint, outcome, result) {
                $crate::cluster::failover::run::Step::Finish(r) => return r,
                $crate::cluster::failover::run::Step::Next($wait) => $backoff,
            }
        }
    };
}
pub(super) use failover_loop;

/// The call's result from its last attempt.
#[inline]
fn finish<T, E>(
    attempts: u32,
    (endpoint, result): (EndpointId, Result<T, E>),
) -> Result<T, ClusterError<E>> {
    result.map_err(|error| ClusterError::Failed {
        endpoint,
        attempts,
        error,
    })
}
