//! Broadcast: call every endpoint; fail if any fails (or more than
//! `fail_percent` do).
//!
//! For state that lives on every node: invalidating local caches, pushing
//! a revoked token to every instance. Every endpoint of the
//! cluster is called — ejected and unhealthy ones too, since a node that
//! misses an invalidation keeps serving stale data, whatever its latency
//! record. Each endpoint's breaker still decides: a refusal counts as that
//! endpoint's failure ([`EndpointFailure::Rejected`]), because the message
//! did not reach it.
//!
//! Sync calls go one endpoint after another; async calls all at once.
//! Without `fail_percent` any failure fails the broadcast (Dubbo's
//! default); with it, the broadcast fails when more than `fail_percent`
//! percent of the endpoints failed (`failed × 100 > fail_percent × total`).

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

use super::shared::with_default_classifier;
use super::{Cluster, ClusterAttempt, Endpoint, EndpointId, Unavailable};
use crate::breaker::Rejected;
use crate::endpoint::EndpointClassifier;
use crate::error::PolicyConfigError;
use crate::outlier::check_percent;
use crate::timeout::Deadline;

/// How a [`Broadcast`] judges its results.
///
/// ```
/// use tripline::cluster::BroadcastConfig;
/// assert!(BroadcastConfig { fail_percent: Some(20) }.validate().is_ok());
/// let bad = BroadcastConfig { fail_percent: Some(120) };
/// assert_eq!(bad.validate().unwrap_err().field, "fail_percent");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct BroadcastConfig {
    /// Tolerated share of failed endpoints, percent 0–100; `None` fails
    /// on any failure.
    pub fail_percent: Option<u32>,
}

impl BroadcastConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        match self.fail_percent {
            Some(p) => check_percent("broadcast", "fail_percent", p),
            None => Ok(()),
        }
    }
}

/// Why one endpoint did not take the broadcast.
///
/// ```
/// use tripline::cluster::EndpointFailure;
/// let f: EndpointFailure<&str> = EndpointFailure::Failed("stale cache");
/// assert!(matches!(f, EndpointFailure::Failed(_)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum EndpointFailure<E> {
    /// Its breaker refused the call.
    Rejected(Rejected),
    /// The call ran and failed.
    Failed(E),
}

/// Every endpoint's result, in the cluster's order.
///
/// ```
/// use tripline::cluster::{BroadcastReport, EndpointFailure};
/// let report: BroadcastReport<(), &str> = BroadcastReport {
///     results: vec![("a".into(), Ok(())), ("b".into(), Err(EndpointFailure::Failed("down")))],
/// };
/// assert_eq!((report.succeeded(), report.failed()), (1, 1));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BroadcastReport<T, E> {
    /// `(endpoint, result)` for every endpoint.
    pub results: Vec<(EndpointId, Result<T, EndpointFailure<E>>)>,
}

impl<T, E> BroadcastReport<T, E> {
    /// Endpoints that answered.
    pub fn succeeded(&self) -> usize {
        self.results.iter().filter(|r| r.1.is_ok()).count()
    }

    /// Endpoints that failed or refused.
    pub fn failed(&self) -> usize {
        self.results.len() - self.succeeded()
    }
}

/// The broadcast failed: the cluster was empty, or too many endpoints failed.
///
/// ```
/// use tripline::cluster::{BroadcastError, BroadcastReport, EndpointFailure};
/// let e: BroadcastError<(), &str> = BroadcastError::Failed {
///     fail_percent: None,
///     report: BroadcastReport { results: vec![("a".into(), Err(EndpointFailure::Failed("down")))] },
/// };
/// assert_eq!(e.to_string(), "broadcast failed on 1 of 1 endpoint(s)");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum BroadcastError<T, E> {
    /// The cluster has no endpoints.
    Unavailable(Unavailable),
    /// Too many endpoints failed; the report has every result.
    Failed {
        /// The tolerance in force (`None`: none).
        fail_percent: Option<u32>,
        /// Every endpoint's result.
        report: BroadcastReport<T, E>,
    },
}

impl<T, E> fmt::Display for BroadcastError<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BroadcastError::Unavailable(u) => u.fmt(f),
            BroadcastError::Failed {
                fail_percent,
                report,
            } => {
                write!(
                    f,
                    "broadcast failed on {} of {} endpoint(s)",
                    report.failed(),
                    report.results.len()
                )?;
                match fail_percent {
                    Some(p) => write!(f, ", more than the {p}% `fail_percent`"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl<T: fmt::Debug, E: fmt::Debug> std::error::Error for BroadcastError<T, E> {}

/// The broadcast strategy over a cluster.
///
/// ```
/// use tripline::cluster::{Broadcast, BroadcastConfig, BroadcastError, Cluster, EndpointConfig};
///
/// let cluster = Cluster::builder()
///     .endpoints(["a", "b", "c"].map(|id| EndpointConfig::new(id, id)))
///     .build()
///     .unwrap();
/// let invalidate = Broadcast::try_new(cluster, BroadcastConfig::default()).unwrap();
/// let report = invalidate.call(|e, _| Ok::<_, ()>(e.id().to_string())).unwrap();
/// assert_eq!(report.succeeded(), 3);
/// let err = invalidate.call(|e, _| if e.id().as_str() == "b" { Err("down") } else { Ok(()) });
/// assert!(matches!(err, Err(BroadcastError::Failed { .. })));
/// ```
#[derive(Clone, Debug)]
pub struct Broadcast {
    cluster: Cluster,
    config: BroadcastConfig,
}

impl Broadcast {
    /// Broadcasts over `cluster` judged by `config`.
    pub fn try_new(cluster: Cluster, config: BroadcastConfig) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        Ok(Broadcast { cluster, config })
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    with_default_classifier! {
        /// Calls `op` on every endpoint, one after another.
        pub fn call(op: FnMut) -> Result<BroadcastReport<T, E>, BroadcastError<T, E>> = call_with;
    }

    /// Like [`call`](Self::call), classifying with `classifier` (for the
    /// breakers and outlier detection; the verdict counts `Err` as failed).
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        mut op: impl FnMut(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Result<BroadcastReport<T, E>, BroadcastError<T, E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let s = &*self.cluster.shared;
        s.tick();
        let set = s.set.load();
        let deadline = Deadline::current();
        let mut results = Vec::with_capacity(set.len());
        for (k, e) in set.endpoints.iter().enumerate() {
            let r = match e.breaker().try_acquire() {
                Err(rejected) => Err(EndpointFailure::Rejected(rejected)),
                Ok(permit) => {
                    let attempt = ClusterAttempt {
                        number: k as u32 + 1,
                        deadline,
                    };
                    let (_, r) = s.attempt(e, permit, &attempt, classifier, &mut op);
                    r.map_err(EndpointFailure::Failed)
                }
            };
            results.push((e.id().clone(), r));
        }
        self.judge(&set, results)
    }

    with_default_classifier! {
        /// Calls the futures `op` makes for every endpoint, all at once, and
        /// waits for all of them.
        pub async fn call_async(op: FnMut)
            -> Result<BroadcastReport<T, E>, BroadcastError<T, E>> = call_async_with;
    }

    /// Like [`call_async`](Self::call_async), classifying with `classifier`.
    pub async fn call_async_with<T, E, C, F, Fut>(
        &self,
        classifier: &C,
        mut op: F,
    ) -> Result<BroadcastReport<T, E>, BroadcastError<T, E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
        F: FnMut(Endpoint, ClusterAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let s = &*self.cluster.shared;
        s.tick();
        let set = s.set.load_full();
        let deadline = Deadline::current();
        let mut results: Vec<Option<Result<T, EndpointFailure<E>>>> = Vec::new();
        let mut running = Vec::new();
        for (k, e) in set.endpoints.iter().enumerate() {
            match e.breaker().try_acquire() {
                Err(rejected) => results.push(Some(Err(EndpointFailure::Rejected(rejected)))),
                Ok(permit) => {
                    let attempt = ClusterAttempt {
                        number: k as u32 + 1,
                        deadline,
                    };
                    let fut = op(e.clone(), attempt);
                    let run =
                        async move { s.attempt_async(e, permit, &attempt, classifier, fut).await };
                    results.push(None);
                    running.push((k, Some(Box::pin(run))));
                }
            }
        }
        poll_fn(|cx| {
            let mut pending = false;
            for (k, slot) in running.iter_mut() {
                if let Some(fut) = slot {
                    match Pin::as_mut(fut).poll(cx) {
                        Poll::Ready((_, r)) => {
                            results[*k] = Some(r.map_err(EndpointFailure::Failed));
                            *slot = None;
                        }
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        let results = set
            .endpoints
            .iter()
            .zip(results)
            .filter_map(|(e, r)| r.map(|r| (e.id().clone(), r)))
            .collect();
        self.judge(&set, results)
    }

    fn judge<T, E>(
        &self,
        set: &super::set::EndpointSet,
        results: Vec<(EndpointId, Result<T, EndpointFailure<E>>)>,
    ) -> Result<BroadcastReport<T, E>, BroadcastError<T, E>> {
        if results.is_empty() {
            let tried = super::balance::Tried::new();
            return Err(BroadcastError::Unavailable(
                self.cluster.shared.unavailable(set, &tried),
            ));
        }
        let report = BroadcastReport { results };
        let (failed, total) = (report.failed() as u64, report.results.len() as u64);
        let too_many = match self.config.fail_percent {
            None => failed > 0,
            Some(p) => failed * 100 > u64::from(p) * total,
        };
        if too_many {
            Err(BroadcastError::Failed {
                fail_percent: self.config.fail_percent,
                report,
            })
        } else {
            Ok(report)
        }
    }
}
