//! The core's policy errors, in one module below every policy.
//!
//! A caller (and the on-call engineer after them) must be able to tell "a
//! local policy refused" from "the dependency failed", and which policy
//! refused and why: every variant of [`PolicyError`] but
//! [`Inner`](PolicyError::Inner) is a local decision, with the data needed
//! to act on it (`retry_after`, the remaining budget, the limit that was hit).
//!
//! Why here and not beside each policy: the pipeline's error names every
//! policy's refusal, and every policy's fallible entry point returns the
//! pipeline's error or its config error. With the types beside their
//! policies, `budget`, `bulkhead`, `pipeline`, `retry` and `timeout`
//! imported each other in one circle. Here they import only the breaker's
//! state and the clock, and every policy imports them; each policy still
//! re-exports its own refusal (`timeout::Timeout`, `bulkhead::BulkheadFull`,
//! `pipeline::PolicyError`, …), so the public paths are unchanged.

use std::fmt;
use std::time::Duration;

use crate::breaker::Rejected;

/// A policy config value that can never work, naming the policy, the field
/// and the constraint.
///
/// ```
/// use tripline::retry::RetryConfig;
/// let err = RetryConfig { max_attempts: 0, ..Default::default() }.validate().unwrap_err();
/// assert_eq!(err.to_string(), "invalid retry config: `max_attempts` must be at least 1, got 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {policy} config: `{field}` {constraint}")]
pub struct PolicyConfigError {
    /// Which policy (`retry`, `retry_budget`, `timeout`, `bulkhead`, …).
    pub policy: &'static str,
    /// The offending key (`max_attempts`, `per_attempt`, …).
    pub field: &'static str,
    /// What the value must satisfy, and what it was.
    pub constraint: String,
}

impl PolicyConfigError {
    pub(crate) fn new(
        policy: &'static str,
        field: &'static str,
        constraint: impl Into<String>,
    ) -> Self {
        PolicyConfigError {
            policy,
            field,
            constraint: constraint.into(),
        }
    }
}

/// The breaker's refusal under the name the pipeline and tower layers
/// used before the core had one vocabulary for it.
///
/// A breaker refusing a call is one fact, whichever API met it: the
/// breaker's own `call`, a pipeline, or a tower layer. It is one type,
/// [`Rejected`] (the open breaker's hot path hands it out at the full call
/// rate, so it stays two words); this alias keeps old code compiling while
/// it moves over.
#[deprecated(
    since = "0.3.0",
    note = "the breaker's refusal is one type everywhere: use `tripline::Rejected` \
            (`state()` and `retry_after()` instead of the fields)"
)]
pub type CircuitOpen = Rejected;

/// Why a call through the pipeline (or one policy) did not return a value.
///
/// ```
/// use tripline::pipeline::PolicyError;
///
/// let e: PolicyError<&str> = PolicyError::Inner("connection reset");
/// assert!(!e.is_local());
/// assert_eq!(e.layer(), "inner");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyError<E> {
    /// The circuit breaker refused: fail fast, do not retry before
    /// [`Rejected::retry_after`]. The same refusal a breaker's own `call`
    /// and the tower layer give.
    CircuitOpen(Rejected),
    /// A retry was wanted but the retry budget is spent; `last` is the
    /// attempt's error that would have been retried.
    BudgetExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<PolicyError<E>>,
    },
    /// The bulkhead had no free slot (and no queue room or wait time left).
    BulkheadFull(BulkheadFull),
    /// The overall deadline passed, or too little of it was left to start.
    DeadlineExceeded(DeadlineExceeded),
    /// One attempt outlived the per-attempt timeout.
    Timeout(Timeout),
    /// The call ran and returned this error.
    Inner(E),
}

impl<E> PolicyError<E> {
    /// Whether a local policy refused (everything but [`Inner`](Self::Inner)
    /// and a timed-out attempt, which did reach the dependency).
    pub fn is_local(&self) -> bool {
        match self {
            PolicyError::CircuitOpen(_)
            | PolicyError::BulkheadFull(_)
            | PolicyError::DeadlineExceeded(_) => true,
            PolicyError::BudgetExhausted { .. } | PolicyError::Timeout(_) => false,
            PolicyError::Inner(_) => false,
        }
    }

    /// The layer that produced the error, as a stable metrics label.
    pub fn layer(&self) -> &'static str {
        match self {
            PolicyError::CircuitOpen(_) => "circuit_breaker",
            PolicyError::BudgetExhausted { .. } => "retry_budget",
            PolicyError::BulkheadFull(_) => "bulkhead",
            PolicyError::DeadlineExceeded(_) => "deadline",
            PolicyError::Timeout(_) => "timeout",
            PolicyError::Inner(_) => "inner",
        }
    }

    /// The dependency's own error, if the last attempt ran and failed.
    pub fn into_inner(self) -> Option<E> {
        match self {
            PolicyError::Inner(e) => Some(e),
            PolicyError::BudgetExhausted { last, .. } => last.into_inner(),
            _ => None,
        }
    }

    /// Maps the inner error.
    pub fn map_inner<F>(self, f: impl FnOnce(E) -> F) -> PolicyError<F> {
        match self {
            PolicyError::CircuitOpen(c) => PolicyError::CircuitOpen(c),
            PolicyError::BudgetExhausted { attempts, last } => PolicyError::BudgetExhausted {
                attempts,
                last: Box::new(last.map_inner(f)),
            },
            PolicyError::BulkheadFull(b) => PolicyError::BulkheadFull(b),
            PolicyError::DeadlineExceeded(d) => PolicyError::DeadlineExceeded(d),
            PolicyError::Timeout(t) => PolicyError::Timeout(t),
            PolicyError::Inner(e) => PolicyError::Inner(f(e)),
        }
    }
}

impl<E: fmt::Display> fmt::Display for PolicyError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::CircuitOpen(c) => c.fmt(f),
            PolicyError::BudgetExhausted { attempts, last } => write!(
                f,
                "retry budget exhausted after {attempts} attempt(s); last error: {last}"
            ),
            PolicyError::BulkheadFull(b) => b.fmt(f),
            PolicyError::DeadlineExceeded(d) => d.fmt(f),
            PolicyError::Timeout(t) => t.fmt(f),
            PolicyError::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for PolicyError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyError::CircuitOpen(c) => Some(c),
            PolicyError::BudgetExhausted { last, .. } => Some(&**last),
            PolicyError::BulkheadFull(b) => Some(b),
            PolicyError::DeadlineExceeded(d) => Some(d),
            PolicyError::Timeout(t) => Some(t),
            PolicyError::Inner(e) => Some(e),
        }
    }
}

/// The bulkhead had no free slot, and no queue place or wait time left.
///
/// ```
/// use tripline::bulkhead::BulkheadFull;
/// let e = BulkheadFull { max_concurrent: 4, queued: false };
/// assert_eq!(e.to_string(), "bulkhead full: 4 calls in flight");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BulkheadFull {
    /// The limit that was hit.
    pub max_concurrent: u32,
    /// Whether the call waited in the queue first (and timed out there).
    pub queued: bool,
}

impl fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bulkhead full: {} calls in flight", self.max_concurrent)?;
        if self.queued {
            f.write_str(" (waited in queue until max_wait)")?;
        }
        Ok(())
    }
}

impl std::error::Error for BulkheadFull {}

/// The per-attempt timeout fired: the attempt ran too long and was
/// abandoned (async) or discarded (sync).
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::Timeout;
/// assert_eq!(Timeout { after: Duration::from_millis(250) }.to_string(), "attempt timed out after 250ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeout {
    /// The timeout that fired.
    pub after: Duration,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "attempt timed out after {}",
            humantime::format_duration(self.after)
        )
    }
}

impl std::error::Error for Timeout {}

/// The overall deadline passed, or less than the floor was left to start:
/// the result would reach nobody, so the call was not made (or abandoned).
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::DeadlineExceeded;
/// let e = DeadlineExceeded { remaining: Duration::from_millis(3), floor: Duration::from_millis(10) };
/// assert_eq!(e.to_string(), "deadline exceeded: 3ms left, below the 10ms floor");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeadlineExceeded {
    /// Budget left when the layer refused (zero once the deadline passed).
    pub remaining: Duration,
    /// The floor the remaining budget fell below.
    pub floor: Duration,
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.remaining.is_zero() {
            f.write_str("deadline exceeded")
        } else {
            write!(
                f,
                "deadline exceeded: {} left, below the {} floor",
                humantime::format_duration(self.remaining),
                humantime::format_duration(self.floor)
            )
        }
    }
}

impl std::error::Error for DeadlineExceeded {}
