//! Throttle configuration, in the breaker's vocabulary: plain
//! structs with `Default`, serde with durations as `"10s"` and unknown keys
//! refused, validated once by [`AdaptiveThrottle::try_new`](super::AdaptiveThrottle::try_new).

use std::fmt;
use std::time::Duration;

/// Everything that shapes one adaptive throttle.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use tripline::throttle::AdaptiveThrottleConfig;
///
/// let config: AdaptiveThrottleConfig = toml::from_str(r#"
///     name = "search"
///     window = { length = "30s", buckets = 15 }
///     k = 1.5
///     max_rejection_probability = 0.8
///     minimum_requests_per_second = 5.0
/// "#).unwrap();
/// assert!(config.validate().is_ok());
/// assert_eq!(config.k, 1.5);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct AdaptiveThrottleConfig {
    /// Names the throttle in errors and logs.
    pub name: String,
    /// How far back `requests` and `accepts` are counted.
    pub window: ThrottleWindow,
    /// How many requests per accepted one the client may send before it
    /// starts rejecting locally, ≥ 1. SRE's 2.0 lets the backend see twice
    /// the traffic it accepts (so a recovering backend is noticed quickly);
    /// 1.1 sheds harder and wastes less backend work on rejections.
    pub k: f64,
    /// The most the throttle ever rejects, in [0, 1]: some traffic always
    /// reaches the backend, so its recovery is observed (and a throttle with
    /// 0 here never rejects, for shadow runs).
    pub max_rejection_probability: f64,
    /// Below this request rate over the window the throttle never rejects:
    /// a handful of overload answers is too small a sample to act on, and
    /// a low-rate client cannot overload anything. ≥ 0.
    pub minimum_requests_per_second: f64,
}

/// The time window of the throttle's counters: `length`, sliced into
/// `buckets` that expire one at a time, like the breaker's time window.
///
/// ```
/// use std::time::Duration;
/// use tripline::throttle::{AdaptiveThrottleConfig, ThrottleWindow};
///
/// // SRE's two minutes, in 10 s slices.
/// let config = AdaptiveThrottleConfig {
///     window: ThrottleWindow { length: Duration::from_secs(120), buckets: 12 },
///     ..Default::default()
/// };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct ThrottleWindow {
    /// Window length, 1 s ..= 1 h.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub length: Duration,
    /// Number of slices, 1..=120.
    pub buckets: u32,
}

impl ThrottleWindow {
    /// Shortest window.
    pub const MIN_LENGTH: Duration = Duration::from_secs(1);
    /// Longest window.
    pub const MAX_LENGTH: Duration = Duration::from_secs(3600);
    /// Most buckets.
    pub const MAX_BUCKETS: u32 = 120;
}

impl Default for ThrottleWindow {
    /// 10 s in 1 s buckets: the breaker's usual time window, so a recovered
    /// backend is trusted again within ten seconds. SRE's 2 minutes is
    /// smoother but keeps rejecting for two minutes after recovery.
    fn default() -> Self {
        ThrottleWindow {
            length: Duration::from_secs(10),
            buckets: 10,
        }
    }
}

impl Default for AdaptiveThrottleConfig {
    /// SRE's K = 2, at most 90% local rejection, inactive below 1 request/s.
    fn default() -> Self {
        AdaptiveThrottleConfig {
            name: "default".to_owned(),
            window: ThrottleWindow::default(),
            k: 2.0,
            max_rejection_probability: 0.9,
            minimum_requests_per_second: 1.0,
        }
    }
}

/// A throttle config value that can never work, naming the field and the
/// constraint.
///
/// ```
/// use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig};
///
/// let err = AdaptiveThrottle::try_new(AdaptiveThrottleConfig { k: 0.5, ..Default::default() })
///     .unwrap_err();
/// assert_eq!(err.field, "k");
/// assert_eq!(err.to_string(), "invalid throttle config: `k` must be a finite number ≥ 1, got 0.5");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid throttle config: `{field}` {constraint}")]
pub struct ThrottleConfigError {
    /// The offending key, dotted for nested values (`window.buckets`).
    pub field: String,
    /// What the value must satisfy, and what it was.
    pub constraint: String,
}

fn error(field: &str, constraint: impl fmt::Display) -> ThrottleConfigError {
    ThrottleConfigError {
        field: field.to_owned(),
        constraint: constraint.to_string(),
    }
}

impl AdaptiveThrottleConfig {
    /// Checks every field, refusing the first impossible one.
    pub fn validate(&self) -> Result<(), ThrottleConfigError> {
        if self.name.is_empty() {
            return Err(error("name", "must not be empty"));
        }
        let ThrottleWindow { length, buckets } = self.window;
        if !(ThrottleWindow::MIN_LENGTH..=ThrottleWindow::MAX_LENGTH).contains(&length) {
            return Err(error(
                "window.length",
                format_args!(
                    "must be between 1s and 1h, got {}",
                    humantime::format_duration(length)
                ),
            ));
        }
        if !(1..=ThrottleWindow::MAX_BUCKETS).contains(&buckets) {
            return Err(error(
                "window.buckets",
                format_args!(
                    "must be between 1 and {}, got {buckets}",
                    ThrottleWindow::MAX_BUCKETS
                ),
            ));
        }
        if !(self.k >= 1.0 && self.k.is_finite()) {
            return Err(error(
                "k",
                format_args!("must be a finite number ≥ 1, got {}", self.k),
            ));
        }
        let p = self.max_rejection_probability;
        if !(0.0..=1.0).contains(&p) {
            return Err(error(
                "max_rejection_probability",
                format_args!("must be a probability in [0, 1], got {p}"),
            ));
        }
        let rps = self.minimum_requests_per_second;
        if !(rps >= 0.0 && rps.is_finite()) {
            return Err(error(
                "minimum_requests_per_second",
                format_args!("must be a finite number ≥ 0, got {rps}"),
            ));
        }
        Ok(())
    }
}
