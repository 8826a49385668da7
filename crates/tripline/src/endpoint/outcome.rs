//! What one call to one endpoint says: about the endpoint's health (for
//! its breaker and the outlier detectors), and about whether another
//! endpoint may be tried.

use std::io;

use crate::classify::Outcome;

/// The result of one attempt on one endpoint, as the cluster sees it.
///
/// Finer than the breaker's [`Outcome`] because outlier detection and
/// failover need to know *where* an error came from: an upstream 5xx, a
/// gateway error (502/503/504), or a local-origin error (the connection
/// failed; Envoy's split of "external" and "local origin" errors) — and
/// whether the request may have reached the endpoint at all, which decides
/// whether a non-idempotent request may go to another endpoint.
///
/// ```
/// use tripline::cluster::EndpointOutcome;
/// use tripline::Outcome;
///
/// assert_eq!(EndpointOutcome::from_http_status(503), EndpointOutcome::GatewayFailure);
/// assert_eq!(EndpointOutcome::from_http_status(500), EndpointOutcome::UpstreamFailure);
/// assert_eq!(EndpointOutcome::from_http_status(404), EndpointOutcome::Ignored);
/// assert_eq!(EndpointOutcome::ConnectFailure.breaker_outcome(), Outcome::Failure);
/// assert!(EndpointOutcome::ConnectFailure.never_sent());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum EndpointOutcome {
    /// The endpoint answered correctly.
    Success,
    /// A business answer (validation error, 4xx): the endpoint is healthy,
    /// and another endpoint would say the same, so it is not retried.
    /// Neutral for the breaker; a healthy answer for outlier detection.
    Ignored,
    /// The endpoint answered with an error of its own (a 5xx other than
    /// 502/503/504): the request reached it.
    UpstreamFailure,
    /// A gateway error (502, 503, 504): the request reached it (or its proxy).
    GatewayFailure,
    /// The connection could not be made (refused, connect timeout): the
    /// request never left, so even a non-idempotent request may go to
    /// another endpoint. A local-origin error.
    ConnectFailure,
    /// The connection failed after the request may have been sent (reset,
    /// read timeout): a local-origin error that a non-idempotent request
    /// must not be retried on.
    LocalOriginFailure,
}

impl EndpointOutcome {
    /// Default classification of an HTTP status: 502/503/504 gateway
    /// failures, other 5xx upstream failures, 4xx ignored, the rest success.
    pub fn from_http_status(status: u16) -> EndpointOutcome {
        match status {
            502..=504 => EndpointOutcome::GatewayFailure,
            500..=599 => EndpointOutcome::UpstreamFailure,
            400..=499 => EndpointOutcome::Ignored,
            _ => EndpointOutcome::Success,
        }
    }

    /// Default classification of an I/O error: a refused or unreachable
    /// connection is a [`ConnectFailure`](Self::ConnectFailure), anything
    /// else (reset, timeout, broken pipe) a [`LocalOriginFailure`](Self::LocalOriginFailure).
    ///
    /// ```
    /// use std::io;
    /// use tripline::cluster::EndpointOutcome;
    /// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    /// assert_eq!(EndpointOutcome::from_io_error(&refused), EndpointOutcome::ConnectFailure);
    /// ```
    pub fn from_io_error(e: &io::Error) -> EndpointOutcome {
        match e.kind() {
            io::ErrorKind::ConnectionRefused
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable => EndpointOutcome::ConnectFailure,
            _ => EndpointOutcome::LocalOriginFailure,
        }
    }

    /// What the endpoint's circuit breaker records.
    #[inline]
    pub fn breaker_outcome(self) -> Outcome {
        match self {
            EndpointOutcome::Success => Outcome::Success,
            EndpointOutcome::Ignored => Outcome::Ignored,
            _ => Outcome::Failure,
        }
    }

    /// Whether the endpoint failed (and another endpoint might do better).
    #[inline]
    pub fn is_failure(self) -> bool {
        !matches!(self, EndpointOutcome::Success | EndpointOutcome::Ignored)
    }

    /// Whether the error arose locally, on the connection, rather than
    /// from the endpoint's answer.
    #[inline]
    pub fn is_local_origin(self) -> bool {
        matches!(
            self,
            EndpointOutcome::ConnectFailure | EndpointOutcome::LocalOriginFailure
        )
    }

    /// Whether the request certainly never reached the endpoint.
    #[inline]
    pub fn never_sent(self) -> bool {
        self == EndpointOutcome::ConnectFailure
    }

    /// The snake_case name used in events and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            EndpointOutcome::Success => "success",
            EndpointOutcome::Ignored => "ignored",
            EndpointOutcome::UpstreamFailure => "upstream_failure",
            EndpointOutcome::GatewayFailure => "gateway_failure",
            EndpointOutcome::ConnectFailure => "connect_failure",
            EndpointOutcome::LocalOriginFailure => "local_origin_failure",
        }
    }
}

/// Turns an attempt's result into an [`EndpointOutcome`]; closures
/// `Fn(&Result<T, E>) -> EndpointOutcome` are classifiers.
///
/// ```
/// use tripline::cluster::{EndpointClassifier, EndpointOutcome};
///
/// let classify = |r: &Result<u16, std::io::Error>| match r {
///     Ok(status) => EndpointOutcome::from_http_status(*status),
///     Err(e) => EndpointOutcome::from_io_error(e),
/// };
/// assert_eq!(classify.classify(&Ok(502)), EndpointOutcome::GatewayFailure);
/// ```
pub trait EndpointClassifier<T, E> {
    /// The outcome of `result`.
    fn classify(&self, result: &Result<T, E>) -> EndpointOutcome;
}

impl<T, E, F> EndpointClassifier<T, E> for F
where
    F: Fn(&Result<T, E>) -> EndpointOutcome,
{
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> EndpointOutcome {
        self(result)
    }
}

/// `Ok` is a success, `Err` an upstream failure (retryable when the
/// operation is idempotent).
///
/// ```
/// use tripline::cluster::{DefaultEndpointClassifier, EndpointClassifier, EndpointOutcome};
/// assert_eq!(DefaultEndpointClassifier.classify(&Err::<(), _>("x")), EndpointOutcome::UpstreamFailure);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultEndpointClassifier;

impl<T, E> EndpointClassifier<T, E> for DefaultEndpointClassifier {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> EndpointOutcome {
        match result {
            Ok(_) => EndpointOutcome::Success,
            Err(_) => EndpointOutcome::UpstreamFailure,
        }
    }
}
