//! A route's fault injection, for fault drills: answers and delays the
//! proxy makes up as if an endpoint had produced them, so the route's
//! breakers, outlier detection and retries can be watched reacting.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Faults injected into a route's tries (Envoy's fault filter, applied
/// per try at the upstream side). Off unless written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSection {
    /// Answer a share of tries with a status, as if the endpoint had.
    pub abort: Option<AbortSection>,
    /// Hold a share of tries before sending them (the wait counts against
    /// the per-try timeout and the deadline, as a slow endpoint's would).
    pub delay: Option<DelaySection>,
    /// Fail a share of tries as if the endpoint refused the connection:
    /// nothing is sent, and the try counts as a connect failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refuse: Option<ShareSection>,
    /// Break a share of answers after their first bytes, as if the
    /// endpoint reset the connection mid-answer: the client gets a cut
    /// answer and the try counts as a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset: Option<ShareSection>,
    /// Never answer a share of tries, as an endpoint that accepts and
    /// hangs: only the per-try timeout or the deadline ends them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<ShareSection>,
    /// Only tries sent to this endpoint (`host:port`, as written in the
    /// cluster): a drill on one bad replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Only requests carrying this header (any value): a drill on marked
    /// traffic while the rest flows untouched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// An injected answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortSection {
    /// The status answered (200–599).
    pub status: u16,
    /// The share of matching tries aborted, 0–100.
    #[serde(default = "all")]
    pub percent: f64,
}

/// An injected wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelaySection {
    /// How long a delayed try waits before it is sent.
    #[serde(with = "tripline::clock::duration_serde")]
    pub duration: Duration,
    /// The share of matching tries delayed, 0–100.
    #[serde(default = "all")]
    pub percent: f64,
}

/// A fault that needs nothing but how often: `refuse`, `reset`, `hang`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareSection {
    /// The share of matching tries it hits, 0–100.
    #[serde(default = "all")]
    pub percent: f64,
}

fn all() -> f64 {
    100.0
}

impl FaultSection {
    /// Refuses a fault that could not act as written; `at` locates it,
    /// `endpoints` are its cluster's (a scoped fault must name one).
    pub fn validate(&self, at: &str, endpoints: &[String]) -> Result<(), ConfigError> {
        let percent = |field: &str, p: f64| {
            if (0.0..=100.0).contains(&p) {
                Ok(())
            } else {
                Err(ConfigError::invalid(
                    format!("{at}.{field}.percent"),
                    format!("must be within 0-100, got {p}"),
                ))
            }
        };
        let shares = [
            ("refuse", &self.refuse),
            ("reset", &self.reset),
            ("hang", &self.hang),
        ];
        if self.abort.is_none() && self.delay.is_none() && shares.iter().all(|(_, s)| s.is_none()) {
            return Err(ConfigError::invalid(
                at,
                "needs an abort, a delay, a refuse, a reset or a hang (a fault that injects nothing is a typo)",
            ));
        }
        for (field, share) in shares {
            if let Some(share) = share {
                percent(field, share.percent)?;
            }
        }
        if let Some(abort) = &self.abort {
            if !(200..=599).contains(&abort.status) {
                return Err(ConfigError::invalid(
                    format!("{at}.abort.status"),
                    format!(
                        "must be an HTTP status within 200-599, got {}",
                        abort.status
                    ),
                ));
            }
            percent("abort", abort.percent)?;
        }
        if let Some(delay) = &self.delay {
            if delay.duration.is_zero() {
                return Err(ConfigError::invalid(
                    format!("{at}.delay.duration"),
                    "must be more than zero",
                ));
            }
            percent("delay", delay.percent)?;
        }
        if let Some(endpoint) = &self.endpoint
            && !endpoints.contains(endpoint)
        {
            return Err(ConfigError::invalid(
                format!("{at}.endpoint"),
                format!("{endpoint:?} is not an endpoint of the route's cluster"),
            ));
        }
        if let Some(header) = &self.header
            && http::HeaderName::from_bytes(header.as_bytes()).is_err()
        {
            return Err(ConfigError::invalid(
                format!("{at}.header"),
                format!("{header:?} is not a header name"),
            ));
        }
        Ok(())
    }
}
