//! Why a cluster call did not return a value.

use std::fmt;
use std::sync::Arc;

use super::EndpointId;
use crate::fallback::DegradedReason;
use crate::timeout::DeadlineExceeded;

/// No endpoint could take the call: the cluster is empty, or every
/// endpoint was already tried, ejected (outside panic mode) or refused by
/// its circuit breaker. The counts say which, so the on-call engineer can
/// tell "discovery returned nothing" from "everything is down".
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig};
///
/// let empty = Cluster::builder().name("orders").build().unwrap();
/// let err = empty.select().unwrap_err();
/// assert!(err.is_empty_cluster());
/// assert_eq!(err.to_string(), "cluster `orders` has no endpoints");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// The cluster's name.
    pub cluster: Arc<str>,
    /// Endpoints in the cluster.
    pub endpoints: usize,
    /// Endpoints whose breaker refused (or would refuse) calls.
    pub open: usize,
    /// Endpoints ejected or marked unhealthy (not counted in panic mode).
    pub ejected: usize,
    /// Endpoints this call had already used.
    pub tried: usize,
}

impl Unavailable {
    /// Whether the cluster has no endpoints at all.
    pub fn is_empty_cluster(&self) -> bool {
        self.endpoints == 0
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.endpoints == 0 {
            return write!(f, "cluster `{}` has no endpoints", self.cluster);
        }
        write!(
            f,
            "no endpoint of cluster `{}` can take the call: {} endpoint(s), {} with an open \
             circuit breaker, {} ejected or unhealthy, {} already tried",
            self.cluster, self.endpoints, self.open, self.ejected, self.tried
        )
    }
}

impl std::error::Error for Unavailable {}

/// Why a call through a cluster strategy did not return a value.
///
/// ```
/// use tripline::cluster::ClusterError;
/// let e: ClusterError<&str> = ClusterError::Failed {
///     endpoint: "b".into(),
///     attempts: 3,
///     error: "503",
/// };
/// assert_eq!(e.to_string(), "endpoint `b` failed (attempt 3): 503");
/// assert_eq!(e.into_inner(), Some("503"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterError<E> {
    /// No endpoint could take the call (before any attempt, or before the
    /// next one when nothing was left to try and no attempt failed).
    Unavailable(Unavailable),
    /// The deadline passed, or less than the floor was left, before an attempt.
    DeadlineExceeded(DeadlineExceeded),
    /// Another endpoint was wanted but the shared retry budget is spent;
    /// `last` is the failure that would have been retried.
    BudgetExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure.
        last: Box<ClusterError<E>>,
    },
    /// The last attempt ran on `endpoint` and returned `error`.
    Failed {
        /// Where the last attempt ran.
        endpoint: EndpointId,
        /// Attempts made in all, this one included.
        attempts: u32,
        /// The call's own error, as it is.
        error: E,
    },
}

impl<E> ClusterError<E> {
    /// The call's own error, if an attempt ran and failed last.
    pub fn into_inner(self) -> Option<E> {
        match self {
            ClusterError::Failed { error, .. } => Some(error),
            ClusterError::BudgetExhausted { last, .. } => last.into_inner(),
            _ => None,
        }
    }

    /// Whether the cluster refused locally (no attempt failed last).
    pub fn is_local(&self) -> bool {
        matches!(
            self,
            ClusterError::Unavailable(_) | ClusterError::DeadlineExceeded(_)
        )
    }

    /// Attempts made.
    pub fn attempts(&self) -> u32 {
        match self {
            ClusterError::Failed { attempts, .. }
            | ClusterError::BudgetExhausted { attempts, .. } => *attempts,
            _ => 0,
        }
    }

    /// The cause, as a fallback sees it (a local refusal, or a failure).
    pub fn degraded_reason(&self) -> DegradedReason {
        match self {
            ClusterError::Unavailable(_) | ClusterError::DeadlineExceeded(_) => {
                DegradedReason::Rejected
            }
            ClusterError::BudgetExhausted { last, .. } => last.degraded_reason(),
            ClusterError::Failed { .. } => DegradedReason::Failed,
        }
    }

    /// Maps the call's own error.
    pub fn map_inner<F>(self, f: impl FnOnce(E) -> F) -> ClusterError<F> {
        match self {
            ClusterError::Unavailable(u) => ClusterError::Unavailable(u),
            ClusterError::DeadlineExceeded(d) => ClusterError::DeadlineExceeded(d),
            ClusterError::BudgetExhausted { attempts, last } => ClusterError::BudgetExhausted {
                attempts,
                last: Box::new(last.map_inner(f)),
            },
            ClusterError::Failed {
                endpoint,
                attempts,
                error,
            } => ClusterError::Failed {
                endpoint,
                attempts,
                error: f(error),
            },
        }
    }
}

impl<E> From<Unavailable> for ClusterError<E> {
    fn from(u: Unavailable) -> Self {
        ClusterError::Unavailable(u)
    }
}

impl<E: fmt::Display> fmt::Display for ClusterError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::Unavailable(u) => u.fmt(f),
            ClusterError::DeadlineExceeded(d) => d.fmt(f),
            ClusterError::BudgetExhausted { attempts, last } => write!(
                f,
                "retry budget exhausted after {attempts} attempt(s); last error: {last}"
            ),
            ClusterError::Failed {
                endpoint,
                attempts,
                error,
            } => write!(
                f,
                "endpoint `{endpoint}` failed (attempt {attempts}): {error}"
            ),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ClusterError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Unavailable(u) => Some(u),
            ClusterError::DeadlineExceeded(d) => Some(d),
            ClusterError::BudgetExhausted { last, .. } => Some(&**last),
            ClusterError::Failed { error, .. } => Some(error),
        }
    }
}
