//! How long the breaker stays open: fixed, or exponential backoff with jitter.
//!
//! A fixed open duration makes every replica that tripped together probe
//! together, hitting a recovering dependency with synchronised spikes.
//! Backoff lengthens the wait after each failed probe round and
//! jitter spreads replicas apart. The random source is a SplitMix64
//! stream seeded per breaker instance, so replicas never share a sequence and
//! the simulator stays reproducible.

use std::fmt;
use std::time::Duration;

use super::config::{ConfigError, MAX_OPEN_DURATION, check_duration};

/// The open duration: a fixed wait, or a backoff that grows with each
/// consecutive failed probe round and resets when the breaker closes.
///
/// In config: `open_duration = "5s"` or
/// `open_duration = { initial = "5s", multiplier = 2.0, max = "60s", jitter = 0.2 }`.
#[derive(Clone, Debug, PartialEq)]
pub enum OpenDuration {
    /// The same wait every time.
    Fixed(Duration),
    /// `initial × multiplier^round`, capped at `max`, then jittered.
    Backoff(Backoff),
}

/// Exponential backoff of the open duration.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Backoff {
    /// The wait after the first trip.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub initial: Duration,
    /// Growth per failed probe round, ≥ 1.
    #[cfg_attr(feature = "serde", serde(default = "default_multiplier"))]
    pub multiplier: f64,
    /// The cap before jitter, ≥ `initial`.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub max: Duration,
    /// Randomisation applied to the capped value.
    #[cfg_attr(feature = "serde", serde(default))]
    pub jitter: Jitter,
}

#[cfg(feature = "serde")]
fn default_multiplier() -> f64 {
    2.0
}

/// Randomisation of a wait.
///
/// In config: `"none"`, `"full"`, `"equal"`, or a number `f` in [0, 1] for
/// a proportional ±f.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Jitter {
    /// No randomisation: every replica waits exactly as long.
    #[default]
    None,
    /// Uniform in [0, d]: the widest spread, but may probe almost at once.
    Full,
    /// Uniform in [d/2, d]: keeps at least half the wait.
    Equal,
    /// Uniform in [d·(1−f), d·(1+f)].
    Proportional(f64),
}

impl Jitter {
    /// Applies the jitter to `d` with a uniform random `u` in [0, 1).
    pub fn apply(self, d: Duration, u: f64) -> Duration {
        let secs = d.as_secs_f64();
        let jittered = match self {
            Jitter::None => return d,
            Jitter::Full => secs * u,
            Jitter::Equal => secs * (0.5 + 0.5 * u),
            Jitter::Proportional(f) => secs * (1.0 - f + 2.0 * f * u),
        };
        Duration::try_from_secs_f64(jittered).unwrap_or(MAX_OPEN_DURATION)
    }

    fn validate(self, field: &str) -> Result<(), ConfigError> {
        match self {
            Jitter::Proportional(f) if !(0.0..=1.0).contains(&f) => Err(ConfigError::new(
                field,
                format!("must be \"none\", \"full\", \"equal\" or a fraction in [0, 1], got {f}"),
            )),
            _ => Ok(()),
        }
    }
}

impl OpenDuration {
    /// The wait for probe round `round` (0 after a trip from closed) before
    /// jitter.
    pub fn base(&self, round: u32) -> Duration {
        match self {
            OpenDuration::Fixed(d) => *d,
            OpenDuration::Backoff(b) => {
                let grown = b.initial.as_secs_f64() * b.multiplier.powi(round.min(1_000) as i32);
                let capped = grown.min(b.max.as_secs_f64());
                Duration::try_from_secs_f64(capped).unwrap_or(b.max)
            }
        }
    }

    /// The wait for round `round`, jittered with the uniform `u` in [0, 1).
    pub fn for_round(&self, round: u32, u: f64) -> Duration {
        match self {
            OpenDuration::Fixed(d) => *d,
            OpenDuration::Backoff(b) => b.jitter.apply(self.base(round), u),
        }
    }

    pub(crate) fn validate(&self, field: &str) -> Result<(), ConfigError> {
        let one_ms = Duration::from_millis(1);
        match self {
            OpenDuration::Fixed(d) => check_duration(field, *d, one_ms, MAX_OPEN_DURATION),
            OpenDuration::Backoff(b) => {
                check_duration(
                    &format!("{field}.initial"),
                    b.initial,
                    one_ms,
                    MAX_OPEN_DURATION,
                )?;
                check_duration(&format!("{field}.max"), b.max, one_ms, MAX_OPEN_DURATION)?;
                if b.max < b.initial {
                    return Err(ConfigError::new(
                        format!("{field}.max"),
                        format!(
                            "must be at least initial ({}), got {}",
                            humantime::format_duration(b.initial),
                            humantime::format_duration(b.max)
                        ),
                    ));
                }
                if !(b.multiplier >= 1.0 && b.multiplier <= 100.0) {
                    return Err(ConfigError::new(
                        format!("{field}.multiplier"),
                        format!("must be between 1 and 100, got {}", b.multiplier),
                    ));
                }
                b.jitter.validate(&format!("{field}.jitter"))
            }
        }
    }
}

/// A plain `Duration` is a fixed open duration, so a config reads as it
/// would in a file (`open_duration = "5s"`):
///
/// ```
/// use std::time::Duration;
/// use tripline::{CircuitBreakerConfig, OpenDuration};
///
/// let config = CircuitBreakerConfig {
///     open_duration: Duration::from_secs(5).into(),
///     ..Default::default()
/// };
/// assert_eq!(config.open_duration, OpenDuration::Fixed(Duration::from_secs(5)));
/// ```
impl From<Duration> for OpenDuration {
    fn from(wait: Duration) -> Self {
        OpenDuration::Fixed(wait)
    }
}

impl fmt::Display for OpenDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenDuration::Fixed(d) => write!(f, "{}", humantime::format_duration(*d)),
            OpenDuration::Backoff(b) => write!(
                f,
                "{}×{}^n ≤ {} ({:?} jitter)",
                humantime::format_duration(b.initial),
                b.multiplier,
                humantime::format_duration(b.max),
                b.jitter
            ),
        }
    }
}

#[cfg(feature = "serde")]
mod serde_impls {
    use super::*;
    use serde::de::{self, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    impl Serialize for OpenDuration {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                OpenDuration::Fixed(d) => {
                    s.serialize_str(&humantime::format_duration(*d).to_string())
                }
                OpenDuration::Backoff(b) => b.serialize(s),
            }
        }
    }

    impl<'de> Deserialize<'de> for OpenDuration {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = OpenDuration;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str(
                        "a duration such as \"5s\" or a table { initial, multiplier, max, jitter }",
                    )
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<OpenDuration, E> {
                    crate::clock::duration_serde::parse(v)
                        .map(OpenDuration::Fixed)
                        .map_err(E::custom)
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OpenDuration, A::Error> {
                    Backoff::deserialize(de::value::MapAccessDeserializer::new(map))
                        .map(OpenDuration::Backoff)
                }
            }
            d.deserialize_any(V)
        }
    }

    impl Serialize for Jitter {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                Jitter::None => s.serialize_str("none"),
                Jitter::Full => s.serialize_str("full"),
                Jitter::Equal => s.serialize_str("equal"),
                Jitter::Proportional(f) => s.serialize_f64(*f),
            }
        }
    }

    impl<'de> Deserialize<'de> for Jitter {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Jitter;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("\"none\", \"full\", \"equal\" or a fraction in [0, 1]")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Jitter, E> {
                    match v {
                        "none" => Ok(Jitter::None),
                        "full" => Ok(Jitter::Full),
                        "equal" => Ok(Jitter::Equal),
                        other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                    }
                }
                fn visit_f64<E: de::Error>(self, v: f64) -> Result<Jitter, E> {
                    Ok(Jitter::Proportional(v))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Jitter, E> {
                    Ok(Jitter::Proportional(v as f64))
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Jitter, E> {
                    Ok(Jitter::Proportional(v as f64))
                }
            }
            d.deserialize_any(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters_within_bounds() {
        let od = OpenDuration::Backoff(Backoff {
            initial: Duration::from_secs(5),
            multiplier: 2.0,
            max: Duration::from_secs(60),
            jitter: Jitter::Proportional(0.2),
        });
        let bases: Vec<u64> = (0..6).map(|r| od.base(r).as_secs()).collect();
        assert_eq!(bases, [5, 10, 20, 40, 60, 60]);
        assert_eq!(od.for_round(0, 0.0), Duration::from_secs(4));
        assert_eq!(od.for_round(0, 0.5), Duration::from_secs(5));
        assert_eq!(
            Jitter::Full.apply(Duration::from_secs(10), 0.25).as_secs(),
            2
        );
        assert_eq!(
            Jitter::Equal.apply(Duration::from_secs(10), 0.0).as_secs(),
            5
        );
    }
}
