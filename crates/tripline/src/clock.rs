//! Time sources, injected into every time-dependent type.
//!
//! A circuit breaker is a timing device: windows roll, open states expire,
//! calls are slow or not. Reading the system clock on every call would cost
//! more than the breaker itself (`Instant::now()` takes ~27 ns on a KVM
//! guest), and tests that wait in real time are slow and flaky. So time is a
//! parameter ([`Clock`]), and internally a [`Timestamp`] is a `u64` count of
//! nanoseconds since the clock's epoch, which fits in an atomic.
//!
//! * [`MonotonicClock`] — the production default. Reads a process-wide
//!   cached tick (one relaxed atomic load, ~0.5 ns) that a background thread
//!   refreshes every [`MonotonicClock::RESOLUTION`] (1 ms). Readings never go
//!   backwards and never follow wall-clock adjustments; they lag real time by
//!   at most the resolution plus the ticker thread's scheduling delay.
//! * [`PreciseClock`] — reads `Instant::now()` on every call, for callers that
//!   need sub-millisecond slow-call timing and can pay for it.
//! * [`EventLoopClock`] — the same cached tick without the ticker thread:
//!   the event loops that read it refresh it when they wake and every
//!   millisecond while busy (on a tokio runtime, two hooks); threads that
//!   run no such loop read the real clock.
//! * [`ManualClock`] — moved only by `advance` and `set`; clones share one
//!   time. Tests, the simulator and the benches use it.
//!
//! This module is the only place in tripline that reads real time
//! (`clippy.toml` forbids `Instant::now`, `SystemTime::now` and
//! `thread::sleep` everywhere else).

#[cfg(feature = "serde")]
pub mod duration_serde;
mod event_loop;
mod human;
#[cfg(feature = "serde")]
pub(crate) mod rfc3339;

pub use event_loop::EventLoopClock;
pub use human::HumanDuration;

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::time::{Duration, Instant, SystemTime};

use crate::sync::{Arc, AtomicU64, Ordering};

/// A point in time: nanoseconds since the epoch of the [`Clock`] that made it.
///
/// Timestamps from different clocks are not comparable; within one clock
/// they are monotonic. Arithmetic saturates instead of panicking, so no
/// config value (a huge `open_duration`, say) can overflow it.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's epoch.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The far future: later than any reading a clock will produce.
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// A timestamp `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `d` after the epoch (saturating).
    pub fn from_duration(d: Duration) -> Self {
        Timestamp(duration_to_nanos(d))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch as a `Duration`.
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Seconds since the epoch, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Timestamp::MAX`].
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_to_nanos(d)))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

impl Sub<Timestamp> for Timestamp {
    type Output = Duration;
    fn sub(self, earlier: Timestamp) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T+{:?}", Duration::from_nanos(self.0))
    }
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (584 years).
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A source of monotonic time.
///
/// Implement it to drive tripline from your own time source (a runtime's
/// virtual clock, say). Readings must never decrease.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// How far a reading may lag the true time; documents the precision of
    /// slow-call timing and bucket boundaries.
    fn resolution(&self) -> Duration;
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(
        #[allow(clippy::disallowed_methods)] // the sanctioned real-time read
        Instant::now,
    )
}

#[allow(clippy::disallowed_methods)] // the sanctioned real-time read
fn precise_now() -> Timestamp {
    Timestamp(duration_to_nanos(Instant::now().duration_since(epoch())))
}

/// How long until a wall-clock instant (an HTTP `Retry-After` date, say);
/// zero if it has passed. The only conversion between wall-clock and
/// monotonic time in tripline.
#[allow(clippy::disallowed_methods)] // the sanctioned real-time read
pub fn duration_until_system_time(at: SystemTime) -> Duration {
    at.duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
}

/// The wall-clock instant `d` from now: how a deadline on a monotonic clock
/// is written down to outlive the process (state snapshots).
#[allow(clippy::disallowed_methods)] // the sanctioned real-time read
pub fn system_time_after(d: Duration) -> SystemTime {
    SystemTime::now() + d
}

/// Blocks the calling thread for `d`: the wait between a *synchronous*
/// retry's attempts, which a caller who chose a blocking API has asked for.
/// The one sanctioned real-time wait outside the ticker; tests
/// never reach it (on a [`ManualClock`] the retry advances the clock instead).
#[allow(clippy::disallowed_methods)] // the sanctioned real-time wait
pub fn block_thread_for(d: Duration) {
    std::thread::sleep(d);
}

/// The production clock: a cached tick refreshed by one background thread.
///
/// Every breaker call reads the time (bucket selection, slow-call timing,
/// open-state expiry), so the read must be nearly free: it is one relaxed
/// atomic load. A thread named `tripline-clock`, started on first use and
/// shared by the whole process, stores `Instant::now()` every
/// [`RESOLUTION`](Self::RESOLUTION). If that thread cannot be spawned the
/// clock falls back to reading `Instant::now()` on every call.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

/// The cached tick, in nanoseconds since [`epoch`]; 0 while no ticker runs.
static TICK: StdAtomicU64 = StdAtomicU64::new(0);
/// Readings taken without a ticker, kept monotonic by `fetch_max`.
static FALLBACK: StdAtomicU64 = StdAtomicU64::new(0);
/// 0: not started, 1: starting or ticking, 2: the ticker could not start.
static TICKER: AtomicU8 = AtomicU8::new(0);

impl MonotonicClock {
    /// Refresh period of the cached tick.
    pub const RESOLUTION: Duration = Duration::from_millis(1);

    /// The clock (starting the shared ticker thread if it is not running).
    pub fn new() -> Self {
        start_ticker();
        MonotonicClock
    }
}

#[cold]
fn start_ticker() {
    if TICKER
        .compare_exchange(0, 1, StdOrdering::AcqRel, StdOrdering::Acquire)
        .is_err()
    {
        return;
    }
    // Publish a first reading before the thread runs, so that readings are
    // monotonic from the start.
    let first = precise_now().as_nanos().max(1);
    TICK.fetch_max(first, StdOrdering::Release);
    let spawned = std::thread::Builder::new()
        .name("tripline-clock".into())
        .spawn(|| {
            loop {
                #[allow(clippy::disallowed_methods)] // the ticker is the clock
                std::thread::sleep(MonotonicClock::RESOLUTION);
                TICK.fetch_max(precise_now().as_nanos(), StdOrdering::Release);
            }
        });
    if spawned.is_err() {
        FALLBACK.fetch_max(TICK.load(StdOrdering::Acquire), StdOrdering::AcqRel);
        TICKER.store(2, StdOrdering::Release);
        TICK.store(0, StdOrdering::Release);
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Timestamp {
        let t = TICK.load(StdOrdering::Relaxed);
        if t != 0 {
            return Timestamp(t);
        }
        slow_monotonic_now()
    }

    fn resolution(&self) -> Duration {
        Self::RESOLUTION
    }
}

#[cold]
fn slow_monotonic_now() -> Timestamp {
    start_ticker();
    let t = TICK.load(StdOrdering::Acquire);
    if t != 0 {
        return Timestamp(t);
    }
    // No ticker: read the real clock, monotonic across threads.
    let now = precise_now().as_nanos();
    Timestamp(FALLBACK.fetch_max(now, StdOrdering::AcqRel).max(now))
}

/// Reads `Instant::now()` on every call (~27 ns here): exact slow-call
/// timing at a price. Shares its epoch with [`MonotonicClock`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PreciseClock;

impl Clock for PreciseClock {
    fn now(&self) -> Timestamp {
        precise_now()
    }

    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::{Clock, ManualClock, Timestamp};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(shared.now(), Timestamp::from_nanos(5_000_000_000));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at its epoch.
    pub fn new() -> Self {
        Self::starting_at(Timestamp::ZERO)
    }

    /// A clock standing at `t`.
    pub fn starting_at(t: Timestamp) -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(t.as_nanos())),
        }
    }

    /// Moves time forward by `d` (saturating) and returns the new time.
    pub fn advance(&self, d: Duration) -> Timestamp {
        let d = duration_to_nanos(d);
        let prev = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(d))
            })
            .unwrap_or_else(|n| n);
        Timestamp(prev.saturating_add(d))
    }

    /// Sets the time to `t`. Moving a clock backwards breaks the contract of
    /// [`Clock`], so a `t` earlier than now is ignored and `false` returned.
    pub fn set(&self, t: Timestamp) -> bool {
        self.nanos.fetch_max(t.as_nanos(), Ordering::AcqRel) <= t.as_nanos()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::Acquire))
    }

    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

/// Any clock, as one concrete cheaply cloned type.
///
/// Types that hold a clock store this rather than a generic parameter or a
/// trait object: the built-in clocks are dispatched by a predictable branch
/// instead of a virtual call, and breakers, registries and pipelines stay
/// free of a clock type parameter.
#[derive(Clone)]
pub struct SharedClock(ClockKind);

#[derive(Clone)]
enum ClockKind {
    Monotonic,
    Precise,
    EventLoop,
    Manual(ManualClock),
    /// Boxed behind a thin `Arc`: a fat one would make every holder of a
    /// clock (each of a million keyed breakers) 8 bytes larger for a kind
    /// of clock few use, which pays one indirection more for it.
    Custom(Arc<Box<dyn Clock>>),
}

impl SharedClock {
    /// The production [`MonotonicClock`].
    pub fn monotonic() -> Self {
        MonotonicClock::new();
        SharedClock(ClockKind::Monotonic)
    }

    /// Wraps a user-supplied clock.
    pub fn custom(clock: impl Clock) -> Self {
        SharedClock(ClockKind::Custom(Arc::new(Box::new(clock))))
    }

    /// Whether this is an [`EventLoopClock`]: a runtime serving with it
    /// installs its refresh hooks, one serving with another clock need not.
    pub fn is_event_loop(&self) -> bool {
        matches!(self.0, ClockKind::EventLoop)
    }

    /// The manual clock behind this one, if it is one (the simulator and
    /// tests use it to drive time).
    pub fn as_manual(&self) -> Option<&ManualClock> {
        match &self.0 {
            ClockKind::Manual(m) => Some(m),
            _ => None,
        }
    }
}

impl Default for SharedClock {
    fn default() -> Self {
        Self::monotonic()
    }
}

impl Clock for SharedClock {
    #[inline]
    fn now(&self) -> Timestamp {
        // The production clock on a direct, predicted branch; the rest
        // (tests, simulations, custom clocks) behind it.
        if let ClockKind::Monotonic = self.0 {
            return MonotonicClock.now();
        }
        match &self.0 {
            ClockKind::Manual(m) => m.now(),
            ClockKind::Precise => PreciseClock.now(),
            ClockKind::EventLoop => EventLoopClock.now(),
            ClockKind::Custom(c) => c.now(),
            ClockKind::Monotonic => MonotonicClock.now(),
        }
    }

    fn resolution(&self) -> Duration {
        match &self.0 {
            ClockKind::Monotonic => MonotonicClock.resolution(),
            ClockKind::Manual(m) => m.resolution(),
            ClockKind::Precise => PreciseClock.resolution(),
            ClockKind::EventLoop => EventLoopClock.resolution(),
            ClockKind::Custom(c) => c.resolution(),
        }
    }
}

impl From<MonotonicClock> for SharedClock {
    fn from(_: MonotonicClock) -> Self {
        Self::monotonic()
    }
}

impl From<PreciseClock> for SharedClock {
    fn from(_: PreciseClock) -> Self {
        SharedClock(ClockKind::Precise)
    }
}

impl From<EventLoopClock> for SharedClock {
    fn from(_: EventLoopClock) -> Self {
        SharedClock(ClockKind::EventLoop)
    }
}

impl From<ManualClock> for SharedClock {
    fn from(m: ManualClock) -> Self {
        SharedClock(ClockKind::Manual(m))
    }
}

impl fmt::Debug for SharedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ClockKind::Monotonic => f.write_str("MonotonicClock"),
            ClockKind::Precise => f.write_str("PreciseClock"),
            ClockKind::EventLoop => f.write_str("EventLoopClock"),
            ClockKind::Manual(m) => m.fmt(f),
            ClockKind::Custom(_) => f.write_str("CustomClock"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time_and_never_go_back() {
        let a = ManualClock::new();
        let b = a.clone();
        assert_eq!(
            a.advance(Duration::from_millis(1500)).as_nanos(),
            1_500_000_000
        );
        assert_eq!(b.now(), Timestamp::from_nanos(1_500_000_000));
        assert!(b.set(Timestamp::from_nanos(2_000_000_000)));
        assert_eq!(a.now().as_nanos(), 2_000_000_000);
        assert!(!a.set(Timestamp::from_nanos(1)), "backwards set refused");
        assert_eq!(a.now().as_nanos(), 2_000_000_000);
        assert_eq!(a.advance(Duration::MAX), Timestamp::MAX, "saturates");
    }

    #[test]
    fn monotonic_clock_readings_never_decrease() {
        let c = SharedClock::monotonic();
        let mut last = c.now();
        for _ in 0..10_000 {
            let t = c.now();
            assert!(t >= last);
            last = t;
        }
        assert!(last > Timestamp::ZERO);
        assert_eq!(c.resolution(), Duration::from_millis(1));
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_nanos(10);
        assert_eq!(t - Timestamp::from_nanos(20), Duration::ZERO);
        assert_eq!(Timestamp::MAX + Duration::from_secs(1), Timestamp::MAX);
        assert_eq!(format!("{t:?}"), "T+10ns");
    }
}
