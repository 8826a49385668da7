//! Registry configuration, in the breaker's vocabulary: the
//! family's breaker template plus the bounds that keep a keyed family from
//! growing without limit.

use std::time::Duration;

use crate::breaker::{CircuitBreakerConfig, ConfigError, ConfigWarning, WindowConfig};

/// One family of keyed breakers: their shared config and their bounds.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use std::time::Duration;
/// use tripline::registry::{OverflowPolicy, RegistryConfig};
///
/// let config: RegistryConfig = toml::from_str(r#"
///     max_breakers = 20000
///     overflow = "reject"
///     idle_ttl = "10m"
///
///     [breaker]
///     name = "inventory"
///     window = { kind = "time", length = "10s", buckets = 10 }
///     minimum_calls = 20
/// "#).unwrap();
/// assert_eq!(config.overflow, OverflowPolicy::Reject);
/// assert_eq!(config.idle_ttl, Some(Duration::from_secs(600)));
/// assert!(config.validate().unwrap().is_empty());
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RegistryConfig {
    /// Most breakers the family holds at once, ≥ 1. Each costs about a
    /// kilobyte or two (see `benches/README.md`), so this bounds memory
    /// whatever the key cardinality turns out to be.
    pub max_breakers: usize,
    /// What a lookup of a new key gets once `max_breakers` are live.
    pub overflow: OverflowPolicy,
    /// A `Closed` breaker that saw no call for this long is dropped by
    /// [`BreakerRegistry::evict_idle`](super::BreakerRegistry::evict_idle);
    /// `None` keeps breakers until removed. At least 1 s.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::clock::duration_serde::option")
    )]
    pub idle_ttl: Option<Duration>,
    /// The family's breaker config; its `name` names the family, and each
    /// breaker is named after its key.
    pub breaker: CircuitBreakerConfig,
}

/// What a lookup of a new key gets when the registry is full.
///
/// ```
/// use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
///
/// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig {
///     max_breakers: 1,
///     overflow: OverflowPolicy::SharedOverflow,
///     ..Default::default()
/// })
/// .unwrap();
/// registry.get(&1).unwrap();
/// assert_eq!(registry.get(&2).unwrap().name(), "default:overflow");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum OverflowPolicy {
    /// Every key that finds no room shares one breaker, named
    /// `"<family>:overflow"`: calls stay protected at a coarser
    /// granularity (merge one level up), at the price of
    /// those keys tripping together.
    #[default]
    SharedOverflow,
    /// The lookup fails with [`RegistryError::Full`](super::RegistryError::Full):
    /// the caller decides (fail the request, or call unprotected).
    Reject,
}

impl Default for RegistryConfig {
    /// 10 000 breakers, a shared overflow breaker, 10 minutes idle TTL, the
    /// default breaker config.
    fn default() -> Self {
        RegistryConfig {
            max_breakers: 10_000,
            overflow: OverflowPolicy::SharedOverflow,
            idle_ttl: Some(Duration::from_secs(600)),
            breaker: CircuitBreakerConfig::default(),
        }
    }
}

/// Shortest `idle_ttl` accepted.
pub const MIN_IDLE_TTL: Duration = Duration::from_secs(1);

pub(crate) fn error(field: impl Into<String>, constraint: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        constraint: constraint.into(),
    }
}

/// Prefixes the field of a breaker config's error or warning with `prefix`.
pub(crate) fn nested(prefix: &str, e: ConfigError) -> ConfigError {
    error(format!("{prefix}.{}", e.field), e.constraint)
}

impl RegistryConfig {
    /// Checks every field; hard contradictions are errors (naming the
    /// field, `breaker.` fields dotted), soft ones warnings.
    pub fn validate(&self) -> Result<Vec<ConfigWarning>, ConfigError> {
        if self.max_breakers == 0 {
            return Err(error("max_breakers", "must be at least 1, got 0"));
        }
        if let Some(ttl) = self.idle_ttl
            && ttl < MIN_IDLE_TTL
        {
            return Err(error(
                "idle_ttl",
                format!(
                    "must be at least 1s (or absent to never evict), got {}",
                    humantime::format_duration(ttl)
                ),
            ));
        }
        let mut warnings = self.breaker.validate().map_err(|e| nested("breaker", e))?;
        for w in &mut warnings {
            w.field = format!("breaker.{}", w.field);
        }
        if let (Some(ttl), WindowConfig::Time { length, .. }) = (self.idle_ttl, self.breaker.window)
            && ttl < length
        {
            warnings.push(ConfigWarning {
                field: "idle_ttl".to_owned(),
                message: format!(
                    "{} is shorter than the {} window: an idle breaker is evicted while \
                     its window still holds evidence",
                    humantime::format_duration(ttl),
                    humantime::format_duration(length)
                ),
            });
        }
        Ok(warnings)
    }
}
