//! Config of the breaker's recovery and adaptivity features: hysteresis
//! (`min_state_duration`, `cooldown`), warm-up, ramp-up probing and
//! baseline-relative slow calls.

use std::time::Duration;

use super::{ConfigError, MAX_OPEN_DURATION, check_duration, check_rate};

/// A more sensitive failure threshold for a while after the breaker closes:
/// a dependency that just recovered is the likeliest to fail again.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Cooldown {
    /// How long after closing the stricter threshold applies.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub duration: Duration,
    /// The failure-rate threshold during the cooldown; at most the normal one.
    pub failure_rate_threshold: f64,
}

/// How the breaker behaves during warm-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum WarmUpMode {
    /// Never trip during warm-up.
    #[default]
    NoTrip,
    /// Thresholds start at 100% and tighten linearly to their configured
    /// values over the warm-up.
    Relaxed,
}

/// A grace period after creation or a config change, so that a cold
/// instance (empty pools, cold caches, unjitted code) does not trip itself
/// off on its own slowness, and a config switch does not
/// trip on the old sample.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct WarmUp {
    /// Length of the warm-up.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub duration: Duration,
    /// No trips, or relaxed thresholds.
    #[cfg_attr(feature = "serde", serde(default))]
    pub mode: WarmUpMode,
}

/// A slow-call threshold learned from the dependency's own healthy latency
/// instead of a fixed `slow_call_duration`: a call is slow when it exceeds
/// `factor ×` the `baseline_quantile` of recent healthy calls, clamped to
/// `[floor, ceiling]` ("P99 × 2–3").
///
/// The baseline learns only from successful, not-slow calls while the
/// breaker is closed and its window healthy, and moves at most `max_step`
/// (a fraction) per window, so a dependency that degrades slowly cannot
/// teach the breaker that slow is normal.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SlowCallBaseline {
    /// The quantile of healthy latency the threshold follows, in (0, 1).
    pub baseline_quantile: f64,
    /// Multiplier over the quantile, ≥ 1.
    pub factor: f64,
    /// Lowest threshold.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub floor: Duration,
    /// Highest threshold, and the threshold until the baseline is learned.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub ceiling: Duration,
    /// Largest relative move of the threshold per window, in (0, 1].
    #[cfg_attr(feature = "serde", serde(default = "default_max_step"))]
    pub max_step: f64,
    /// Healthy samples needed before the first learned threshold.
    #[cfg_attr(feature = "serde", serde(default = "default_min_samples"))]
    pub min_samples: u32,
}

#[cfg(feature = "serde")]
fn default_max_step() -> f64 {
    0.1
}

#[cfg(feature = "serde")]
fn default_min_samples() -> u32 {
    100
}

impl SlowCallBaseline {
    /// Checks the fields, naming them under `field`.
    pub(crate) fn validate(&self, field: &str) -> Result<(), ConfigError> {
        if !(self.baseline_quantile > 0.0 && self.baseline_quantile < 1.0) {
            return Err(ConfigError::new(
                format!("{field}.baseline_quantile"),
                format!("must be in (0, 1), got {}", self.baseline_quantile),
            ));
        }
        if !(self.factor >= 1.0 && self.factor <= 100.0) {
            return Err(ConfigError::new(
                format!("{field}.factor"),
                format!("must be between 1 and 100, got {}", self.factor),
            ));
        }
        let min = Duration::from_micros(1);
        check_duration(
            &format!("{field}.floor"),
            self.floor,
            min,
            MAX_OPEN_DURATION,
        )?;
        check_duration(
            &format!("{field}.ceiling"),
            self.ceiling,
            min,
            MAX_OPEN_DURATION,
        )?;
        if self.ceiling <= self.floor {
            return Err(ConfigError::new(
                format!("{field}.ceiling"),
                format!(
                    "must be above floor ({}), got {}",
                    humantime::format_duration(self.floor),
                    humantime::format_duration(self.ceiling)
                ),
            ));
        }
        check_rate(&format!("{field}.max_step"), self.max_step)?;
        if self.min_samples == 0 {
            return Err(ConfigError::new(
                format!("{field}.min_samples"),
                "must be at least 1, got 0",
            ));
        }
        Ok(())
    }
}

/// Ramp-up probing: the share of traffic admitted at each step, for
/// dependencies whose recovery must not meet full load at once.
pub(crate) fn validate_ramp(
    steps: &[f64],
    step_duration: Duration,
    failure_rate_threshold: f64,
    minimum_calls_per_step: u32,
) -> Result<(), ConfigError> {
    if steps.is_empty() || steps.len() > 32 {
        return Err(ConfigError::new(
            "half_open.steps",
            format!("must list 1 to 32 shares, got {}", steps.len()),
        ));
    }
    for (i, pair) in steps.windows(2).enumerate() {
        if pair[1].partial_cmp(&pair[0]) != Some(std::cmp::Ordering::Greater) {
            return Err(ConfigError::new(
                "half_open.steps",
                format!(
                    "must increase strictly, but step {} ({}) is not above step {} ({})",
                    i + 1,
                    pair[1],
                    i,
                    pair[0]
                ),
            ));
        }
    }
    if let Some(bad) = steps.iter().find(|s| !(**s > 0.0 && **s <= 1.0)) {
        return Err(ConfigError::new(
            "half_open.steps",
            format!("shares must be in (0, 1], got {bad}"),
        ));
    }
    if steps.last() != Some(&1.0) {
        return Err(ConfigError::new(
            "half_open.steps",
            format!(
                "must end at 1.0 (full traffic), got {}",
                steps.last().copied().unwrap_or_default()
            ),
        ));
    }
    check_duration(
        "half_open.step_duration",
        step_duration,
        Duration::from_millis(1),
        MAX_OPEN_DURATION,
    )?;
    check_rate("half_open.failure_rate_threshold", failure_rate_threshold)?;
    if minimum_calls_per_step == 0 || minimum_calls_per_step > 10_000 {
        return Err(ConfigError::new(
            "half_open.minimum_calls_per_step",
            format!("must be between 1 and 10000, got {minimum_calls_per_step}"),
        ));
    }
    Ok(())
}
