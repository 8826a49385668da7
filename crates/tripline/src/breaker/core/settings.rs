//! The config a breaker runs with, precomputed for its decisions, and the
//! cell that lets a reconfiguration replace it while calls read it.
//!
//! Only the closed hot path's one tunable (the slow-call threshold) lives in
//! its own atomic; everything else is read on slow paths (evaluation,
//! half-open, transitions) through an `ArcSwap`, so a reconfiguration swaps
//! one pointer and no reader ever sees half a config.

use super::super::config::{CircuitBreakerConfig, WarmUpMode};
use super::super::half_open::Rules;
use crate::clock::duration_to_nanos;

/// A validated config and the policy rules derived from it; everything
/// else is computed from the config on the (cold) paths that need it, which
/// keeps a breaker small. Breakers of one registry family share one
/// `Settings` (its `config.name` is then the family's; each breaker's own
/// name lives in the breaker).
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) config: CircuitBreakerConfig,
    pub(crate) version: u64,
    pub(crate) rules: Rules,
}

/// A validated rate (0 to 1) in parts per million, rounded to nearest.
/// Adding ½ and truncating is `round()` for non-negative values, without
/// the library call `f64::round` compiles to (two per trip evaluation).
#[inline]
pub(crate) fn ppm(rate: f64) -> u64 {
    (rate * 1e6 + 0.5) as u64
}

/// The thresholds in force at one moment (after warm-up and cooldown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Effective {
    pub(crate) minimum_calls: u64,
    pub(crate) failure_ppm: u64,
    pub(crate) slow_ppm: u64,
    /// False during a `no_trip` warm-up.
    pub(crate) may_trip: bool,
}

impl Effective {
    /// The thresholds of a word made by [`Settings::packed_plain_rule`].
    #[inline]
    pub(crate) fn unpack_plain(word: u64) -> Self {
        const PPM: u64 = (1 << 20) - 1;
        Effective {
            minimum_calls: (word >> 40) & ((1 << 23) - 1),
            failure_ppm: word & PPM,
            slow_ppm: (word >> 20) & PPM,
            may_trip: true,
        }
    }
}

impl Settings {
    pub(crate) fn new(config: CircuitBreakerConfig, version: u64) -> Self {
        Settings {
            version,
            rules: Rules::new(&config.half_open),
            config,
        }
    }

    /// The thresholds packed in one word when nothing varies them with
    /// time (no warm-up, no cooldown, no `min_state_duration`), so a trip
    /// evaluation can read them beside the state word instead of loading
    /// the settings; 0 when something does. Layout: bit 63 set, then
    /// `minimum_calls` (23 bits), slow and failure rates (20 bits of parts
    /// per million each).
    pub(crate) fn packed_plain_rule(&self) -> u64 {
        let c = &self.config;
        let plain = c.warm_up.is_none() && c.cooldown.is_none() && self.min_state_nanos() == 0;
        let (failure, slow) = (
            ppm(c.failure_rate_threshold),
            ppm(c.slow_call_rate_threshold),
        );
        if !plain || c.minimum_calls >= 1 << 23 || failure >= 1 << 20 || slow >= 1 << 20 {
            return 0;
        }
        1 << 63 | u64::from(c.minimum_calls) << 40 | slow << 20 | failure
    }

    /// `min_state_duration` in nanoseconds, 0 when off.
    pub(crate) fn min_state_nanos(&self) -> u64 {
        self.config.min_state_duration.map_or(0, duration_to_nanos)
    }

    /// The thresholds at `now`, given when warm-up started and when the
    /// breaker last recovered (if it is in its cooldown).
    pub(crate) fn effective(
        &self,
        now: u64,
        warm_start: u64,
        recovered_at: Option<u64>,
    ) -> Effective {
        let c = &self.config;
        let mut e = Effective {
            minimum_calls: u64::from(c.minimum_calls),
            failure_ppm: ppm(c.failure_rate_threshold),
            slow_ppm: ppm(c.slow_call_rate_threshold),
            may_trip: true,
        };
        if let (Some(cooldown), Some(since)) = (c.cooldown, recovered_at)
            && now.saturating_sub(since) < duration_to_nanos(cooldown.duration)
        {
            e.failure_ppm = e.failure_ppm.min(ppm(cooldown.failure_rate_threshold));
        }
        if let Some(warm_up) = c.warm_up {
            let length = duration_to_nanos(warm_up.duration);
            let elapsed = now.saturating_sub(warm_start);
            if elapsed < length {
                match warm_up.mode {
                    WarmUpMode::NoTrip => e.may_trip = false,
                    WarmUpMode::Relaxed => {
                        // Linear from 100% at the start to the configured
                        // threshold at the end.
                        let left = (length - elapsed) as u128;
                        let relax = |t: u64| {
                            t + ((1_000_000 - t.min(1_000_000)) as u128 * left / length as u128)
                                as u64
                        };
                        e.failure_ppm = relax(e.failure_ppm);
                        e.slow_ppm = relax(e.slow_ppm);
                    }
                }
            }
        }
        e
    }
}

/// Holds the current [`Settings`]; readers never block a reconfiguration
/// and never see a torn one.
pub(crate) struct SettingsCell {
    #[cfg(not(loom))]
    current: arc_swap::ArcSwap<Settings>,
    #[cfg(loom)]
    current: crate::sync::Mutex<std::sync::Arc<Settings>>,
}

impl SettingsCell {
    pub(crate) fn new(settings: std::sync::Arc<Settings>) -> Self {
        SettingsCell {
            #[cfg(not(loom))]
            current: arc_swap::ArcSwap::new(settings),
            #[cfg(loom)]
            current: crate::sync::Mutex::new(settings),
        }
    }

    /// Runs `f` on the current settings.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Settings) -> R) -> R {
        #[cfg(not(loom))]
        {
            f(&self.current.load())
        }
        #[cfg(loom)]
        {
            let s = crate::sync::lock(&self.current).clone();
            f(&s)
        }
    }

    pub(crate) fn store(&self, settings: std::sync::Arc<Settings>) {
        #[cfg(not(loom))]
        self.current.store(settings);
        #[cfg(loom)]
        {
            *crate::sync::lock(&self.current) = settings;
        }
    }

    /// The current settings, to share with another breaker.
    pub(crate) fn load_arc(&self) -> std::sync::Arc<Settings> {
        #[cfg(not(loom))]
        {
            self.current.load_full()
        }
        #[cfg(loom)]
        {
            crate::sync::lock(&self.current).clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::config::{Cooldown, WarmUp};
    use std::time::Duration;

    fn settings(warm_up: Option<WarmUp>, cooldown: Option<Cooldown>) -> Settings {
        Settings::new(
            CircuitBreakerConfig {
                failure_rate_threshold: 0.5,
                slow_call_rate_threshold: 0.8,
                warm_up,
                cooldown,
                ..Default::default()
            },
            0,
        )
    }

    #[test]
    fn relaxed_warm_up_tightens_linearly() {
        let s = settings(
            Some(WarmUp {
                duration: Duration::from_nanos(100),
                mode: WarmUpMode::Relaxed,
            }),
            None,
        );
        assert_eq!(s.effective(0, 0, None).failure_ppm, 1_000_000);
        assert_eq!(s.effective(50, 0, None).failure_ppm, 750_000);
        assert_eq!(s.effective(50, 0, None).slow_ppm, 900_000);
        assert_eq!(s.effective(100, 0, None).failure_ppm, 500_000);
        let no_trip = settings(
            Some(WarmUp {
                duration: Duration::from_nanos(100),
                mode: WarmUpMode::NoTrip,
            }),
            None,
        );
        assert!(!no_trip.effective(99, 0, None).may_trip);
        assert!(no_trip.effective(100, 0, None).may_trip);
    }

    #[test]
    fn plain_thresholds_pack_into_one_word_and_varying_ones_do_not() {
        let plain = settings(None, None);
        let word = plain.packed_plain_rule();
        assert_ne!(word, 0);
        assert_eq!(Effective::unpack_plain(word), plain.effective(7, 0, None));
        let extremes = Settings::new(
            CircuitBreakerConfig {
                minimum_calls: (1 << 23) - 1,
                failure_rate_threshold: 1.0,
                slow_call_rate_threshold: 1.0,
                ..Default::default()
            },
            0,
        );
        let e = Effective::unpack_plain(extremes.packed_plain_rule());
        assert_eq!(
            (e.minimum_calls, e.failure_ppm, e.slow_ppm),
            ((1 << 23) - 1, 1_000_000, 1_000_000)
        );
        let too_many = Settings::new(
            CircuitBreakerConfig {
                minimum_calls: 1 << 23,
                ..Default::default()
            },
            0,
        );
        assert_eq!(
            too_many.packed_plain_rule(),
            0,
            "falls back to the settings"
        );
        let warm = WarmUp {
            duration: Duration::from_secs(1),
            mode: WarmUpMode::NoTrip,
        };
        assert_eq!(settings(Some(warm), None).packed_plain_rule(), 0);
        let cool = Cooldown {
            duration: Duration::from_secs(1),
            failure_rate_threshold: 0.2,
        };
        assert_eq!(settings(None, Some(cool)).packed_plain_rule(), 0);
        let held = Settings::new(
            CircuitBreakerConfig {
                min_state_duration: Some(Duration::from_secs(1)),
                ..Default::default()
            },
            0,
        );
        assert_eq!(held.packed_plain_rule(), 0);
    }

    #[test]
    fn cooldown_is_stricter_for_its_duration_only() {
        let s = settings(
            None,
            Some(Cooldown {
                duration: Duration::from_nanos(10),
                failure_rate_threshold: 0.3,
            }),
        );
        assert_eq!(s.effective(105, 0, Some(100)).failure_ppm, 300_000);
        assert_eq!(s.effective(110, 0, Some(100)).failure_ppm, 500_000);
        assert_eq!(s.effective(105, 0, None).failure_ppm, 500_000);
    }
}
