//! What one call holds: its attempt's facts, and for custom strategies
//! the lease of one endpoint.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::outcome::EndpointOutcome;
use super::{Cluster, Endpoint};
use crate::breaker::OwnedPermit;
use crate::clock::{Clock, Timestamp};
use crate::timeout::Deadline;

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

    /// Records the call's outcome (timed from the selection).
    pub fn record(self, outcome: EndpointOutcome) {
        let elapsed = self.cluster.shared.clock.now() - self.start;
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
