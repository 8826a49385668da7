//! [`EventLoopClock`]: the cached tick of [`MonotonicClock`](super::MonotonicClock)
//! without its ticker thread, for programs that run on event loops.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Clock, Timestamp, precise_now};

/// A clock whose cached tick is refreshed by the event loops that read it,
/// not by a thread of its own.
///
/// [`MonotonicClock`](super::MonotonicClock) keeps its reading cheap with a
/// ticker thread that wakes every millisecond. On a busy server that thread
/// preempts the thread serving requests a thousand times a second (on a
/// proxy pinned to one core, three context switches in four were the
/// ticker's). An event loop wakes anyway: this clock lets it do the
/// refreshing instead.
///
/// * A thread whose loop calls [`refresh`](Self::refresh) each time it
///   wakes, and at least every [`RESOLUTION`](Self::RESOLUTION) while it is
///   busy, reads the cached tick: one relaxed load and a thread-local flag.
///   On a tokio runtime: [`hook_runtime`](Self::hook_runtime) on its
///   builder and one [`refresh_every_tick`](Self::refresh_every_tick) task
///   (an idle runtime, current-thread or multi-thread, is then left
///   asleep instead of being woken every millisecond).
/// * Any other thread reads the real clock (~27 ns on a KVM guest), so a
///   reading is never stale there, whoever forgot to refresh.
///
/// Readings never go backwards, across threads too: a real reading raises
/// the cached tick to itself. On a loop thread they lag real time by at most
/// the resolution plus the loop's delay in running its refresh — so a
/// loop thread must not time a call it *blocks* in (the reading after it
/// would be the one before); awaited calls are timed correctly.
/// Timestamps share the epoch of the other production clocks.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventLoopClock;

/// The tick the loops refresh, in nanoseconds since the epoch; 0 before the
/// first refresh. Its values are even: the lowest bit is [`UNREAD`].
static LOOP_TICK: AtomicU64 = AtomicU64::new(0);

/// Set in [`LOOP_TICK`] by a multi-thread runtime's refreshing task at each
/// of its ticks. While it is set a loop thread's reading takes the real
/// time instead of the tick (the task may be backing off and the tick old).
/// At the task's full rate the first such reading clears it; while the task
/// backs off readings leave it set and tell the task instead, which then
/// returns to full rate. So the task learns whether anyone read the tick
/// since its last one without the reading path writing anything while the
/// bit is clear; refreshes keep the bit as it is, so that a worker's
/// wake-up does not pass for a reading.
const UNREAD: u64 = 1;

thread_local! {
    /// Whether this thread's loop refreshes the tick (it has refreshed once).
    static REFRESHES: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread waited for events since the refreshing task's
    /// last tick ([`EventLoopClock::before_wait`]).
    static WAITED: Cell<bool> = const { Cell::new(false) };
}

#[cfg(feature = "tokio")]
mod refresh_task;

impl EventLoopClock {
    /// How often a busy loop refreshes the tick.
    pub const RESOLUTION: Duration = Duration::from_millis(1);

    /// Raises the tick to the real time and marks the calling thread as one
    /// whose loop refreshes it: from now on its readings are the cached
    /// tick. Called by the loop when it wakes (on tokio, pass it to
    /// `Builder::on_thread_unpark`) and every
    /// [`RESOLUTION`](Self::RESOLUTION) while busy. A wake-up also brings
    /// this thread's backed-off refreshing task back to full rate.
    pub fn refresh() {
        REFRESHES.set(true);
        raise_tick(even_now());
        #[cfg(feature = "tokio")]
        refresh_task::wake_backed_off();
    }

    /// Marks the calling loop thread as about to wait for events: pass it
    /// to tokio's `Builder::on_thread_park`, beside
    /// [`refresh`](Self::refresh) on unpark, so that
    /// [`refresh_every_tick`](Self::refresh_every_tick) can tell an idle
    /// runtime from a busy one and stop waking the idle one every
    /// millisecond. Without it the refreshing task ticks at the full rate
    /// whether the runtime is busy or not.
    pub fn before_wait() {
        WAITED.set(true);
    }
}

impl Clock for EventLoopClock {
    #[inline]
    fn now(&self) -> Timestamp {
        if REFRESHES.get() {
            let tick = LOOP_TICK.load(Ordering::Relaxed);
            if tick & UNREAD == 0 {
                return Timestamp::from_nanos(tick);
            }
            return first_reading_since_a_tick();
        }
        real_reading()
    }

    fn resolution(&self) -> Duration {
        Self::RESOLUTION
    }
}

/// The real time, and the cached tick raised to it: readings on loop
/// threads after this one are not earlier.
#[cold]
fn real_reading() -> Timestamp {
    let now = even_now();
    Timestamp::from_nanos((raise_tick(now) & !UNREAD).max(now))
}

/// A loop thread's reading while [`UNREAD`] is set: the real time, and the
/// tick raised to it. At the refreshing task's full rate this first reading
/// since its tick also clears the flag (the tick is fresh: readings after
/// it may use it); while the task backs off the flag stays set, so that
/// every reading takes the real time until the task's next tick, which
/// this reading brings back to full rate.
#[cold]
fn first_reading_since_a_tick() -> Timestamp {
    #[cfg(feature = "tokio")]
    if refresh_task::note_reading_while_backing_off() {
        return real_reading();
    }
    let now = even_now();
    let before = update_tick(|tick| Some((tick & !UNREAD).max(now)));
    Timestamp::from_nanos((before & !UNREAD).max(now))
}

/// A multi-thread runtime's refreshing tick: raises the tick to the real
/// time and sets [`UNREAD`]. Returns whether a loop thread read the tick
/// since the previous such tick (it cleared the bit set then).
#[cfg(feature = "tokio")]
fn tick_and_ask_if_read() -> bool {
    let now = even_now();
    update_tick(|tick| Some((tick & !UNREAD).max(now) | UNREAD)) & UNREAD == 0
}

/// The real time in even nanoseconds (the lowest bit of the tick is a flag).
fn even_now() -> u64 {
    precise_now().as_nanos() & !UNREAD
}

/// Raises the tick to `now` (even), keeping its [`UNREAD`] bit; returns the
/// tick as it was.
fn raise_tick(now: u64) -> u64 {
    update_tick(|tick| ((tick & !UNREAD) < now).then_some(now | (tick & UNREAD)))
}

/// Replaces the tick by `f` of it (unless `f` says `None`); returns the
/// tick as it was.
fn update_tick(f: impl FnMut(u64) -> Option<u64>) -> u64 {
    match LOOP_TICK.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
        Ok(before) | Err(before) => before,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::{PreciseClock, SharedClock};

    #[test]
    fn a_thread_that_never_refreshed_reads_the_real_clock_and_raises_the_tick() {
        let real = PreciseClock.now();
        let reading = std::thread::spawn(|| EventLoopClock.now()).join().unwrap();
        assert!(reading >= real, "the real time, not a cached tick");
        assert!(LOOP_TICK.load(Ordering::Acquire) >= reading.as_nanos());
    }

    #[test]
    fn a_loop_thread_reads_the_tick_its_refresh_raised_to_the_real_time() {
        std::thread::spawn(|| {
            let before = EventLoopClock.now();
            let real = PreciseClock.now();
            EventLoopClock::refresh();
            let cached = EventLoopClock.now();
            assert!(cached >= before, "never backwards");
            assert!(cached >= real, "a refresh raises the tick to the real time");
            for _ in 0..1000 {
                let reading = EventLoopClock.now();
                assert!(reading >= cached);
                assert!(reading <= PreciseClock.now(), "never ahead of real time");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_shared_clock_dispatches_to_it() {
        let clock = SharedClock::from(EventLoopClock);
        assert!(clock.now() > Timestamp::ZERO);
        assert_eq!(clock.resolution(), EventLoopClock::RESOLUTION);
        assert!(clock.is_event_loop());
        assert!(!SharedClock::from(PreciseClock).is_event_loop());
    }
}
