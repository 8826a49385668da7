//! Failsafe: on failure, return a default — marked degraded, and counted.
//!
//! For side paths whose failure must never fail the main flow: writing a
//! user-behaviour log, a marketing notification, click-stream data.
//! Dubbo's failsafe logs the error and returns null; here the
//! default comes wrapped in [`Served`] with a [`Degraded`] marker (reason
//! and source), so code downstream can tell a real empty answer from a
//! swallowed failure, and every swallowed failure is counted
//! ([`FailsafeStats`]) and logged (`tracing`, target `tripline::cluster`).
//! One attempt, as failfast: a failure is not retried.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Cluster, ClusterAttempt, ClusterError, Endpoint, Failfast};
use crate::endpoint::{DefaultEndpointClassifier, EndpointClassifier};
use crate::fallback::{Degraded, FallbackSource, Served};
use crate::sync::Arc;

/// Cumulative counts of one failsafe policy.
///
/// ```
/// use tripline::cluster::FailsafeStats;
/// assert_eq!(FailsafeStats::default().degraded, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailsafeStats {
    /// Calls.
    pub calls: u64,
    /// Calls answered with the default because the real call failed or
    /// could not be made.
    pub degraded: u64,
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    degraded: AtomicU64,
}

/// The failsafe strategy over a cluster; clones share counters.
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig, Failsafe};
/// use tripline::fallback::DegradedReason;
///
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("audit", "audit:80")).build().unwrap();
/// let failsafe = Failsafe::new(cluster);
/// let served = failsafe.call_or_default(|_endpoint, _attempt| Err::<u32, _>("disk full"));
/// assert_eq!(served.value, 0);
/// assert_eq!(served.degraded.unwrap().reason, DegradedReason::Failed);
/// assert_eq!(failsafe.stats().degraded, 1);
/// ```
#[derive(Clone)]
pub struct Failsafe {
    failfast: Failfast,
    counters: Arc<Counters>,
}

impl Failsafe {
    /// Failsafe calls over `cluster`.
    pub fn new(cluster: Cluster) -> Self {
        Failsafe {
            failfast: Failfast::new(cluster),
            counters: Arc::default(),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        self.failfast.cluster()
    }

    /// Cumulative counts.
    pub fn stats(&self) -> FailsafeStats {
        FailsafeStats {
            calls: self.counters.calls.load(Ordering::Relaxed),
            degraded: self.counters.degraded.load(Ordering::Relaxed),
        }
    }

    /// Runs `op` once; on any failure returns `T::default()`, marked degraded.
    pub fn call_or_default<T: Default, E: fmt::Display>(
        &self,
        op: impl FnOnce(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Served<T> {
        let result = self.failfast.call(op);
        self.serve(result, |_| T::default(), FallbackSource::Static)
    }

    /// Runs `op` once; on any failure returns `default(&error)`, marked
    /// degraded (source: [`FallbackSource::Function`]; `Static` for
    /// [`call_or_default`](Self::call_or_default)).
    pub fn call_or<T, E: fmt::Display>(
        &self,
        default: impl FnOnce(&ClusterError<E>) -> T,
        op: impl FnOnce(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Served<T> {
        self.call_with(&DefaultEndpointClassifier, default, op)
    }

    /// Like [`call_or`](Self::call_or), classifying with `classifier`.
    pub fn call_with<T, E: fmt::Display, C>(
        &self,
        classifier: &C,
        default: impl FnOnce(&ClusterError<E>) -> T,
        op: impl FnOnce(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Served<T>
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let result = self.failfast.call_with(classifier, op);
        self.serve(result, default, FallbackSource::Function)
    }

    /// Async: awaits the future `op` makes, once; on failure `T::default()`.
    pub async fn call_async_or_default<T, E, F, Fut>(&self, op: F) -> Served<T>
    where
        T: Default,
        E: fmt::Display,
        F: FnOnce(Endpoint, ClusterAttempt) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let result = self.failfast.call_async(op).await;
        self.serve(result, |_| T::default(), FallbackSource::Static)
    }

    fn serve<T, E: fmt::Display>(
        &self,
        result: Result<T, ClusterError<E>>,
        default: impl FnOnce(&ClusterError<E>) -> T,
        source: FallbackSource,
    ) -> Served<T> {
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(v) => Served::fresh(v),
            Err(e) => {
                self.counters.degraded.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(target: "tripline::cluster", cluster = self.cluster().name(),
                    error = %e, "failsafe: failure swallowed, default served");
                Served {
                    value: default(&e),
                    degraded: Some(Degraded {
                        reason: e.degraded_reason(),
                        source,
                        as_of: None,
                    }),
                }
            }
        }
    }
}

impl fmt::Debug for Failsafe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failsafe")
            .field("cluster", &self.cluster().name())
            .field("stats", &self.stats())
            .finish()
    }
}
