//! Active health probing: while the breaker is open, a
//! cheap, side-effect-free health check finds out whether the dependency
//! has recovered, so that business traffic — which may write, charge or
//! reserve — is not the first probe.
//!
//! The prober wakes when the open duration ends and runs the check, bounded
//! by a timeout. A pass moves the breaker to half-open early (business
//! probes then confirm); a failure or a timeout keeps it open for the next
//! backoff round. While a prober is attached, business calls do not probe
//! an open breaker themselves — unless the prober has not acted within its
//! timeout plus a grace period after the deadline (it died, or its task is
//! starved), so a lost prober can never pin the breaker open.
//!
//! The check should touch what matters (a light query, not a constant
//! "ok"), or it passes while the dependency is still broken.
//!
//! The prober is runtime-agnostic: `run` takes the sleep function of your
//! runtime (`tokio::time::sleep`, say).

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use super::CircuitBreaker;
use super::core::{Entry, OpenUntil};
use super::event::Reason;
use super::state::State;
use crate::clock::Clock;

/// What one probing step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthProbe {
    /// The breaker was not open, or its open duration had not ended.
    NotDue,
    /// The check passed: the breaker is half-open.
    Passed,
    /// The check reported the dependency unhealthy: open for another round.
    Failed,
    /// The check did not answer within the timeout: open for another round.
    TimedOut,
}

/// Runs a health check against an open breaker on its open-duration schedule.
///
/// ```
/// use std::time::Duration;
/// use tripline::breaker::{HealthProbe, HealthProber};
/// use tripline::clock::ManualClock;
/// use tripline::{CircuitBreaker, State};
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder().clock(clock.clone()).build().unwrap();
/// breaker.open_for(Duration::from_secs(5));
/// let mut prober = HealthProber::new(breaker.clone(), || async { true }, Duration::from_secs(1));
/// // A "sleep" that moves the manual clock keeps the example deterministic.
/// let sleep = |d| { clock.advance(d); std::future::ready(()) };
/// clock.advance(Duration::from_secs(5));
/// let step = futures_executor::block_on(prober.probe_once(&sleep));
/// assert_eq!(step, HealthProbe::Passed);
/// assert_eq!(breaker.state(), State::HalfOpen);
/// ```
pub struct HealthProber<F> {
    breaker: CircuitBreaker,
    check: F,
    timeout: Duration,
    grace: Duration,
    idle_poll: Duration,
}

impl<F, Fut> HealthProber<F>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    /// A prober running `check`, each run bounded by `timeout`.
    pub fn new(breaker: CircuitBreaker, check: F, timeout: Duration) -> Self {
        HealthProber {
            breaker,
            check,
            timeout,
            grace: timeout,
            idle_poll: Duration::from_secs(1),
        }
    }

    /// How long after the deadline plus the timeout business traffic waits
    /// for the prober before probing itself (default: the timeout).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How often to look at a breaker that is not open (default 1 s).
    pub fn idle_poll(mut self, every: Duration) -> Self {
        self.idle_poll = every;
        self
    }

    /// One step: if the breaker is open and its open duration has ended,
    /// runs the check (racing it against `sleep(timeout)`) and acts on it.
    pub async fn probe_once<S, SF>(&mut self, sleep: &S) -> HealthProbe
    where
        S: Fn(Duration) -> SF,
        SF: Future<Output = ()>,
    {
        let inner = &self.breaker.inner;
        let now = inner.clock.now();
        match inner.open_until() {
            Some(until) if now >= until => {}
            _ => return HealthProbe::NotDue,
        }
        let verdict = {
            let mut check = pin!((self.check)());
            let mut timer = pin!(sleep(self.timeout));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(ok) = check.as_mut().poll(cx) {
                    return Poll::Ready(Some(ok));
                }
                timer.as_mut().poll(cx).map(|()| None)
            })
            .await
        };
        let w = inner.word();
        if w.state() != State::Open || w.is_busy() {
            return HealthProbe::NotDue; // an operator or a business probe moved it
        }
        let now = inner.clock.now();
        match verdict {
            Some(true) => {
                match inner.enter_half_open_because(w, now, Reason::HealthCheckPassed, false) {
                    Entry::Entered | Entry::Admitted(_) => HealthProbe::Passed,
                    // Moved by someone else, or a reconfiguration is in
                    // progress: the next look decides.
                    Entry::Lost | Entry::Reconfiguring => HealthProbe::NotDue,
                }
            }
            failed => {
                let evidence = inner.evidence(inner.window_at(now), now);
                inner.transition_to_open(
                    w,
                    State::Open,
                    Reason::HealthCheckFailed,
                    evidence,
                    OpenUntil::NextRound,
                    now,
                );
                if failed.is_none() {
                    HealthProbe::TimedOut
                } else {
                    HealthProbe::Failed
                }
            }
        }
    }

    /// Probes forever: sleeps until the open duration ends (or `idle_poll`
    /// while the breaker is not open), then [`probe_once`](Self::probe_once).
    /// Spawn it on your runtime; drop the task to detach the prober.
    pub async fn run<S, SF>(mut self, sleep: S)
    where
        S: Fn(Duration) -> SF,
        SF: Future<Output = ()>,
    {
        loop {
            let inner = &self.breaker.inner;
            let now = inner.clock.now();
            let wait = match inner.open_until() {
                Some(until) => {
                    inner.hold_business_probes_until(until + self.timeout + self.grace);
                    until - now
                }
                None => self.idle_poll,
            };
            if !wait.is_zero() {
                sleep(wait).await;
            }
            if self.probe_once(&sleep).await == HealthProbe::NotDue && wait.is_zero() {
                // Moved by someone else meanwhile: look again later, never spin.
                sleep(self.idle_poll.min(self.timeout)).await;
            }
        }
    }
}
