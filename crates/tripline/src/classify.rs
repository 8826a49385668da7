//! Classification: which results say something about the dependency's health.
//!
//! The first rule of breaker design: a call that the
//! dependency handled correctly is a success even when the answer is "no".
//! Validation errors, 4xx responses, "insufficient balance" — retrying them
//! or asking another instance would give the same answer, so they are
//! [`Outcome::Ignored`]. Connect errors, timeouts, 5xx and "busy" signals
//! are [`Outcome::Failure`]. A 429 is a throttle signal for an
//! [`AdaptiveThrottle`](crate) rather than a failure.
//!
//! A classifier sees the whole `Result<T, E>`, because many dependencies
//! report failure inside a successful response (a status field in the body).
//! Closures `Fn(&Result<T, E>) -> Outcome` are classifiers.

/// What a finished call tells the breaker.
///
/// The breaker's own rejections are not an outcome: they never reach the
/// health signal (a rejection says nothing about the dependency).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Outcome {
    /// The dependency did its job.
    Success,
    /// The dependency is unhealthy: counts toward the failure rate.
    Failure,
    /// Not evidence either way (a business error, a caller mistake); counted
    /// in metrics, kept out of the window, and a probe ending this way frees
    /// its half-open slot without a verdict.
    Ignored,
}

impl Outcome {
    /// Default classification of an HTTP status: 5xx (and 408) are failures,
    /// 429 and other 4xx are ignored (the caller's fault, or a throttle
    /// signal), everything else is a success.
    ///
    /// ```
    /// use tripline::Outcome;
    /// assert_eq!(Outcome::from_http_status(503), Outcome::Failure);
    /// assert_eq!(Outcome::from_http_status(404), Outcome::Ignored);
    /// assert_eq!(Outcome::from_http_status(200), Outcome::Success);
    /// ```
    pub fn from_http_status(status: u16) -> Outcome {
        match status {
            408 | 500..=599 => Outcome::Failure,
            400..=499 => Outcome::Ignored,
            _ => Outcome::Success,
        }
    }

    /// The snake_case name used in metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
        }
    }
}

/// Turns a call's result into an [`Outcome`].
///
/// ```
/// use tripline::{Classifier, Outcome};
///
/// #[derive(Debug)]
/// enum PayError { InsufficientFunds, Unavailable }
///
/// let classify = |r: &Result<u32, PayError>| match r {
///     Ok(_) => Outcome::Success,
///     Err(PayError::InsufficientFunds) => Outcome::Ignored,
///     Err(PayError::Unavailable) => Outcome::Failure,
/// };
/// assert_eq!(classify.classify(&Err(PayError::InsufficientFunds)), Outcome::Ignored);
/// ```
pub trait Classifier<T, E> {
    /// The outcome of `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F> Classifier<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// `Ok` is a success, `Err` a failure.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClassifier;

impl<T, E> Classifier<T, E> for DefaultClassifier {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}
