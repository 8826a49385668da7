//! Endpoints: the instances of one dependency that a cluster chooses among.
//!
//! An [`Endpoint`] is a cheap handle (one `Arc`) that keeps its breaker,
//! its outlier state and its outstanding-request count across changes of
//! the endpoint set: replacing the set with one that still names an
//! endpoint's id keeps the endpoint, so a breaker that is open stays open
//! and an ejection runs its course.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use crate::breaker::CircuitBreaker;
use crate::endpoint::EndpointId;
use crate::error::PolicyConfigError;
use crate::outlier::HostOutlier;
use crate::sync::Arc;

/// One endpoint as configured: id, address and weight.
///
/// ```
/// use tripline::cluster::EndpointConfig;
/// let e = EndpointConfig::new("b", "10.0.0.2:8080").weight(3);
/// assert_eq!(e.weight, 3);
/// assert!(e.validate().is_ok());
/// assert_eq!(EndpointConfig::new("", "x").validate().unwrap_err().field, "endpoints.id");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct EndpointConfig {
    /// Unique within the cluster; names the endpoint's breaker and events.
    pub id: String,
    /// Where to send requests (opaque to tripline: handed to your call).
    pub address: String,
    /// Relative share of traffic for the weighted balancers, 1..=10 000.
    #[cfg_attr(feature = "serde", serde(default = "one"))]
    pub weight: u32,
}

#[cfg(feature = "serde")]
fn one() -> u32 {
    1
}

impl EndpointConfig {
    /// Largest weight.
    pub const MAX_WEIGHT: u32 = 10_000;

    /// An endpoint of weight 1.
    pub fn new(id: impl Into<String>, address: impl Into<String>) -> Self {
        EndpointConfig {
            id: id.into(),
            address: address.into(),
            weight: 1,
        }
    }

    /// Sets the weight.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Checks the fields, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        if self.id.is_empty() {
            return Err(PolicyConfigError::new(
                "cluster",
                "endpoints.id",
                format!("must not be empty (address `{}`)", self.address),
            ));
        }
        if !(1..=Self::MAX_WEIGHT).contains(&self.weight) {
            return Err(PolicyConfigError::new(
                "cluster",
                "endpoints.weight",
                format!(
                    "must be between 1 and {}, got {} (endpoint `{}`)",
                    Self::MAX_WEIGHT,
                    self.weight,
                    self.id
                ),
            ));
        }
        Ok(())
    }
}

/// `flags` bit: ejected by outlier detection.
pub(crate) const EJECTED: u8 = 1;
/// `flags` bit: marked unhealthy by the application (active health check,
/// draining).
pub(crate) const UNHEALTHY: u8 = 2;

/// `repr(C)`: the fields every selection reads (flags, load, weight, the
/// breaker's handle) come first, in the endpoint's first cache line.
#[repr(C)]
pub(crate) struct EndpointInner {
    /// `EJECTED | UNHEALTHY`; zero means routable. Read on every selection.
    pub(crate) flags: AtomicU8,
    /// Requests in flight, for the least-outstanding and p2c balancers.
    pub(crate) outstanding: AtomicU32,
    pub(crate) weight: AtomicU32,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) id: EndpointId,
    pub(crate) address: Arc<str>,
    pub(crate) outlier: HostOutlier,
}

/// An endpoint of a [`Cluster`](super::Cluster): a cheap, cloneable handle.
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig};
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "10.0.0.1:80")).build().unwrap();
/// let a = cluster.endpoint("a").unwrap();
/// assert_eq!(a.address(), "10.0.0.1:80");
/// assert!(a.is_routable());
/// ```
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) inner: Arc<EndpointInner>,
}

impl Endpoint {
    pub(crate) fn new(config: &EndpointConfig, breaker: CircuitBreaker) -> Self {
        Endpoint {
            inner: Arc::new(EndpointInner {
                flags: AtomicU8::new(0),
                outstanding: AtomicU32::new(0),
                weight: AtomicU32::new(config.weight),
                breaker,
                id: EndpointId::from(config.id.as_str()),
                address: Arc::from(config.address.as_str()),
                outlier: HostOutlier::default(),
            }),
        }
    }

    /// The endpoint's id.
    pub fn id(&self) -> &EndpointId {
        &self.inner.id
    }

    /// The endpoint's address, as configured.
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// The endpoint's weight.
    pub fn weight(&self) -> u32 {
        self.inner.weight.load(Ordering::Relaxed)
    }

    /// The endpoint's own circuit breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.inner.breaker
    }

    /// Requests in flight to this endpoint through the cluster.
    pub fn outstanding(&self) -> u32 {
        self.inner.outstanding.load(Ordering::Relaxed)
    }

    /// Whether outlier detection has ejected the endpoint.
    pub fn is_ejected(&self) -> bool {
        self.inner.flags.load(Ordering::Relaxed) & EJECTED != 0
    }

    /// Whether the application marked the endpoint unhealthy.
    pub fn is_marked_unhealthy(&self) -> bool {
        self.inner.flags.load(Ordering::Relaxed) & UNHEALTHY != 0
    }

    /// Whether the balancer may choose it outside panic mode (neither
    /// ejected nor marked unhealthy; its breaker is asked separately).
    #[inline]
    pub fn is_routable(&self) -> bool {
        self.inner.flags.load(Ordering::Relaxed) == 0
    }

    /// Ejections since the endpoint joined the cluster.
    pub fn ejections(&self) -> u64 {
        self.inner.outlier.ejections.load(Ordering::Relaxed)
    }

    /// What outlier detection counted for this endpoint.
    pub fn outlier_counts(&self) -> crate::outlier::OutlierCounts {
        self.inner.outlier.counts()
    }

    /// Whether two handles are the same endpoint.
    pub fn ptr_eq(&self, other: &Endpoint) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.inner.id)
            .field("address", &self.inner.address)
            .field("weight", &self.weight())
            .field("ejected", &self.is_ejected())
            .field("breaker", &self.inner.breaker.state())
            .finish()
    }
}

/// One request in flight: counted in `outstanding` until dropped.
pub(crate) struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    #[inline]
    pub(crate) fn new(e: &'a Endpoint) -> Self {
        e.inner.outstanding.fetch_add(1, Ordering::Relaxed);
        InFlight(&e.inner.outstanding)
    }
}

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
