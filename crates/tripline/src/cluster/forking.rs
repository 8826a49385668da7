//! Forking: call `forks` distinct endpoints at once; the first success
//! wins and the others are cancelled.
//!
//! For reads where tail latency matters more than load:
//! one slow or dying replica no longer decides the p99, at the price of
//! `forks`× the work. The losers' futures are dropped as soon as a winner
//! answers, which cancels them: their breaker permits are released with a
//! neutral verdict (cancellation says nothing about an endpoint's health)
//! and nothing is recorded for outlier detection.
//!
//! Forks beyond the first are extra load exactly like retries and hedges,
//! so with a [`RetryBudget`] each spends one token; when the budget is dry
//! fewer forks go out (at least one always does). Fewer forks also go out
//! when fewer endpoints can take the call. A business error
//! ([`Ignored`](super::EndpointOutcome::Ignored)) is an answer and wins like
//! a success; when every fork fails, the last failure is returned. With a
//! [`Timer`](crate::timeout::Timer) the whole race is bounded by the
//! deadline ([`Deadline::current`](crate::timeout::Deadline::current));
//! without one, the deadline is only handed to each fork.
//!
//! Async only (it needs concurrency), on any runtime: the forks are polled
//! by the calling task, no task is spawned.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use super::balance::{MAX_TRIED, Tried};
use super::shared::with_default_classifier;
use super::{Cluster, ClusterAttempt, ClusterError, Endpoint, EndpointId};
use crate::budget::RetryBudget;
use crate::clock::Clock;
use crate::endpoint::EndpointClassifier;
use crate::error::PolicyConfigError;
use crate::timeout::{DeadlineExceeded, SharedTimer};

/// How many endpoints a [`Forking`] call uses.
///
/// ```
/// use tripline::cluster::ForkingConfig;
/// assert_eq!(ForkingConfig::default().forks, 2);
/// let err = ForkingConfig { forks: 0 }.validate().unwrap_err();
/// assert_eq!(err.to_string(), "invalid forking config: `forks` must be at least 1, got 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ForkingConfig {
    /// Endpoints called at once, 1..=32 (Dubbo's `forks`; 2 or 3 in practice).
    pub forks: u32,
}

impl Default for ForkingConfig {
    /// Two forks.
    fn default() -> Self {
        ForkingConfig { forks: 2 }
    }
}

impl ForkingConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.forks == 0 || self.forks as usize > MAX_TRIED {
            let what = if self.forks == 0 {
                "must be at least 1".to_owned()
            } else {
                format!("must be at most {MAX_TRIED}")
            };
            return Err(PolicyConfigError::new(
                "forking",
                "forks",
                format!("{what}, got {}", self.forks),
            ));
        }
        Ok(())
    }
}

/// The forking strategy over a cluster.
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tripline::cluster::{Cluster, EndpointConfig, Forking, ForkingConfig};
///
/// let cluster = Cluster::builder()
///     .endpoints(["slow", "fast"].map(|id| EndpointConfig::new(id, id)))
///     .build()
///     .unwrap();
/// let forking = Forking::try_new(cluster, ForkingConfig { forks: 2 }).unwrap();
/// let winner = forking
///     .call(|e, _| async move {
///         let ms = if e.id().as_str() == "slow" { 1000 } else { 5 };
///         tokio::time::sleep(Duration::from_millis(ms)).await;
///         Ok::<_, ()>(e.id().to_string())
///     })
///     .await;
/// assert_eq!(winner.unwrap(), "fast");
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct Forking {
    cluster: Cluster,
    config: ForkingConfig,
    budget: Option<RetryBudget>,
    timer: Option<SharedTimer>,
}

impl Forking {
    /// Forking over `cluster` with `config`, no budget, no timer.
    pub fn try_new(cluster: Cluster, config: ForkingConfig) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        Ok(Forking {
            cluster,
            config,
            budget: None,
            timer: None,
        })
    }

    /// Forks beyond the first spend from `budget`.
    pub fn with_budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Bounds each race by the deadline on `timer`.
    pub fn with_timer(mut self, timer: SharedTimer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    with_default_classifier! {
        /// Races the futures `op` makes for up to `forks` distinct endpoints.
        pub async fn call(op: FnMut) -> Result<T, ClusterError<E>> = call_with;
    }

    /// Like [`call`](Self::call), classifying with `classifier`.
    pub async fn call_with<T, E, C, F, Fut>(
        &self,
        classifier: &C,
        mut op: F,
    ) -> Result<T, ClusterError<E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
        F: FnMut(Endpoint, ClusterAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let s = &*self.cluster.shared;
        let deadline = s
            .begin_call(Duration::ZERO)
            .map_err(ClusterError::DeadlineExceeded)?;
        if let Some(b) = &self.budget {
            b.deposit();
        }
        let set = s.set.load_full();
        let mut tried = Tried::new();
        let mut forks = Vec::with_capacity(self.config.forks as usize);
        for k in 0..self.config.forks {
            let Some((i, permit)) = s.pick(&set, &tried) else {
                break;
            };
            if k > 0
                && let Some(b) = &self.budget
                && !b.try_withdraw()
            {
                break; // the permit is released neutrally
            }
            tried.push(i);
            let e = &set.endpoints[i];
            let attempt = ClusterAttempt {
                number: k + 1,
                deadline,
            };
            let fut = op(e.clone(), attempt);
            let run = async move { s.attempt_async(e, permit, &attempt, classifier, fut).await };
            forks.push(Some((e.id().clone(), Box::pin(run))));
        }
        if forks.is_empty() {
            return Err(s.unavailable(&set, &tried).into());
        }
        let started = forks.len() as u32;
        let mut last: Option<(EndpointId, Result<T, E>)> = None;
        let race = poll_fn(|cx| {
            let mut pending = false;
            for slot in forks.iter_mut() {
                let Some((id, fut)) = slot else { continue };
                match Pin::as_mut(fut).poll(cx) {
                    Poll::Ready((outcome, r)) => {
                        let id = id.clone();
                        *slot = None;
                        if !outcome.is_failure() {
                            return Poll::Ready(Some((id, r)));
                        }
                        last = Some((id, r));
                    }
                    Poll::Pending => pending = true,
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(None)
            }
        });
        let raced = match (deadline, &self.timer) {
            (Some(d), Some(t)) => {
                let left = d.instant() - s.clock.now();
                match crate::timeout::timeout(t.clone(), left, race).await {
                    Ok(r) => r,
                    Err(_) => {
                        return Err(ClusterError::DeadlineExceeded(DeadlineExceeded {
                            remaining: Duration::ZERO,
                            floor: Duration::ZERO,
                        }));
                    }
                }
            }
            _ => race.await,
        };
        // The winner, or else the last failure (a value classified a
        // failure is returned as it is, as failover does).
        match raced.or(last) {
            Some((endpoint, r)) => r.map_err(|error| ClusterError::Failed {
                endpoint,
                attempts: started,
                error,
            }),
            None => Err(s.unavailable(&set, &tried).into()),
        }
    }
}

impl fmt::Debug for Forking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Forking")
            .field("cluster", &self.cluster.name())
            .field("config", &self.config)
            .field("budget", &self.budget.is_some())
            .finish()
    }
}
