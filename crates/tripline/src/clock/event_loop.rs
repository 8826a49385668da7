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
///   On a tokio runtime: `Builder::on_thread_unpark(EventLoopClock::refresh)`
///   and one [`refresh_every_tick`](Self::refresh_every_tick) task; with
///   `Builder::on_thread_park(EventLoopClock::before_wait)` too, an idle
///   current-thread runtime is left asleep instead of being woken every
///   millisecond.
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
/// first refresh.
static LOOP_TICK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's loop refreshes the tick (it has refreshed once).
    static REFRESHES: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread waited for events since the refreshing task's
    /// last tick ([`EventLoopClock::before_wait`]).
    static WAITED: Cell<bool> = const { Cell::new(false) };
    /// The backed-off refreshing task of this thread, woken by the next
    /// refresh.
    static WAKE_ON_REFRESH: Cell<Option<std::task::Waker>> = const { Cell::new(None) };
}

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
        LOOP_TICK.fetch_max(precise_now().as_nanos(), Ordering::Release);
        if let Some(waker) = WAKE_ON_REFRESH.take() {
            waker.wake();
        }
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

    /// Refreshes the tick every [`RESOLUTION`](Self::RESOLUTION) for as long
    /// as it is polled: spawn it once on each runtime whose threads read the
    /// clock, so that the tick moves while they are too busy to wait for
    /// events. A tick missed while the runtime was blocked is skipped, not
    /// caught up.
    ///
    /// On a current-thread runtime whose thread also runs
    /// [`before_wait`](Self::before_wait) when it parks, an idle runtime is
    /// not woken every millisecond: while the ticks find that the thread
    /// waited for events since the one before, each comes twice as late as
    /// the last, up to [`IDLE_TICK`](Self::IDLE_TICK). That is safe because
    /// a runtime only turns busy by waking, and the wake-up's
    /// [`refresh`](Self::refresh) brings the next tick back within the
    /// resolution; a tick through which the thread stayed busy ends the
    /// backing off. A busy runtime keeps the full rate: its readings lag by
    /// at most the resolution (twice it, once, when the runtime woke into a
    /// busy stretch just before a full-rate tick), plus the loop's delay in
    /// running the task. The one gap: work that arrives in the very wake-up
    /// that fires a backed-off tick is not told apart from that tick, so if
    /// the runtime then stays busy without ever waiting for events, its
    /// readings can lag by up to [`IDLE_TICK`](Self::IDLE_TICK) until it
    /// next waits.
    #[cfg(feature = "tokio")]
    pub async fn refresh_every_tick() {
        use tokio::runtime::{Handle, RuntimeFlavor};
        // On several threads this task's thread-local view says nothing
        // about the others, which may be busy: no backing off there.
        let may_back_off = Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::CurrentThread);
        // How far an idle runtime's ticks have backed off, and the
        // current wait: a wake-up shortens the wait, not the back-off,
        // which only a tick through which the thread stayed busy resets.
        let mut backed_off = Self::RESOLUTION;
        let mut wait = Self::RESOLUTION;
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            let armed = backed_off > Self::RESOLUTION;
            let by_timer = WakeOnRefresh::until(sleep.as_mut(), armed).await;
            if by_timer {
                // (Woken by a refresh, the tick is fresh already.)
                Self::refresh();
            }
            let waited = WAITED.replace(false);
            if !by_timer {
                // Woken from waiting, perhaps into work: look again soon.
                wait = Self::RESOLUTION;
            } else if waited && may_back_off {
                backed_off = (backed_off * 2).min(Self::IDLE_TICK);
                wait = backed_off;
            } else {
                backed_off = Self::RESOLUTION;
                wait = Self::RESOLUTION;
            }
            // At full rate the ticks keep their period (the timer wheel
            // rounds each deadline up to its next millisecond).
            let now = tokio::time::Instant::now();
            let next = match by_timer {
                true => sleep.deadline() + wait,
                false => now + wait,
            };
            sleep.as_mut().reset(next.max(now + wait / 2));
            if wait > Self::RESOLUTION {
                // Moving the runtime's earliest timer makes tokio wake its
                // driver, which would end the coming wait at once and pass
                // for a wake-up into work; a yield lets the runtime take
                // that wake without waiting for events.
                tokio::task::yield_now().await;
            }
        }
    }

    /// The longest an idle current-thread runtime waits between two ticks
    /// of [`refresh_every_tick`](Self::refresh_every_tick): eight wake-ups a
    /// second instead of a thousand, and a bound on the lag in the one case
    /// the back-off cannot tell apart (see there).
    pub const IDLE_TICK: Duration = Duration::from_millis(128);
}

/// Waits for the refreshing task's timer or, when backing off is allowed,
/// for the next [`EventLoopClock::refresh`] on this thread (a wake-up from
/// waiting for events), whichever comes first.
#[cfg(feature = "tokio")]
struct WakeOnRefresh<'a> {
    sleep: std::pin::Pin<&'a mut tokio::time::Sleep>,
    /// Whether a refresh on this thread ends the wait.
    on_refresh: bool,
    /// Whether this wait's waker was left for a refresh to take.
    registered: bool,
}

#[cfg(feature = "tokio")]
impl<'a> WakeOnRefresh<'a> {
    /// `true` when the timer ended the wait, `false` when a refresh did.
    fn until(sleep: std::pin::Pin<&'a mut tokio::time::Sleep>, on_refresh: bool) -> Self {
        WakeOnRefresh {
            sleep,
            on_refresh,
            registered: false,
        }
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for WakeOnRefresh<'_> {
    type Output = bool;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<bool> {
        use std::task::Poll;
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if !self.on_refresh {
            return Poll::Pending;
        }
        let waker = WAKE_ON_REFRESH.take();
        if self.registered && waker.is_none() {
            // A refresh took it: the thread woke from waiting for events.
            self.registered = false;
            return Poll::Ready(false);
        }
        WAKE_ON_REFRESH.set(Some(cx.waker().clone()));
        self.registered = true;
        Poll::Pending
    }
}

#[cfg(feature = "tokio")]
impl Drop for WakeOnRefresh<'_> {
    fn drop(&mut self) {
        if self.registered {
            drop(WAKE_ON_REFRESH.take());
        }
    }
}

impl Clock for EventLoopClock {
    #[inline]
    fn now(&self) -> Timestamp {
        if REFRESHES.get() {
            return Timestamp::from_nanos(LOOP_TICK.load(Ordering::Relaxed));
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
    let now = precise_now().as_nanos();
    Timestamp::from_nanos(LOOP_TICK.fetch_max(now, Ordering::AcqRel).max(now))
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
