//! When and how often to hedge.

use std::time::Duration;

use crate::error::PolicyConfigError;

/// When to send a hedge.
///
/// ```
/// use std::time::Duration;
/// use tripline::hedge::HedgeDelay;
/// let fixed = HedgeDelay::Fixed { delay: Duration::from_millis(20) };
/// assert_ne!(fixed, HedgeDelay::Quantile { quantile: 0.95, min_samples: 50, initial: Duration::from_millis(20) });
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum HedgeDelay {
    /// After a fixed delay.
    Fixed {
        /// The delay.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        delay: Duration,
    },
    /// After the `quantile` (e.g. 0.95) of recent latencies; `initial` until
    /// `min_samples` latencies have been seen.
    Quantile {
        /// The quantile, in (0, 1).
        quantile: f64,
        /// Samples needed before the quantile is trusted, ≥ 1.
        min_samples: u32,
        /// The delay before that.
        #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
        initial: Duration,
    },
}

/// The shape of a [`Hedge`](super::Hedge).
///
/// ```
/// use tripline::hedge::{HedgeConfig, HedgeDelay};
/// use std::time::Duration;
/// let bad = HedgeConfig { max_hedges: 0, ..Default::default() };
/// assert_eq!(bad.validate().unwrap_err().field, "max_hedges");
/// let p95 = HedgeConfig {
///     delay: HedgeDelay::Quantile { quantile: 0.95, min_samples: 20, initial: Duration::from_millis(50) },
///     ..Default::default()
/// };
/// assert!(p95.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct HedgeConfig {
    /// When to hedge.
    pub delay: HedgeDelay,
    /// Extra attempts at most, 1..=10.
    pub max_hedges: u32,
    /// Latencies remembered for the quantile, 10..=100 000.
    pub samples: u32,
}

impl Default for HedgeConfig {
    /// One hedge at the p95 of the last 1000 latencies (after 100 samples;
    /// 100 ms before).
    fn default() -> Self {
        HedgeConfig {
            delay: HedgeDelay::Quantile {
                quantile: 0.95,
                min_samples: 100,
                initial: Duration::from_millis(100),
            },
            max_hedges: 1,
            samples: 1000,
        }
    }
}

impl HedgeConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let err = |field, c: String| Err(PolicyConfigError::new("hedge", field, c));
        if !(1..=10).contains(&self.max_hedges) {
            return err(
                "max_hedges",
                format!("must be between 1 and 10, got {}", self.max_hedges),
            );
        }
        if !(10..=100_000).contains(&self.samples) {
            return err(
                "samples",
                format!("must be between 10 and 100000, got {}", self.samples),
            );
        }
        if let HedgeDelay::Quantile {
            quantile,
            min_samples,
            ..
        } = self.delay
        {
            if !(quantile > 0.0 && quantile < 1.0) {
                return err(
                    "delay.quantile",
                    format!("must be in (0, 1), got {quantile}"),
                );
            }
            if min_samples == 0 || min_samples > self.samples {
                return err(
                    "delay.min_samples",
                    format!(
                        "must be between 1 and samples ({}), got {min_samples}",
                        self.samples
                    ),
                );
            }
        }
        Ok(())
    }
}
