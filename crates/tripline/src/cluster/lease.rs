//! What one call holds: its attempt's facts, and for custom strategies
//! the lease of one endpoint.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::balance::{self, Tried};
use super::{Cluster, Endpoint, EndpointId, Unavailable};
use crate::breaker::OwnedPermit;
use crate::clock::{Clock, Timestamp};
use crate::endpoint::EndpointOutcome;
use crate::timeout::Deadline;

impl Cluster {
    /// Like [`select`](Self::select), skipping the endpoints named in
    /// `avoid` — for a strategy of your own that retries: a retry sent to
    /// the endpoint that just failed learns nothing new. Ids no longer in
    /// the cluster are ignored; only the first 32 count. When every
    /// routable endpoint is in `avoid`, the answer is [`Unavailable`]
    /// (select again without `avoid` to retry the same endpoint).
    ///
    /// ```
    /// use tripline::cluster::{Cluster, EndpointConfig};
    ///
    /// let cluster = Cluster::builder()
    ///     .endpoints([EndpointConfig::new("a", "a:80"), EndpointConfig::new("b", "b:80")])
    ///     .build()
    ///     .unwrap();
    /// let first = cluster.select().unwrap();
    /// let tried = first.endpoint().id().clone();
    /// drop(first);
    /// let retry = cluster.select_avoiding(std::slice::from_ref(&tried)).unwrap();
    /// assert_ne!(retry.endpoint().id(), &tried);
    /// drop(retry);
    /// let ids = [tried.clone(), cluster.endpoints()[1].id().clone(), cluster.endpoints()[0].id().clone()];
    /// assert!(cluster.select_avoiding(&ids).is_err());
    /// ```
    pub fn select_avoiding(&self, avoid: &[EndpointId]) -> Result<Lease, Unavailable> {
        let set = self.shared.set.load();
        let mut tried = Tried::new();
        for id in avoid {
            if let Some(i) = set.endpoints.iter().position(|e| e.id() == id)
                && !tried.contains(i)
            {
                tried.push(i);
            }
        }
        drop(set);
        self.select_from(&tried)
    }

    /// Chooses an endpoint not in `tried` and takes its breaker permit.
    #[inline]
    pub(crate) fn select_from(&self, tried: &Tried) -> Result<Lease, Unavailable> {
        let s = &*self.shared;
        s.tick();
        let set = s.set.load();
        let panic = s.panic.load(Ordering::Relaxed);
        let picked = balance::select(s.balancer, &s.lb, &set, panic, tried, |e| {
            e.breaker().try_acquire_owned().ok()
        });
        let Some((i, permit)) = picked else {
            return Err(s.unavailable(&set, tried));
        };
        let endpoint = set.endpoints[i].clone();
        endpoint.inner.outstanding.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            endpoint,
            permit: Some(permit),
            cluster: self.clone(),
            start: s.clock.now(),
        })
    }
}

/// What an attempt knows about itself.
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig, Failfast};
/// use tripline::clock::ManualClock;
/// use tripline::timeout::Deadline;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "a:80")).clock(clock.clone()).build().unwrap();
/// let deadline = Deadline::after(&clock, Duration::from_millis(300));
/// let seen = deadline.scope(|| Failfast::new(cluster).call(|_, attempt| Ok::<_, ()>((attempt.number(), attempt.deadline()))));
/// assert_eq!(seen.unwrap(), (1, Some(deadline)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterAttempt {
    pub(crate) number: u32,
    pub(crate) deadline: Option<Deadline>,
}

impl ClusterAttempt {
    /// 1 for the first attempt, 2 for the first failover, …; for forking and
    /// broadcast, the fork's or endpoint's rank (1-based).
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The call's deadline, if any: give it to the client's own timeout.
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }
}

/// One endpoint chosen for one call, holding its breaker permit and its
/// place in the endpoint's outstanding count.
///
/// ```
/// use std::time::Duration;
/// use tripline::cluster::{Cluster, EndpointConfig, EndpointOutcome};
///
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "a:80")).build().unwrap();
/// let lease = cluster.select().unwrap();
/// assert_eq!(lease.endpoint().outstanding(), 1);
/// lease.record_elapsed(EndpointOutcome::GatewayFailure, Duration::from_millis(20));
/// assert_eq!(cluster.endpoint("a").unwrap().outstanding(), 0);
/// ```
#[must_use = "record the outcome, or drop the lease to release it neutrally"]
pub struct Lease {
    pub(crate) endpoint: Endpoint,
    pub(crate) permit: Option<OwnedPermit>,
    pub(crate) cluster: Cluster,
    pub(crate) start: Timestamp,
}

impl Lease {
    /// The endpoint to call.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Whether the call is the endpoint breaker's half-open probe.
    pub fn is_probe(&self) -> bool {
        self.permit.as_ref().is_some_and(OwnedPermit::is_probe)
    }

    /// How long since the endpoint was selected, on the cluster's clock:
    /// the duration [`record`](Self::record) charges, for a caller that
    /// reports the same call elsewhere too (a shadow twin, a log line).
    pub fn elapsed(&self) -> Duration {
        self.cluster.shared.clock.now() - self.start
    }

    /// Records the call's outcome (timed from the selection).
    pub fn record(self, outcome: EndpointOutcome) {
        let elapsed = self.elapsed();
        self.record_elapsed(outcome, elapsed);
    }

    /// Records the call's outcome and duration.
    pub fn record_elapsed(mut self, outcome: EndpointOutcome, elapsed: Duration) {
        if let Some(p) = self.permit.take() {
            p.record(outcome.breaker_outcome(), elapsed);
        }
        self.cluster.shared.record_outlier(&self.endpoint, outcome);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.endpoint
            .inner
            .outstanding
            .fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("endpoint", &self.endpoint.id())
            .field("probe", &self.is_probe())
            .finish()
    }
}
