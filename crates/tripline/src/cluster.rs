//! Clusters: one dependency served by many endpoints, with a breaker per
//! endpoint, outlier detection, and the six cluster fault-tolerance
//! strategies of Apache Dubbo.
//!
//! When a few instances of a dependency are sick, the right move is to
//! route around them; when the whole dependency is sick, to break.
//! A [`Cluster`] holds the endpoints (id, address, weight; they can
//! change at runtime), a [`Balancer`], a circuit breaker per endpoint, and
//! optional [outlier detection](crate::outlier). Every call selects an
//! endpoint that is routable and whose breaker admits it — lock-free and
//! allocation-free (see `balance.rs`) — and records the outcome on that
//! endpoint's breaker and outlier counters. An endpoint whose breaker is
//! open is skipped until its wait is over, then probed by real traffic;
//! when every endpoint is open, calls fail fast with [`Unavailable`].
//!
//! # Strategies
//!
//! What to do when the chosen endpoint fails is a per-operation decision:
//!
//! | strategy | behaviour on failure | typical use | trade-off |
//! |---|---|---|---|
//! | [`Failover`] | try another endpoint not yet tried, up to `retries` | reads, idempotent writes | masks one bad node; adds latency, and blind retries feed a retry storm (bounded here by the retry budget and the deadline) |
//! | [`Failfast`] | one attempt, the error as is | non-idempotent writes (orders, payments) | fastest, no extra load; no tolerance for a blip |
//! | [`Failsafe`] | return a default marked degraded, and count it | side paths: audit logs, click streams | the main flow never fails; the failure is swallowed (visible only in counts and logs) |
//! | [`Failback`] | record the request durably, retry it in the background | async notifications, eventual consistency | the caller proceeds; delivery is later and at least once |
//! | [`Forking`] | call `forks` endpoints at once, first success wins | latency-critical reads | cuts tail latency; costs `forks`× the load |
//! | [`Broadcast`] | call every endpoint; fail if any (or too many) fail | cache invalidation, state sync | reaches every node; as slow and as fragile as the worst |
//!
//! The safe pairing: reads → failover; writes, deductions,
//! transfers → failfast (or failback with an idempotency key); non-core
//! statistics → failsafe. Failover refuses to send a non-idempotent request
//! twice: only a [`ConnectFailure`](EndpointOutcome::ConnectFailure), which
//! never left, moves it to another endpoint.
//!
//! ```
//! use tripline::clock::ManualClock;
//! use tripline::cluster::{Cluster, EndpointConfig, Failover, FailoverConfig};
//!
//! let cluster = Cluster::builder()
//!     .name("geo")
//!     .endpoints(["a", "b", "c"].map(|id| EndpointConfig::new(id, format!("{id}.geo:80"))))
//!     .clock(ManualClock::new())
//!     .build()
//!     .unwrap();
//! let failover = Failover::try_new(cluster.clone(), FailoverConfig { retries: 2, ..Default::default() }).unwrap();
//!
//! // `a` is down: the call moves on to the next endpoint.
//! let answer = failover.call(|endpoint, _attempt| match endpoint.id().as_str() {
//!     "a" => Err("connection reset"),
//!     id => Ok(format!("answered by {id}")),
//! });
//! assert_eq!(answer.unwrap(), "answered by b");
//! ```

pub(crate) mod balance;
mod breakers;
mod broadcast;
mod config;
mod eject;
pub(crate) mod endpoint;
mod error;
mod failback;
mod failfast;
mod failover;
mod failsafe;
mod forking;
mod handle;
mod lease;
pub(crate) mod set;
mod shared;
mod tally;

pub use crate::endpoint::EndpointId;
pub use crate::endpoint::{DefaultEndpointClassifier, EndpointClassifier, EndpointOutcome};
pub use balance::Balancer;
pub use breakers::MAX_ENDPOINTS;
pub use broadcast::{Broadcast, BroadcastConfig, BroadcastError, BroadcastReport, EndpointFailure};
pub use config::{ClusterBuilder, ClusterConfig};
pub use endpoint::{Endpoint, EndpointConfig};
pub use error::{ClusterError, Unavailable};
pub use failback::{
    CorruptTail, DeliveryReport, Failback, FailbackBuilder, FailbackConfig, FailbackError,
    FailbackStats, FsyncPolicy, OpenReport, Submitted, WallClock,
};
pub use failfast::Failfast;
pub use failover::{Failover, FailoverConfig, FailoverStats};
pub use failsafe::{Failsafe, FailsafeStats};
pub use forking::{Forking, ForkingConfig};
pub use handle::{Cluster, ClusterHealth, ClusterStrategy};
pub use lease::{ClusterAttempt, Lease};
pub use tally::{EjectionCounts, EjectionTally};
