//! Breaker configuration: one vocabulary for the library, the simulator's
//! scenario files and the proxy.
//!
//! Plain structs with `Default`, (de)serialised with serde when the `serde`
//! feature is on (durations as `"5s"`, rates as fractions 0.0–1.0, unknown
//! keys refused), and validated once when a breaker is built. Validation
//! refuses hard contradictions with an error naming the field and the
//! constraint, and returns softer ones as warnings.

use std::fmt;
use std::time::Duration;

mod adaptive;
#[cfg(feature = "config-files")]
mod file;
mod text;

pub use super::backoff::OpenDuration;
pub use adaptive::{Cooldown, SlowCallBaseline, WarmUp, WarmUpMode};
#[cfg(feature = "config-files")]
pub use file::{ConfigFileError, ConfigFormat};
pub use text::{InvalidUtf8, utf8_text};

/// Everything that shapes one breaker's decisions.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use tripline::CircuitBreakerConfig;
///
/// let config: CircuitBreakerConfig = toml::from_str(r#"
///     name = "payments"
///     window = { kind = "time", length = "10s", buckets = 10 }
///     minimum_calls = 20
///     failure_rate_threshold = 0.5
///     slow_call_duration = "2s"
///     slow_call_rate_threshold = 0.8
///     open_duration = "5s"
///     half_open = { policy = "permits", calls = 10, failure_rate_threshold = 0.2 }
/// "#).unwrap();
/// assert!(config.validate().unwrap().is_empty());
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct CircuitBreakerConfig {
    /// Names the breaker in events, metrics and errors.
    pub name: String,
    /// What the trip decision looks at: the last N calls or the last T seconds.
    pub window: WindowConfig,
    /// Below this many calls in the window the breaker never trips: small
    /// samples give meaningless rates.
    pub minimum_calls: u32,
    /// Trip when failures / calls ≥ this (0, 1].
    pub failure_rate_threshold: f64,
    /// A call at least this long is slow; `None` switches slow-call
    /// detection off.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub slow_call_duration: Option<Duration>,
    /// Trip when slow calls / calls ≥ this (0, 1].
    pub slow_call_rate_threshold: f64,
    /// How long the breaker stays open before probing: fixed or backoff.
    pub open_duration: OpenDuration,
    /// How half-open probes are admitted and judged.
    pub half_open: HalfOpenPolicy,
    /// An unsettled half-open round returns to open after this long, so a
    /// probe that never finishes cannot pin the breaker. Checked on every
    /// call in half-open, free probe slots or not. Under the `ramp` policy
    /// it bounds each step (a ramp of several steps is meant to take longer
    /// than one round), and `step_duration` must be shorter than it.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub max_half_open_duration: Option<Duration>,
    /// Expected call rate, used only to warn when a time window can never
    /// collect `minimum_calls`.
    pub expected_calls_per_second: Option<f64>,
    /// Hysteresis: no automatic transition sooner than this after the last
    /// one, so a breaker near its threshold cannot flap.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub min_state_duration: Option<Duration>,
    /// A stricter threshold for a while after recovering.
    pub cooldown: Option<Cooldown>,
    /// No trips (or relaxed thresholds) for a while after creation or a
    /// config change.
    pub warm_up: Option<WarmUp>,
    /// A learned slow-call threshold instead of `slow_call_duration`.
    pub slow_call: Option<SlowCallBaseline>,
    /// A half-open probe fails when it is slower than the slow-call
    /// threshold × this (≥ 1): relaxed, because a recovering dependency is
    /// often slow before it is fast again, but not blind,
    /// or a dependency that only turned slow would flap closed and open.
    pub slow_probe_factor: f64,
}

impl Default for CircuitBreakerConfig {
    /// Conservative defaults (better to trip too late than
    /// by mistake): 100-call window, 20 calls minimum, 50% failures, slow
    /// detection off, 5 s open, 5 probes at a stricter 20%, 60 s half-open cap.
    fn default() -> Self {
        CircuitBreakerConfig {
            name: "default".to_owned(),
            window: WindowConfig::Count { size: 100 },
            minimum_calls: 20,
            failure_rate_threshold: 0.5,
            slow_call_duration: None,
            slow_call_rate_threshold: 1.0,
            open_duration: OpenDuration::Fixed(Duration::from_secs(5)),
            half_open: HalfOpenPolicy::Permits {
                calls: 5,
                failure_rate_threshold: 0.2,
            },
            max_half_open_duration: Some(Duration::from_secs(60)),
            expected_calls_per_second: None,
            min_state_duration: None,
            cooldown: None,
            warm_up: None,
            slow_call: None,
            slow_probe_factor: 1.5,
        }
    }
}

/// The sliding window behind the trip decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum WindowConfig {
    /// The last `size` outcomes: a constant sample, no sense of time. For
    /// steady high-rate traffic.
    Count {
        /// Number of outcomes kept, 1..=30 000.
        size: u32,
    },
    /// The outcomes of the last `length`, in `buckets` slices: a sense of
    /// time, a varying sample. The general default.
    Time {
        /// Window length, 1 s ..= 1 h.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        length: Duration,
        /// Number of slices, 1..=120; the window slides one slice at a time.
        buckets: u32,
    },
}

impl WindowConfig {
    /// Largest count window: aggregates are packed in 16-bit signed fields.
    pub const MAX_COUNT: u32 = 30_000;
    /// Most buckets in a time window.
    pub const MAX_BUCKETS: u32 = 120;
    /// Shortest time window (aliasing of bucket laps needs ≥ 1 s, see
    /// `window/time.rs`).
    pub const MIN_LENGTH: Duration = Duration::from_secs(1);
    /// Longest time window.
    pub const MAX_LENGTH: Duration = Duration::from_secs(3600);
}

/// How probes are admitted and judged while half-open.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum HalfOpenPolicy {
    /// One probe at a time; any probe failure reopens; `successes`
    /// consecutive successes close. Gentlest on a recovering dependency.
    Consecutive {
        /// Successes needed to close, 1..=10 000.
        successes: u32,
    },
    /// Up to `calls` probes in this half-open round (a total, not a
    /// concurrency limit); reopen as soon as failures / calls reaches
    /// `failure_rate_threshold`, close when all `calls` have finished below it.
    Permits {
        /// Probes in the round, 1..=10 000.
        calls: u32,
        /// The round's own, usually stricter, threshold (0, 1].
        failure_rate_threshold: f64,
    },
    /// Admit a rising share of traffic — `steps[0]` of calls for
    /// `step_duration`, then `steps[1]`, … up to 1.0 — judging each step on
    /// its own sample; reopen on a failed step, close after the last. The
    /// gentlest recovery for dependencies that must rebuild caches or pools.
    Ramp {
        /// Shares of traffic, strictly increasing, ending at 1.0.
        steps: Vec<f64>,
        /// How long each step lasts (at least; a step also needs
        /// `minimum_calls_per_step` outcomes before it is judged).
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        step_duration: Duration,
        /// A step fails when failures / calls reaches this (0, 1].
        failure_rate_threshold: f64,
        /// Outcomes a step needs before it can pass.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        minimum_calls_per_step: u32,
    },
}

#[cfg(feature = "serde")]
fn one() -> u32 {
    1
}

impl HalfOpenPolicy {
    /// Most probes a policy may ask for.
    pub const MAX_PROBES: u32 = 10_000;

    /// How many probe outcomes the policy needs to decide.
    pub fn probes(&self) -> u32 {
        match self {
            HalfOpenPolicy::Consecutive { successes } => *successes,
            HalfOpenPolicy::Permits { calls, .. } => *calls,
            HalfOpenPolicy::Ramp {
                minimum_calls_per_step,
                ..
            } => *minimum_calls_per_step,
        }
    }

    /// The failure threshold the policy closes under, if it has one.
    pub fn failure_rate_threshold(&self) -> Option<f64> {
        match self {
            HalfOpenPolicy::Consecutive { .. } => None,
            HalfOpenPolicy::Permits {
                failure_rate_threshold,
                ..
            }
            | HalfOpenPolicy::Ramp {
                failure_rate_threshold,
                ..
            } => Some(*failure_rate_threshold),
        }
    }
}

/// A config value that can never work, naming the field and the constraint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid breaker config: `{field}` {constraint}")]
pub struct ConfigError {
    /// The offending key, dotted for nested values (`half_open.calls`).
    pub field: String,
    /// What the value must satisfy, and what it was.
    pub constraint: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, constraint: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            constraint: constraint.into(),
        }
    }
}

/// A config value that works but probably not as intended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The key the warning is about.
    pub field: String,
    /// What is likely wrong and why.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

pub(crate) fn check_rate(field: &str, v: f64) -> Result<(), ConfigError> {
    if v > 0.0 && v <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::new(
            field,
            format!("must be a fraction in (0, 1], got {v}"),
        ))
    }
}

pub(crate) fn check_duration(
    field: &str,
    d: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ConfigError> {
    if d < min || d > max || d.is_zero() {
        return Err(ConfigError::new(
            field,
            format!(
                "must be between {} and {}, got {}",
                humantime::format_duration(min.max(Duration::from_nanos(1))),
                humantime::format_duration(max),
                humantime::format_duration(d)
            ),
        ));
    }
    Ok(())
}

fn check_range(field: &str, v: u32, min: u32, max: u32) -> Result<(), ConfigError> {
    if v < min || v > max {
        return Err(ConfigError::new(
            field,
            format!("must be between {min} and {max}, got {v}"),
        ));
    }
    Ok(())
}

/// Longest open duration or backoff cap accepted: a day.
pub const MAX_OPEN_DURATION: Duration = Duration::from_secs(86_400);

impl CircuitBreakerConfig {
    /// Checks every field; hard contradictions are errors, soft ones warnings.
    pub fn validate(&self) -> Result<Vec<ConfigWarning>, ConfigError> {
        let mut warnings = Vec::new();
        if self.name.is_empty() {
            return Err(ConfigError::new("name", "must not be empty"));
        }
        match self.window {
            WindowConfig::Count { size } => {
                check_range("window.size", size, 1, WindowConfig::MAX_COUNT)?
            }
            WindowConfig::Time { length, buckets } => {
                check_duration(
                    "window.length",
                    length,
                    WindowConfig::MIN_LENGTH,
                    WindowConfig::MAX_LENGTH,
                )?;
                check_range("window.buckets", buckets, 1, WindowConfig::MAX_BUCKETS)?;
            }
        }
        check_range("minimum_calls", self.minimum_calls, 1, u32::MAX)?;
        check_rate("failure_rate_threshold", self.failure_rate_threshold)?;
        check_rate("slow_call_rate_threshold", self.slow_call_rate_threshold)?;
        if let Some(d) = self.slow_call_duration {
            check_duration(
                "slow_call_duration",
                d,
                Duration::from_nanos(1),
                MAX_OPEN_DURATION,
            )?;
        }
        self.open_duration.validate("open_duration")?;
        match &self.half_open {
            HalfOpenPolicy::Consecutive { successes } => check_range(
                "half_open.successes",
                *successes,
                1,
                HalfOpenPolicy::MAX_PROBES,
            )?,
            HalfOpenPolicy::Permits {
                calls,
                failure_rate_threshold,
            } => {
                check_range("half_open.calls", *calls, 1, HalfOpenPolicy::MAX_PROBES)?;
                check_rate("half_open.failure_rate_threshold", *failure_rate_threshold)?;
            }
            HalfOpenPolicy::Ramp {
                steps,
                step_duration,
                failure_rate_threshold,
                minimum_calls_per_step,
            } => adaptive::validate_ramp(
                steps,
                *step_duration,
                *failure_rate_threshold,
                *minimum_calls_per_step,
            )?,
        }
        if let Some(d) = self.max_half_open_duration {
            check_duration(
                "max_half_open_duration",
                d,
                Duration::from_nanos(1),
                MAX_OPEN_DURATION,
            )?;
            // `max_half_open_duration` bounds each step of a ramp (a ramp of
            // several steps is meant to take longer than one round), so a
            // step must be able to end, and be judged, before the limit.
            if let HalfOpenPolicy::Ramp { step_duration, .. } = &self.half_open
                && *step_duration >= d
            {
                return Err(ConfigError::new(
                    "half_open.step_duration",
                    format!(
                        "must be shorter than max_half_open_duration ({}), got {}: a step is \
                         judged only when it ends, so it would always time out",
                        humantime::format_duration(d),
                        humantime::format_duration(*step_duration)
                    ),
                ));
            }
        }
        if let Some(rps) = self.expected_calls_per_second
            && !(rps > 0.0 && rps.is_finite())
        {
            return Err(ConfigError::new(
                "expected_calls_per_second",
                format!("must be a positive number, got {rps}"),
            ));
        }
        if !(self.slow_probe_factor >= 1.0 && self.slow_probe_factor <= 100.0) {
            return Err(ConfigError::new(
                "slow_probe_factor",
                format!("must be between 1 and 100, got {}", self.slow_probe_factor),
            ));
        }
        self.validate_adaptive()?;
        self.soft_checks(&mut warnings);
        Ok(warnings)
    }

    fn validate_adaptive(&self) -> Result<(), ConfigError> {
        let tiny = Duration::from_nanos(1);
        if let Some(d) = self.min_state_duration {
            check_duration("min_state_duration", d, tiny, MAX_OPEN_DURATION)?;
        }
        if let Some(c) = &self.cooldown {
            check_duration("cooldown.duration", c.duration, tiny, MAX_OPEN_DURATION)?;
            check_rate("cooldown.failure_rate_threshold", c.failure_rate_threshold)?;
            if c.failure_rate_threshold > self.failure_rate_threshold {
                return Err(ConfigError::new(
                    "cooldown.failure_rate_threshold",
                    format!(
                        "must not be looser than failure_rate_threshold ({}), got {}",
                        self.failure_rate_threshold, c.failure_rate_threshold
                    ),
                ));
            }
        }
        if let Some(w) = &self.warm_up {
            check_duration("warm_up.duration", w.duration, tiny, MAX_OPEN_DURATION)?;
        }
        if let Some(b) = &self.slow_call {
            if self.slow_call_duration.is_some() {
                return Err(ConfigError::new(
                    "slow_call",
                    "cannot be combined with slow_call_duration: choose a fixed or a learned threshold",
                ));
            }
            b.validate("slow_call")?;
        }
        Ok(())
    }

    fn soft_checks(&self, warnings: &mut Vec<ConfigWarning>) {
        let mut warn = |field: &str, message: String| {
            warnings.push(ConfigWarning {
                field: field.to_owned(),
                message,
            })
        };
        let probes = self.half_open.probes();
        if let Some(t) = self.half_open.failure_rate_threshold()
            && t > self.failure_rate_threshold - 0.2 + 1e-9
        {
            warn(
                "half_open.failure_rate_threshold",
                format!(
                    "{t} leaves less than 20 points of hysteresis below failure_rate_threshold \
                     ({}): a dependency hovering near the threshold will flap",
                    self.failure_rate_threshold
                ),
            );
        }
        if let (Some(min), Some(max)) = (self.min_state_duration, self.max_half_open_duration)
            && min >= max
        {
            warn(
                "min_state_duration",
                "is not shorter than max_half_open_duration: half-open rounds time out \
                 before they may decide"
                    .to_owned(),
            );
        }
        if probes > self.minimum_calls {
            warn(
                "half_open",
                format!(
                    "{probes} half-open probes exceed minimum_calls = {}: probing hits a \
                     recovering dependency harder than the closed state needs to judge it",
                    self.minimum_calls
                ),
            );
        }
        match self.window {
            WindowConfig::Count { size } if size < self.minimum_calls => warn(
                "minimum_calls",
                format!(
                    "{} is more than the window holds ({size}): the breaker can never trip",
                    self.minimum_calls
                ),
            ),
            WindowConfig::Time { length, .. } => {
                if let Some(rps) = self.expected_calls_per_second {
                    let expected = rps * length.as_secs_f64();
                    if expected < f64::from(self.minimum_calls) {
                        warn(
                            "minimum_calls",
                            format!(
                                "a {} window at {rps} calls/s holds ~{expected:.0} calls, fewer \
                                 than minimum_calls = {}: the breaker can never trip",
                                humantime::format_duration(length),
                                self.minimum_calls
                            ),
                        );
                    } else if expected < 2.0 * f64::from(self.minimum_calls) {
                        warn(
                            "window.length",
                            format!(
                                "a {} window at {rps} calls/s holds ~{expected:.0} calls, barely \
                                 above minimum_calls = {}: a dip in traffic disarms the breaker",
                                humantime::format_duration(length),
                                self.minimum_calls
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }
}
