//! Timeouts and deadlines: every remote call must end, and no layer should
//! work for a caller who has already given up.
//!
//! Without a timeout a slow dependency never *fails*, so the breaker never
//! trips while threads pile up. And timeouts that are not
//! cut from one end-to-end budget waste work: A gives up after 3 s while B
//! and C keep working for nobody. So tripline has two:
//!
//! * a **per-attempt timeout** ([`TimeoutConfig::per_attempt`]) bounding
//!   one attempt, so the breaker sees slowness as failure; and
//! * an overall [`Deadline`] that travels with the request — in a
//!   task-local context ([`Deadline::current`], [`Deadline::scope`],
//!   [`Deadline::scope_future`]), as an explicit parameter, and across
//!   processes in an HTTP header carrying the *remaining* budget
//!   ([`DEADLINE_HEADER`], and gRPC's `grpc-timeout`, read on the way in
//!   and written for a gRPC peer). Each
//!   layer checks the remaining budget before it starts and fails fast when
//!   less than its floor ([`TimeoutConfig::min_remaining`]) is left.
//!
//! Synchronous code cannot be preempted: the sync pipeline hands each
//! attempt its deadline (to pass to the client's own socket timeout) and
//! turns an attempt that overran into [`Timeout`] after it returns. Async
//! code is raced against a [`Timer`] and dropped when it fires.

mod deadline;
mod timer;

use std::time::Duration;

pub use deadline::{
    DEADLINE_HEADER, Deadline, GRPC_TIMEOUT_HEADER, MalformedDeadline, WithDeadline,
    format_grpc_timeout, format_timeout_ms, malformed_header_count, parse_grpc_timeout,
    parse_timeout_ms,
};
pub(crate) use timer::default_timer;
pub use timer::{SharedTimer, Sleep, TimeoutFuture, Timer, timeout};
#[cfg(feature = "tokio")]
pub use timer::{TokioClock, TokioTimer};

use crate::error::PolicyConfigError;
pub use crate::error::{DeadlineExceeded, Timeout};

/// Per-attempt timeout, overall deadline and the fail-fast floor.
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::TimeoutConfig;
///
/// let bad = TimeoutConfig {
///     per_attempt: Some(Duration::from_secs(5)),
///     overall: Some(Duration::from_secs(2)),
///     ..Default::default()
/// };
/// assert_eq!(bad.validate().unwrap_err().field, "per_attempt");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct TimeoutConfig {
    /// Bound on one attempt; `None` for none (then the dependency's own
    /// client timeout must exist, or the breaker is blind to slowness).
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub per_attempt: Option<Duration>,
    /// Bound on the whole logical call, retries and backoff included, when
    /// the request carries no tighter deadline of its own.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub overall: Option<Duration>,
    /// Fail fast, without calling, when less than this is left of the
    /// deadline: the dependency could not answer in time.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub min_remaining: Duration,
}

impl Default for TimeoutConfig {
    /// No per-attempt timeout, no overall deadline, a 1 ms floor.
    fn default() -> Self {
        TimeoutConfig {
            per_attempt: None,
            overall: None,
            min_remaining: Duration::from_millis(1),
        }
    }
}

impl TimeoutConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let err = |field, c: String| Err(PolicyConfigError::new("timeout", field, c));
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        if self.per_attempt.is_some_and(|d| d.is_zero()) {
            return err("per_attempt", "must be positive, got 0s".into());
        }
        if self.overall.is_some_and(|d| d.is_zero()) {
            return err("overall", "must be positive, got 0s".into());
        }
        if let (Some(p), Some(o)) = (self.per_attempt, self.overall)
            && p > o
        {
            return err(
                "per_attempt",
                format!(
                    "must not exceed `overall` ({}), got {}: the deadline would always fire first",
                    fmt(o),
                    fmt(p)
                ),
            );
        }
        if let Some(o) = self.overall
            && self.min_remaining >= o
        {
            return err(
                "min_remaining",
                format!(
                    "must be below `overall` ({}), got {}: every call would fail fast",
                    fmt(o),
                    fmt(self.min_remaining)
                ),
            );
        }
        Ok(())
    }
}
