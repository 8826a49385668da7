//! One breaker, read at a scrape: the numbers every family of it needs,
//! taken once so that the families agree with each other.

use std::time::{Duration, SystemTime};

use tripline::breaker::{CallCounts, TransitionCount};
use tripline::clock::Clock;
use tripline::{CircuitBreaker, State, WindowSnapshot};

use crate::histogram::HistogramSample;
use crate::source::Detail;

/// The configured values the `Full` families and the compat families show.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ConfigSample {
    pub(crate) minimum_calls: u32,
    pub(crate) failure_rate_threshold: f64,
    pub(crate) slow_call_rate_threshold: f64,
    pub(crate) max_half_open_secs: Option<f64>,
}

/// One breaker at a scrape.
#[derive(Clone, Debug)]
pub(crate) struct BreakerSample {
    pub(crate) name: String,
    pub(crate) detail: Detail,
    pub(crate) state: State,
    pub(crate) calls: CallCounts,
    pub(crate) window: WindowSnapshot,
    pub(crate) time_in_state_secs: f64,
    /// Whether slow-call detection is on (else no slow-call rate is shown:
    /// it could only ever read 0).
    pub(crate) detects_slow: bool,
    pub(crate) probes_in_flight: u64,
    pub(crate) probe_due: bool,
    /// Unix seconds at which the open state ends; 0 when not open.
    pub(crate) open_until_unix: f64,
    pub(crate) backoff_round: u64,
    pub(crate) config_version: u64,
    pub(crate) config: Option<ConfigSample>,
    pub(crate) transitions: Vec<TransitionCount>,
    /// Boxed: most breakers have none, and samples are many.
    pub(crate) histogram: Option<Box<HistogramSample>>,
}

/// What is shared by every breaker read in one scrape.
pub(crate) struct ScrapeContext {
    /// Wall-clock time of the scrape, as Unix seconds.
    pub(crate) unix_now: f64,
    /// Whether the compat families need the config.
    pub(crate) compat: bool,
}

impl ScrapeContext {
    /// The scrape's wall-clock time as Unix seconds (through tripline's one
    /// sanctioned wall-clock conversion).
    pub(crate) fn unix_now() -> f64 {
        tripline::clock::system_time_after(Duration::ZERO)
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

/// Reads `breaker` at `detail` (transitions and histogram are attached
/// afterwards).
pub(crate) fn sample(
    breaker: &CircuitBreaker,
    detail: Detail,
    cx: &ScrapeContext,
) -> BreakerSample {
    let now = breaker.clock().now();
    let m = breaker.metrics();
    let full = detail == Detail::Full;
    let config = (full || cx.compat).then(|| {
        let c = breaker.config();
        ConfigSample {
            minimum_calls: c.minimum_calls,
            failure_rate_threshold: c.failure_rate_threshold,
            slow_call_rate_threshold: c.slow_call_rate_threshold,
            max_half_open_secs: c.max_half_open_duration.map(|d| d.as_secs_f64()),
        }
    });
    let open_until_unix = match (m.state, m.open_until) {
        (State::Open, Some(until)) => {
            let ahead = until.as_nanos() as f64 - now.as_nanos() as f64;
            cx.unix_now + ahead / 1e9
        }
        _ => 0.0,
    };
    BreakerSample {
        detail,
        state: m.state,
        calls: m.calls,
        window: m.window,
        time_in_state_secs: (now - m.state_since).as_secs_f64(),
        detects_slow: m.slow_call_threshold.is_some(),
        probes_in_flight: m.probes_in_flight,
        probe_due: m.probe_due,
        open_until_unix,
        backoff_round: m.backoff_round,
        config_version: m.config_version,
        config,
        transitions: Vec::new(),
        histogram: None,
        name: m.name,
    }
}

/// The 0/1/2 code of `state` (see [`names`](crate::names)).
pub(crate) fn state_code(state: State) -> u8 {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
        State::MetricsOnly => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tripline::{CircuitBreakerConfig, ManualClock, WindowConfig};

    #[test]
    fn open_breaker_sample() {
        let clock = ManualClock::new();
        let b = CircuitBreaker::builder()
            .config(CircuitBreakerConfig {
                name: "s".into(),
                window: WindowConfig::Count { size: 4 },
                minimum_calls: 2,
                ..Default::default()
            })
            .clock(clock.clone())
            .build()
            .unwrap();
        for _ in 0..2 {
            let _ = b.call(|| Err::<(), _>("down"));
        }
        clock.advance(Duration::from_secs(2));
        let cx = ScrapeContext {
            unix_now: 1_000.0,
            compat: false,
        };
        let s = sample(&b, Detail::Essential, &cx);
        assert_eq!((s.state, s.calls.failed), (State::Open, 2));
        assert!((s.time_in_state_secs - 2.0).abs() < 1e-9);
        let until = b.open_until_time().unwrap();
        let expect = 1_000.0 + (until.as_nanos() as f64 - clock.now().as_nanos() as f64) / 1e9;
        assert!((s.open_until_unix - expect).abs() < 1e-6);
        assert!(!s.probe_due && s.config.is_none());
        clock.advance(Duration::from_secs(3_600));
        assert!(sample(&b, Detail::Full, &cx).probe_due);
        assert_eq!(State::ALL.map(state_code), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_sample_is_small() {
        // 20 000 of them are held during a scrape.
        assert!(
            std::mem::size_of::<BreakerSample>() <= 256,
            "{}",
            std::mem::size_of::<BreakerSample>()
        );
    }
}
