//! Failover's config and counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::cluster::balance::MAX_TRIED;
use crate::error::PolicyConfigError;
use crate::retry::RetryBackoff;

/// How a [`Failover`](super::Failover) behaves.
///
/// ```
/// use tripline::cluster::FailoverConfig;
/// assert_eq!(FailoverConfig::default().retries, 2);
/// let bad = FailoverConfig { retries: 40, ..Default::default() };
/// assert_eq!(bad.validate().unwrap_err().field, "retries");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct FailoverConfig {
    /// Other endpoints tried after the first fails, 0..=31 (Dubbo's
    /// `retries`: 2 means at most 3 attempts, on 3 distinct endpoints).
    pub retries: u32,
    /// Whether the operation may run twice. `false` (writes, payments)
    /// fails over only on a [`ConnectFailure`](crate::cluster::EndpointOutcome::ConnectFailure),
    /// which never reached the endpoint.
    pub idempotent: bool,
    /// The wait before trying the next endpoint: none by default, since
    /// the next attempt goes elsewhere; a backoff spreads a fleet's
    /// failovers when a whole dependency wobbles.
    pub backoff: RetryBackoff,
    /// Do not start an attempt with less than this left of the deadline.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub min_remaining: Duration,
}

impl Default for FailoverConfig {
    /// 2 retries, idempotent, no backoff, a 1 ms floor.
    fn default() -> Self {
        FailoverConfig {
            retries: 2,
            idempotent: true,
            backoff: RetryBackoff::None,
            min_remaining: Duration::from_millis(1),
        }
    }
}

impl FailoverConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.retries as usize >= MAX_TRIED {
            return Err(PolicyConfigError::new(
                "failover",
                "retries",
                format!("must be at most {}, got {}", MAX_TRIED - 1, self.retries),
            ));
        }
        // The backoff's own checks, as the retry policy makes them.
        crate::retry::RetryConfig {
            backoff: self.backoff.clone(),
            ..Default::default()
        }
        .validate()
        .map_err(|e| PolicyConfigError::new("failover", "backoff", e.constraint))
    }
}

/// Why failover stopped before `retries` was spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Stop {
    Retries = 0,
    Budget = 1,
    Deadline = 2,
    NonIdempotent = 3,
    NoEndpointLeft = 4,
}

/// Cumulative counts of one failover policy (shared by its clones).
///
/// ```
/// use tripline::cluster::FailoverStats;
/// assert_eq!(FailoverStats::default().failovers, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailoverStats {
    /// Logical calls.
    pub calls: u64,
    /// Attempts, first attempts included.
    pub attempts: u64,
    /// Attempts on another endpoint after a failure.
    pub failovers: u64,
    /// Failures not failed over because `retries` was spent.
    pub stopped_retries: u64,
    /// … because the retry budget was spent.
    pub stopped_budget: u64,
    /// … because the deadline could not fit another attempt.
    pub stopped_deadline: u64,
    /// … because the operation is not idempotent.
    pub stopped_non_idempotent: u64,
    /// … because no endpoint was left to try.
    pub stopped_no_endpoint: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    calls: AtomicU64,
    attempts: AtomicU64,
    failovers: AtomicU64,
    stopped: [AtomicU64; 5],
}

impl Counters {
    #[inline]
    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn attempt(&self, failover: bool) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        if failover {
            self.failovers.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn stop(&self, why: Stop) {
        self.stopped[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> FailoverStats {
        let s = |i: usize| self.stopped[i].load(Ordering::Relaxed);
        FailoverStats {
            calls: self.calls.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
            failovers: self.failovers.load(Ordering::Relaxed),
            stopped_retries: s(Stop::Retries as usize),
            stopped_budget: s(Stop::Budget as usize),
            stopped_deadline: s(Stop::Deadline as usize),
            stopped_non_idempotent: s(Stop::NonIdempotent as usize),
            stopped_no_endpoint: s(Stop::NoEndpointLeft as usize),
        }
    }
}
