//! The two outcomes of an admission: a permit on which the backend's
//! answer is reported, or a local rejection.

use std::fmt;

use super::Inner;
use super::window::ACCEPTS;

/// Permission to send one request, on which the backend's answer is
/// reported. Dropping it reports nothing: a cancelled call, or one refused
/// by a breaker after the throttle, says nothing about overload.
///
/// ```
/// use tripline::throttle::AdaptiveThrottle;
///
/// let throttle = AdaptiveThrottle::try_new(Default::default()).unwrap();
/// let permit = throttle.try_acquire().expect("an idle throttle admits");
/// // ... send; the backend answered 200 ...
/// permit.accepted();
/// assert_eq!(throttle.metrics().window.accepts, 1);
/// ```
#[must_use = "report the backend's answer, or drop the permit to report nothing"]
pub struct ThrottlePermit<'a> {
    pub(super) inner: &'a Inner,
}

impl ThrottlePermit<'_> {
    /// The backend processed the request (whatever the business result).
    #[inline]
    pub fn accepted(self) {
        self.inner.record(Some(ACCEPTS));
    }

    /// The backend refused the request as overloaded (429, 503,
    /// `RESOURCE_EXHAUSTED`).
    #[inline]
    pub fn rejected_by_backend(self) {
        self.inner.record(None);
    }
}

impl fmt::Debug for ThrottlePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottlePermit")
            .field("throttle", &self.inner.name)
            .finish()
    }
}

/// A [`ThrottlePermit`] that owns a handle on its throttle (see
/// [`AdaptiveThrottle::try_acquire_owned`](super::AdaptiveThrottle::try_acquire_owned)).
/// Dropping it reports nothing, as for the borrowed permit.
#[must_use = "report the backend's answer, or drop the permit to report nothing"]
pub struct OwnedThrottlePermit {
    pub(super) throttle: super::AdaptiveThrottle,
}

impl OwnedThrottlePermit {
    /// The backend processed the request (whatever the business result).
    pub fn accepted(self) {
        self.borrowed().accepted();
    }

    /// The backend refused the request as overloaded (429, 503,
    /// `RESOURCE_EXHAUSTED`).
    pub fn rejected_by_backend(self) {
        self.borrowed().rejected_by_backend();
    }

    /// The same permit, borrowed: it reports as [`ThrottlePermit`] does.
    fn borrowed(&self) -> ThrottlePermit<'_> {
        ThrottlePermit {
            inner: &self.throttle.inner,
        }
    }
}

impl fmt::Debug for OwnedThrottlePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedThrottlePermit")
            .field("throttle", &self.throttle.inner.name)
            .finish()
    }
}

/// A request shed locally by the throttle: it never reached the backend.
///
/// ```
/// use tripline::throttle::Throttled;
///
/// let e = Throttled { rejection_probability: 0.25 };
/// assert_eq!(e.to_string(), "request throttled locally: backend overloaded (rejection probability 0.25)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttled {
    /// The rejection probability in force when the request was shed.
    pub rejection_probability: f64,
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request throttled locally: backend overloaded (rejection probability {:.2})",
            self.rejection_probability
        )
    }
}

impl std::error::Error for Throttled {}
