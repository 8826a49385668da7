//! What a result says about retrying: the `retry_on` classifier and server
//! pushback.
//!
//! The classifier sees the whole `Result`, like the breaker's, because
//! whether to retry depends on the error's kind (a 503 yes, a 400 never) and
//! sometimes on a successful response's body. A server can also speak:
//! HTTP's `Retry-After` ("not before this") and gRPC's
//! `grpc-retry-pushback-ms` ("wait this long", or a negative value for "do
//! not retry at all"). Pushback is obeyed over the local backoff: the server
//! knows its own recovery time better than the client's guess.

use std::time::Duration;

/// The verdict on one attempt's result.
///
/// ```
/// use std::time::Duration;
/// use tripline::retry::RetryDecision;
///
/// assert_eq!(RetryDecision::from_retry_after("120"), RetryDecision::RetryAfter(Duration::from_secs(120)));
/// assert_eq!(RetryDecision::from_grpc_pushback("-1"), RetryDecision::DoNotRetry);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryDecision {
    /// The result is final (a success, or an error retrying cannot fix).
    Done,
    /// Retry after the policy's backoff.
    Retry,
    /// Retry, but not before this long (server pushback); the wait is the
    /// longer of this and the backoff.
    RetryAfter(Duration),
    /// The server asked not to be retried: the result is final and the
    /// refusal is counted as `pushback`.
    DoNotRetry,
}

impl RetryDecision {
    /// From an HTTP `Retry-After` value: delay-seconds or an HTTP-date.
    /// An unparsable value means a plain [`Retry`](Self::Retry).
    pub fn from_retry_after(value: &str) -> RetryDecision {
        let v = value.trim();
        if let Ok(secs) = v.parse::<u64>() {
            return RetryDecision::RetryAfter(Duration::from_secs(secs));
        }
        match httpdate::parse_http_date(v) {
            Ok(at) => RetryDecision::RetryAfter(crate::clock::duration_until_system_time(at)),
            Err(_) => RetryDecision::Retry,
        }
    }

    /// From gRPC's `grpc-retry-pushback-ms`: a non-negative integer is the
    /// wait; anything else (negative, malformed) means do not retry, as the
    /// gRPC retry design (A6) specifies.
    pub fn from_grpc_pushback(value: &str) -> RetryDecision {
        match value.trim().parse::<i64>() {
            Ok(ms) if ms >= 0 => RetryDecision::RetryAfter(Duration::from_millis(ms as u64)),
            _ => RetryDecision::DoNotRetry,
        }
    }

    /// Whether the decision asks for another attempt.
    pub fn wants_retry(self) -> bool {
        matches!(self, RetryDecision::Retry | RetryDecision::RetryAfter(_))
    }
}

/// Decides from an attempt's whole result whether to retry.
///
/// Closures `Fn(&Result<T, E>) -> RetryDecision` implement it.
///
/// ```
/// use tripline::retry::{RetryClassifier, RetryDecision};
///
/// let retry_on = |r: &Result<u16, u16>| match r {
///     Err(503) => RetryDecision::Retry,
///     _ => RetryDecision::Done,
/// };
/// assert_eq!(retry_on.decide(&Err(503)), RetryDecision::Retry);
/// assert_eq!(retry_on.decide(&Err(400)), RetryDecision::Done);
/// ```
pub trait RetryClassifier<T, E> {
    /// The decision on `result`.
    fn decide(&self, result: &Result<T, E>) -> RetryDecision;
}

impl<T, E, F> RetryClassifier<T, E> for F
where
    F: Fn(&Result<T, E>) -> RetryDecision,
{
    #[inline]
    fn decide(&self, result: &Result<T, E>) -> RetryDecision {
        self(result)
    }
}

/// Retries every `Err`, never an `Ok`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RetryOnError;

impl<T, E> RetryClassifier<T, E> for RetryOnError {
    #[inline]
    fn decide(&self, result: &Result<T, E>) -> RetryDecision {
        match result {
            Ok(_) => RetryDecision::Done,
            Err(_) => RetryDecision::Retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushback_values() {
        assert_eq!(
            RetryDecision::from_grpc_pushback("250"),
            RetryDecision::RetryAfter(Duration::from_millis(250))
        );
        assert_eq!(
            RetryDecision::from_grpc_pushback("soon"),
            RetryDecision::DoNotRetry
        );
        assert_eq!(
            RetryDecision::from_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            RetryDecision::RetryAfter(Duration::ZERO),
            "a date in the past: retry now"
        );
        assert_eq!(
            RetryDecision::from_retry_after("whenever"),
            RetryDecision::Retry
        );
    }
}
