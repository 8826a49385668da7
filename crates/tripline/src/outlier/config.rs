//! Outlier detection config: Envoy's vocabulary, percentages as 0–100.

use std::time::Duration;

use crate::error::PolicyConfigError;

/// How endpoints are judged and ejected (Envoy's
/// `outlier_detection`). Every detector is optional: `None` switches it
/// off, and its `enforcing_percent` set to 0 makes it detect-only (events,
/// no ejection) for a careful rollout.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use std::time::Duration;
/// use tripline::outlier::OutlierConfig;
///
/// let config: OutlierConfig = toml::from_str(r#"
///     interval = "5s"
///     base_ejection_time = "30s"
///     max_ejection_percent = 50
///     consecutive_failures = { threshold = 5, enforcing_percent = 100 }
///     success_rate = { minimum_hosts = 3, request_volume = 50, stdev_factor = 1.9 }
/// "#).unwrap();
/// assert_eq!(config.interval, Duration::from_secs(5));
/// assert!(config.validate().is_ok());
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct OutlierConfig {
    /// Time between analysis passes (success rate, failure percentage,
    /// returns from ejection), 1 ms ..= 1 h. Consecutive-failure detectors
    /// act at once, between passes.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub interval: Duration,
    /// Ejection time of a first ejection; the n-th ejection in a row lasts
    /// n × this, capped at `max_ejection_time`. Positive, at most 1 day.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub base_ejection_time: Duration,
    /// Longest ejection (before jitter); at least `base_ejection_time`, at
    /// most 1 day.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub max_ejection_time: Duration,
    /// A random extra of 0 ..= this is added to every ejection, so endpoints
    /// ejected together do not return together. At most 1 day.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub max_ejection_time_jitter: Duration,
    /// Most endpoints ejected at once, as a percentage (0–100) of the
    /// cluster, rounded *down*: with 3 endpoints and 50 %, at most one.
    /// Ejecting everyone would leave traffic nowhere.
    pub max_ejection_percent: u32,
    /// Allow one ejection even when `max_ejection_percent` rounds down to
    /// zero (a small cluster with a low percentage).
    pub always_eject_one: bool,
    /// Count local-origin errors (connect refused, reset, local timeout)
    /// apart from upstream errors (5xx), with their own detectors; when off,
    /// a local-origin error counts as a gateway failure (as Envoy maps it).
    pub split_external_local_origin_errors: bool,
    /// Eject after this many consecutive failures (5xx and, unsplit, local-origin errors).
    pub consecutive_failures: Option<ConsecutiveConfig>,
    /// Eject after this many consecutive gateway failures (502, 503, 504).
    pub consecutive_gateway_failures: Option<ConsecutiveConfig>,
    /// Eject after this many consecutive local-origin errors (only with
    /// `split_external_local_origin_errors`).
    pub consecutive_local_origin_failures: Option<ConsecutiveConfig>,
    /// Eject endpoints whose success rate is below the peers' mean − k·σ.
    pub success_rate: Option<SuccessRateConfig>,
    /// Eject endpoints whose failure percentage reaches a fixed threshold.
    pub failure_percentage: Option<FailurePercentageConfig>,
}

impl Default for OutlierConfig {
    /// Envoy's defaults: 10 s interval, 30 s base ejection, 300 s maximum,
    /// no jitter, at most 10 % ejected, 5 consecutive failures (enforced),
    /// 5 consecutive gateway failures (detect-only), success rate on
    /// (5 hosts, 100 requests, 1.9 σ), failure percentage off.
    fn default() -> Self {
        OutlierConfig {
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_time_jitter: Duration::ZERO,
            max_ejection_percent: 10,
            always_eject_one: false,
            split_external_local_origin_errors: false,
            consecutive_failures: Some(ConsecutiveConfig::default()),
            consecutive_gateway_failures: Some(ConsecutiveConfig {
                threshold: 5,
                enforcing_percent: 0,
            }),
            consecutive_local_origin_failures: Some(ConsecutiveConfig::default()),
            success_rate: Some(SuccessRateConfig::default()),
            failure_percentage: None,
        }
    }
}

/// A consecutive-errors detector.
///
/// ```
/// use tripline::outlier::ConsecutiveConfig;
/// assert_eq!(ConsecutiveConfig::default().threshold, 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ConsecutiveConfig {
    /// Errors in a row that eject, 1..=1 000 000.
    pub threshold: u32,
    /// Share of detections that really eject, 0–100 (0: detect-only).
    pub enforcing_percent: u32,
}

impl Default for ConsecutiveConfig {
    /// 5 in a row, always enforced.
    fn default() -> Self {
        ConsecutiveConfig {
            threshold: 5,
            enforcing_percent: 100,
        }
    }
}

/// The success-rate detector: statistics relative to the peers, so a
/// dependency-wide slump ejects nobody while one bad endpoint stands out.
///
/// ```
/// use tripline::outlier::SuccessRateConfig;
/// assert_eq!(SuccessRateConfig::default().stdev_factor, 1.9);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct SuccessRateConfig {
    /// Endpoints with enough volume needed before anyone is judged, ≥ 1.
    pub minimum_hosts: u32,
    /// Requests in the interval an endpoint needs to be judged (and to
    /// count towards the mean), ≥ 1.
    pub request_volume: u32,
    /// k in `mean − k·σ`; finite, ≥ 0 (Envoy's 1900 is 1.9 here).
    pub stdev_factor: f64,
    /// Share of detections on upstream errors that eject, 0–100.
    pub enforcing_percent: u32,
    /// Share of detections on local-origin errors that eject, 0–100.
    pub enforcing_local_origin_percent: u32,
}

impl Default for SuccessRateConfig {
    /// 5 hosts, 100 requests, 1.9 σ, always enforced.
    fn default() -> Self {
        SuccessRateConfig {
            minimum_hosts: 5,
            request_volume: 100,
            stdev_factor: 1.9,
            enforcing_percent: 100,
            enforcing_local_origin_percent: 100,
        }
    }
}

/// The failure-percentage detector: an absolute threshold, for clusters
/// where every endpoint may be bad at once or too few exist for statistics.
///
/// ```
/// use tripline::outlier::FailurePercentageConfig;
/// assert_eq!(FailurePercentageConfig::default().threshold_percent, 85);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct FailurePercentageConfig {
    /// Eject at this failure percentage or above, 0–100.
    pub threshold_percent: u32,
    /// Endpoints with enough volume needed before anyone is judged, ≥ 1.
    pub minimum_hosts: u32,
    /// Requests in the interval an endpoint needs to be judged, ≥ 1.
    pub request_volume: u32,
    /// Share of detections on upstream errors that eject, 0–100.
    pub enforcing_percent: u32,
    /// Share of detections on local-origin errors that eject, 0–100.
    pub enforcing_local_origin_percent: u32,
}

impl Default for FailurePercentageConfig {
    /// 85 %, 5 hosts, 50 requests, always enforced.
    fn default() -> Self {
        FailurePercentageConfig {
            threshold_percent: 85,
            minimum_hosts: 5,
            request_volume: 50,
            enforcing_percent: 100,
            enforcing_local_origin_percent: 100,
        }
    }
}

pub(crate) fn err(field: &'static str, constraint: String) -> PolicyConfigError {
    PolicyConfigError::new("outlier", field, constraint)
}

/// A percentage field must lie in 0–100.
pub(crate) fn check_percent(
    policy: &'static str,
    field: &'static str,
    v: u32,
) -> Result<(), PolicyConfigError> {
    if v > 100 {
        return Err(PolicyConfigError::new(
            policy,
            field,
            format!("is a percentage and must be between 0 and 100, got {v}"),
        ));
    }
    Ok(())
}

impl OutlierConfig {
    /// A validated config.
    pub fn try_new(config: OutlierConfig) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        Ok(config)
    }

    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        if self.interval < Duration::from_millis(1) || self.interval > Duration::from_secs(3600) {
            return Err(err(
                "interval",
                format!("must be between 1ms and 1h, got {}", fmt(self.interval)),
            ));
        }
        if self.base_ejection_time.is_zero() {
            return Err(err("base_ejection_time", "must be positive, got 0s".into()));
        }
        // An endpoint ejected for more than a day is a decommissioned one:
        // remove it instead. The bound also keeps ejection deadlines far
        // from the clock's range.
        let day = Duration::from_secs(86_400);
        for (field, d) in [
            ("base_ejection_time", self.base_ejection_time),
            ("max_ejection_time", self.max_ejection_time),
            ("max_ejection_time_jitter", self.max_ejection_time_jitter),
        ] {
            if d > day {
                return Err(err(field, format!("must be at most 1day, got {}", fmt(d))));
            }
        }
        if self.max_ejection_time < self.base_ejection_time {
            return Err(err(
                "max_ejection_time",
                format!(
                    "must be at least `base_ejection_time` ({}), got {}",
                    fmt(self.base_ejection_time),
                    fmt(self.max_ejection_time)
                ),
            ));
        }
        check_percent("outlier", "max_ejection_percent", self.max_ejection_percent)?;
        let consecutive = [
            (
                &self.consecutive_failures,
                "consecutive_failures.threshold",
                "consecutive_failures.enforcing_percent",
            ),
            (
                &self.consecutive_gateway_failures,
                "consecutive_gateway_failures.threshold",
                "consecutive_gateway_failures.enforcing_percent",
            ),
            (
                &self.consecutive_local_origin_failures,
                "consecutive_local_origin_failures.threshold",
                "consecutive_local_origin_failures.enforcing_percent",
            ),
        ];
        for (c, threshold, enforcing) in consecutive {
            if let Some(c) = c {
                if !(1..=1_000_000).contains(&c.threshold) {
                    return Err(err(
                        threshold,
                        format!("must be between 1 and 1000000, got {}", c.threshold),
                    ));
                }
                check_percent("outlier", enforcing, c.enforcing_percent)?;
            }
        }
        if let Some(s) = &self.success_rate {
            positive("success_rate.minimum_hosts", s.minimum_hosts)?;
            positive("success_rate.request_volume", s.request_volume)?;
            if !(s.stdev_factor.is_finite() && s.stdev_factor >= 0.0) {
                return Err(err(
                    "success_rate.stdev_factor",
                    format!("must be a finite number ≥ 0, got {}", s.stdev_factor),
                ));
            }
            check_percent(
                "outlier",
                "success_rate.enforcing_percent",
                s.enforcing_percent,
            )?;
            check_percent(
                "outlier",
                "success_rate.enforcing_local_origin_percent",
                s.enforcing_local_origin_percent,
            )?;
        }
        if let Some(p) = &self.failure_percentage {
            check_percent(
                "outlier",
                "failure_percentage.threshold_percent",
                p.threshold_percent,
            )?;
            positive("failure_percentage.minimum_hosts", p.minimum_hosts)?;
            positive("failure_percentage.request_volume", p.request_volume)?;
            check_percent(
                "outlier",
                "failure_percentage.enforcing_percent",
                p.enforcing_percent,
            )?;
            check_percent(
                "outlier",
                "failure_percentage.enforcing_local_origin_percent",
                p.enforcing_local_origin_percent,
            )?;
        }
        Ok(())
    }
}

fn positive(field: &'static str, v: u32) -> Result<(), PolicyConfigError> {
    if v == 0 {
        return Err(err(field, "must be at least 1, got 0".into()));
    }
    Ok(())
}

/// Most endpoints that may be ejected at once: `⌊total × percent / 100⌋`,
/// at least one with `always_eject_one`.
///
/// ```text
/// total  10 %  50 %  100 %
///   2     0     1     2
///   3     0     1     3
///  10     1     5    10
/// ```
///
/// ```
/// use tripline::outlier::ejection_cap;
/// assert_eq!(ejection_cap(3, 50, false), 1); // 1.5 rounds down
/// assert_eq!(ejection_cap(3, 10, true), 1);  // 0, but one is allowed
/// ```
pub fn ejection_cap(total: usize, max_ejection_percent: u32, always_eject_one: bool) -> usize {
    let cap = (total as u128 * u128::from(max_ejection_percent.min(100)) / 100) as usize;
    if always_eject_one && total > 0 {
        cap.max(1)
    } else {
        cap
    }
}
