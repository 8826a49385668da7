//! Failfast: one attempt on one endpoint, the error as is.
//!
//! For operations that must never run twice — placing an order, deducting
//! stock, moving money: no retry, no extra load on a
//! struggling dependency, the fastest answer. Selection still skips
//! endpoints that are ejected or whose breaker is open, so the one attempt
//! goes to an endpoint that can take it; when none can, the call fails at
//! once with [`Unavailable`](super::Unavailable), without touching the network.

use std::future::Future;
use std::time::Duration;

use super::balance::NONE_TRIED;
use super::set::EndpointSet;
use super::shared::{Shared, with_default_classifier};
use super::{Cluster, ClusterAttempt, ClusterError, Endpoint};
use crate::breaker::Permit;
use crate::endpoint::EndpointClassifier;

/// The failfast strategy over a cluster.
///
/// ```
/// use tripline::cluster::{Cluster, ClusterError, EndpointConfig, Failfast};
///
/// let cluster = Cluster::builder()
///     .endpoints([EndpointConfig::new("a", "a:80"), EndpointConfig::new("b", "b:80")])
///     .build()
///     .unwrap();
/// let failfast = Failfast::new(cluster);
/// let mut calls = 0;
/// let r = failfast.call(|_endpoint, _attempt| {
///     calls += 1;
///     Err::<(), _>("insufficient balance")
/// });
/// assert!(matches!(r, Err(ClusterError::Failed { attempts: 1, .. })));
/// assert_eq!(calls, 1); // never a second attempt
/// ```
#[derive(Clone, Debug)]
pub struct Failfast {
    cluster: Cluster,
}

impl Failfast {
    /// Failfast calls over `cluster`.
    pub fn new(cluster: Cluster) -> Self {
        Failfast { cluster }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    with_default_classifier! {
        /// Runs `op` once on a selected endpoint: `Ok` is a success, `Err`
        /// an upstream failure. The context deadline
        /// ([`Deadline::current`](crate::timeout::Deadline::current)) is
        /// checked first and handed to the attempt.
        #[inline]
        pub fn call(op: FnOnce) -> Result<T, ClusterError<E>> = call_with;
    }

    /// Runs `op` once, classifying its result with `classifier`.
    #[inline]
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        op: impl FnOnce(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Result<T, ClusterError<E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let s = &*self.cluster.shared;
        let set = s.set.load();
        let (i, permit, attempt) = admit(s, &set)?;
        let e = &set.endpoints[i];
        let (_, result) = s.attempt(e, permit, &attempt, classifier, op);
        result.map_err(|error| failed(e, error))
    }

    with_default_classifier! {
        /// Awaits the future `op` makes for a selected endpoint, once.
        pub async fn call_async(op: FnOnce) -> Result<T, ClusterError<E>> = call_async_with;
    }

    /// Awaits the future `op` makes, once, classifying with `classifier`.
    pub async fn call_async_with<T, E, C, F, Fut>(
        &self,
        classifier: &C,
        op: F,
    ) -> Result<T, ClusterError<E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
        F: FnOnce(Endpoint, ClusterAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let s = &*self.cluster.shared;
        // The set is held across the await, so the async twin takes an Arc
        // where the sync one borrows a guard; the decision is the same.
        let set = s.set.load_full();
        let (i, permit, attempt) = admit(s, &set)?;
        let e = &set.endpoints[i];
        let fut = op(e.clone(), attempt);
        let (_, result) = s.attempt_async(e, permit, &attempt, classifier, fut).await;
        result.map_err(|error| failed(e, error))
    }
}

/// Everything failfast decides before its one attempt, shared by the sync
/// and the async call so that they cannot drift apart: the due outlier
/// pass and the context deadline ([`Shared::begin_call`]), then the
/// endpoint and its breaker permit.
#[inline]
fn admit<'s, E>(
    s: &Shared,
    set: &'s EndpointSet,
) -> Result<(usize, Permit<'s>, ClusterAttempt), ClusterError<E>> {
    let deadline = s
        .begin_call(Duration::ZERO)
        .map_err(ClusterError::DeadlineExceeded)?;
    let tried = &NONE_TRIED;
    let Some((i, permit)) = s.pick(set, tried) else {
        return Err(s.unavailable(set, tried).into());
    };
    let attempt = ClusterAttempt {
        number: 1,
        deadline,
    };
    Ok((i, permit, attempt))
}

/// The one attempt's failure, as failfast reports it.
fn failed<E>(e: &Endpoint, error: E) -> ClusterError<E> {
    ClusterError::Failed {
        endpoint: e.id().clone(),
        attempts: 1,
        error,
    }
}
