//! The config a breaker runs with, precomputed for its decisions, and the
//! cell that lets a reconfiguration replace it while calls read it.
//!
//! Only the closed hot path's one tunable (the slow-call threshold) lives in
//! its own atomic; everything else is read on slow paths (evaluation,
//! half-open, transitions) through an `ArcSwap`, so a reconfiguration swaps
//! one pointer and no reader ever sees half a config.

use super::super::config::{CircuitBreakerConfig, WarmUpMode};
use super::super::half_open::Rules;
use crate::breaker::OpenDuration;
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

/// Whether `count` out of `calls` reaches `rate`: exactly
/// `count as f64 / calls as f64 >= rate`, the comparison the user's float
/// threshold means. Every rate decision of the breaker goes through here,
/// so none rounds a threshold (a fixed-point threshold turns `2.0 / 3.0`
/// into 0.666667, and 2 failures in 3 would not trip). Counts are exact
/// in `f64` up to 2⁵³, and IEEE division is correctly rounded, so the
/// quotient is the one a user computes.
#[inline]
pub(crate) fn reaches(count: u64, calls: u64, rate: f64) -> bool {
    count as f64 / calls as f64 >= rate
}

/// The thresholds in force at one moment (after warm-up and cooldown).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Effective {
    pub(crate) minimum_calls: u64,
    pub(crate) failure_rate: f64,
    pub(crate) slow_rate: f64,
    /// False during a `no_trip` warm-up.
    pub(crate) may_trip: bool,
}

/// The thresholds when nothing varies them with time, as the hot words
/// hold them (see [`Settings::plain_rule`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PlainRule {
    /// `1 << 63 | minimum_calls`, or 0 when something varies the thresholds.
    pub(crate) word: u64,
    pub(crate) failure_rate: f64,
    pub(crate) slow_rate: f64,
}

impl Effective {
    /// The thresholds of a plain rule word and its two rates.
    #[inline]
    pub(crate) fn from_plain(word: u64, failure_rate: f64, slow_rate: f64) -> Self {
        Effective {
            minimum_calls: word & u64::from(u32::MAX),
            failure_rate,
            slow_rate,
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

    /// The thresholds when nothing varies them with time (no warm-up, no
    /// cooldown, no `min_state_duration`), so a trip evaluation can read
    /// them from the hot words beside the state word instead of loading
    /// the settings; a zero word when something does.
    pub(crate) fn plain_rule(&self) -> PlainRule {
        let c = &self.config;
        let plain = c.warm_up.is_none() && c.cooldown.is_none() && self.min_state_nanos() == 0;
        PlainRule {
            word: if plain {
                1 << 63 | u64::from(c.minimum_calls)
            } else {
                0
            },
            failure_rate: c.failure_rate_threshold,
            slow_rate: c.slow_call_rate_threshold,
        }
    }

    /// The open duration in nanoseconds when every trip opens for the
    /// same time (a fixed duration, at least `min_state_duration`), 0
    /// when it varies by round or jitter. Never 0 otherwise: a fixed
    /// duration is at least 1 ms.
    pub(crate) fn plain_open_nanos(&self) -> u64 {
        match self.config.open_duration {
            OpenDuration::Fixed(d) => duration_to_nanos(d).max(self.min_state_nanos()),
            OpenDuration::Backoff(_) => 0,
        }
    }

    /// The half-open quota rules and `max_half_open_duration` packed in one
    /// word when the half-open paths need nothing else of the settings (a
    /// quota policy, no `min_state_duration`), so admitting, settling and
    /// deciding probes read it beside the state word instead of loading
    /// the settings; 0 otherwise.
    pub(crate) fn plain_quota(&self) -> u64 {
        match self.rules {
            Rules::Quota(q) if self.min_state_nanos() == 0 => q
                .to_word(self.config.max_half_open_duration.map(duration_to_nanos))
                .unwrap_or(0),
            _ => 0,
        }
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
            failure_rate: c.failure_rate_threshold,
            slow_rate: c.slow_call_rate_threshold,
            may_trip: true,
        };
        if let (Some(cooldown), Some(since)) = (c.cooldown, recovered_at)
            && now.saturating_sub(since) < duration_to_nanos(cooldown.duration)
        {
            e.failure_rate = e.failure_rate.min(cooldown.failure_rate_threshold);
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
                        let left = relaxed_share(length - elapsed, length);
                        let relax = |t: f64| (t + (1.0 - t) * left).min(1.0);
                        e.failure_rate = relax(e.failure_rate);
                        e.slow_rate = relax(e.slow_rate);
                    }
                }
            }
        }
        e
    }
}

/// The share of a warm-up still to run, `left / length`, in (0, 1].
fn relaxed_share(left: u64, length: u64) -> f64 {
    left as f64 / length as f64
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
        assert_eq!(s.effective(0, 0, None).failure_rate, 1.0);
        assert_eq!(s.effective(50, 0, None).failure_rate, 0.75);
        assert_eq!(s.effective(50, 0, None).slow_rate, 0.9);
        assert_eq!(s.effective(100, 0, None).failure_rate, 0.5);
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
    fn plain_thresholds_live_in_the_hot_words_and_varying_ones_do_not() {
        let plain = settings(None, None);
        let rule = plain.plain_rule();
        assert_ne!(rule.word, 0);
        assert_eq!(
            Effective::from_plain(rule.word, rule.failure_rate, rule.slow_rate),
            plain.effective(7, 0, None)
        );
        let extremes = Settings::new(
            CircuitBreakerConfig {
                minimum_calls: u32::MAX,
                failure_rate_threshold: 2.0 / 3.0,
                ..Default::default()
            },
            0,
        );
        let r = extremes.plain_rule();
        let e = Effective::from_plain(r.word, r.failure_rate, r.slow_rate);
        assert_eq!(
            (e.minimum_calls, e.failure_rate),
            (u64::from(u32::MAX), 2.0 / 3.0)
        );
        let warm = WarmUp {
            duration: Duration::from_secs(1),
            mode: WarmUpMode::NoTrip,
        };
        assert_eq!(settings(Some(warm), None).plain_rule().word, 0);
        let cool = Cooldown {
            duration: Duration::from_secs(1),
            failure_rate_threshold: 0.2,
        };
        assert_eq!(settings(None, Some(cool)).plain_rule().word, 0);
        let held = Settings::new(
            CircuitBreakerConfig {
                min_state_duration: Some(Duration::from_secs(1)),
                ..Default::default()
            },
            0,
        );
        assert_eq!(held.plain_rule().word, 0);
    }

    #[test]
    fn plain_quota_words_carry_the_rules_and_the_round_limit_exactly() {
        use crate::breaker::config::HalfOpenPolicy;
        use crate::breaker::half_open::QuotaRules;
        let with = |half_open, max: Option<Duration>, min_state: Option<Duration>| {
            Settings::new(
                CircuitBreakerConfig {
                    half_open,
                    max_half_open_duration: max,
                    min_state_duration: min_state,
                    ..Default::default()
                },
                0,
            )
        };
        // The defaults: a quota policy and a 60 s round limit.
        let default = Settings::new(CircuitBreakerConfig::default(), 0);
        let Rules::Quota(rules) = default.rules else {
            panic!("the default policy is a quota")
        };
        let word = default.plain_quota();
        assert_ne!(word, 0);
        assert_eq!(
            QuotaRules::from_word(word),
            (rules, Some(duration_to_nanos(Duration::from_secs(60))))
        );
        let permits = HalfOpenPolicy::Permits {
            calls: 5,
            failure_rate_threshold: 0.5,
        };
        let s = with(permits.clone(), None, None);
        assert_eq!(
            QuotaRules::from_word(s.plain_quota()),
            (
                QuotaRules::Permits {
                    calls: 5,
                    fail_limit: 3
                },
                None
            )
        );
        // What the word cannot say exactly is read from the settings.
        let sub_ms = Some(Duration::from_micros(1_500));
        assert_eq!(with(permits.clone(), sub_ms, None).plain_quota(), 0);
        let held = Some(Duration::from_secs(1));
        assert_eq!(with(permits, None, held).plain_quota(), 0);
        let many = HalfOpenPolicy::Consecutive { successes: 70_000 };
        assert_eq!(with(many, None, None).plain_quota(), 0);
        let most = QuotaRules::Permits {
            calls: 0xFFFF,
            fail_limit: 0xFFFF,
        };
        let max = Some((1 << 30) - 2);
        let word = most.to_word(max.map(|ms: u64| ms * 1_000_000)).unwrap();
        assert_eq!(
            QuotaRules::from_word(word),
            (most, max.map(|ms| ms * 1_000_000))
        );
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
        assert_eq!(s.effective(105, 0, Some(100)).failure_rate, 0.3);
        assert_eq!(s.effective(110, 0, Some(100)).failure_rate, 0.5);
        assert_eq!(s.effective(105, 0, None).failure_rate, 0.5);
    }
}
