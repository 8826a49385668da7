//! When a breaker entered its state, and the other moments its
//! time-dependent settings count from.
//!
//! Three settings depend on how long ago something happened:
//! `min_state_duration` on when the current state began, `warm_up` on when
//! the breaker was created (or last reconfigured), and `cooldown` on when it
//! last closed after a successful probe round. A long-lived breaker keeps
//! those moments in memory. A breaker rebuilt in every short-lived process
//! (a CI step, a cron job) would start all three afresh each time: a warm-up
//! that never ends, a hysteresis that always holds, a cooldown that is lost
//! the moment the process that closed the breaker exits. [`StateTimes`]
//! carries them across, as [`WindowContents`](super::WindowContents)
//! carries the window: read with
//! [`CircuitBreaker::state_times`](super::CircuitBreaker::state_times),
//! restored with
//! [`CircuitBreakerBuilder::restore_times`](super::CircuitBreakerBuilder::restore_times).
//!
//! The times are readings of the breaker's clock, in nanoseconds, so they
//! mean something only on a clock that continues the one they were read on
//! (a `ManualClock` set to wall-clock time, as `tripline run` uses). None of
//! this is on the call path: the breaker reads the same atomics it always
//! did; reading and restoring them are cold operations.

use super::core::Inner;
use crate::clock::Clock;

/// The moments a breaker's time-dependent settings count from, as data: see
/// the module docs for why a breaker rebuilt in a new process needs them.
///
/// ```
/// use std::time::Duration;
/// use tripline::breaker::{WarmUp, WarmUpMode};
/// use tripline::clock::ManualClock;
/// use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, State, Timestamp, WindowConfig};
///
/// let config = CircuitBreakerConfig {
///     name: "deploy".into(),
///     window: WindowConfig::Count { size: 4 },
///     minimum_calls: 2,
///     warm_up: Some(WarmUp { duration: Duration::from_secs(60), mode: WarmUpMode::NoTrip }),
///     ..Default::default()
/// };
/// let clock = ManualClock::starting_at(Timestamp::from_nanos(1_000_000_000_000));
/// let first = CircuitBreaker::builder().config(config.clone()).clock(clock.clone()).build().unwrap();
/// let times = first.state_times();
///
/// // A later process, 70 s on: the warm-up that began with `first` is over.
/// clock.advance(Duration::from_secs(70));
/// let second = CircuitBreaker::builder()
///     .config(config)
///     .clock(clock.clone())
///     .restore_times(times)
///     .build()
///     .unwrap();
/// assert_eq!(second.state_times(), times);
/// for _ in 0..2 {
///     second.try_acquire().unwrap().record(Outcome::Failure, Duration::ZERO);
/// }
/// assert_eq!(second.state(), State::Open);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct StateTimes {
    /// When the breaker entered its current state, in nanoseconds on its
    /// clock: `min_state_duration` counts from here.
    pub entered_nanos: u64,
    /// When the current warm-up began (the breaker's creation or its last
    /// reconfiguration), in nanoseconds on its clock: `warm_up` counts from
    /// here.
    pub warm_up_start_nanos: u64,
    /// When the breaker last closed after a successful probe round, in
    /// nanoseconds on its clock; `None` if it has not since (or an operator
    /// moved it after that): `cooldown` counts from here.
    #[cfg_attr(feature = "serde", serde(default))]
    pub recovered_nanos: Option<u64>,
}

impl StateTimes {
    /// Reads `inner`'s times.
    pub(crate) fn of(inner: &Inner) -> Self {
        let (entered, warm, recovered) = inner.raw_times();
        StateTimes {
            entered_nanos: entered,
            warm_up_start_nanos: warm,
            recovered_nanos: recovered,
        }
    }

    /// Installs these times in `inner`. A time later than the breaker's
    /// "now" (a clock that went back, a hand-edited file) is taken as
    /// "now": it can start a period, never put it in the future.
    pub(crate) fn restore(&self, inner: &Inner) {
        let now = inner.clock.now().as_nanos();
        let at_most_now = |t: u64| t.min(now);
        inner.set_raw_times(
            at_most_now(self.entered_nanos),
            at_most_now(self.warm_up_start_nanos),
            self.recovered_nanos.map(at_most_now),
        );
    }
}
