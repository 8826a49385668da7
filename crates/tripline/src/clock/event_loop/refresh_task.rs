//! The task that refreshes [`EventLoopClock`]'s tick while a tokio runtime
//! is too busy to wait for events, and that leaves an idle runtime asleep.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::time::{Instant, Sleep};

use super::{EventLoopClock, WAITED, tick_and_ask_if_read};

thread_local! {
    /// The backed-off refreshing task of this thread, woken by the next
    /// refresh.
    static WAKE_ON_REFRESH: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// On a refresh: a wake-up of the loop ends this thread's backed-off wait.
pub(super) fn wake_backed_off() {
    if let Some(waker) = WAKE_ON_REFRESH.take() {
        waker.wake();
    }
}

/// Whether a multi-thread runtime's refreshing task is backing off: loop
/// threads then read the real time while the tick's unread flag is set.
static BACKING_OFF: AtomicBool = AtomicBool::new(false);
/// Whether a loop thread read the clock while the refreshing task was
/// backing off: its next tick then returns to full rate.
static READ_WHILE_BACKING_OFF: AtomicBool = AtomicBool::new(false);

/// On a loop thread's reading while the tick's unread flag is set: whether
/// a multi-thread refreshing task is backing off, in which case the reading
/// is noted for its next tick (and must leave the flag set).
pub(super) fn note_reading_while_backing_off() -> bool {
    if !BACKING_OFF.load(Ordering::Acquire) {
        return false;
    }
    // Written once per backed-off tick, not by every reading.
    if !READ_WHILE_BACKING_OFF.load(Ordering::Relaxed) {
        READ_WHILE_BACKING_OFF.store(true, Ordering::Release);
    }
    true
}

/// The deadline of the tick after one due at `due`, `wait` later: at full
/// rate the ticks keep their period (the timer wheel rounds each deadline
/// up to its next millisecond); a tick missed while the runtime was too
/// busy to run the task is skipped, not caught up.
fn next_tick(due: Instant, wait: Duration) -> Instant {
    (due + wait).max(Instant::now() + wait / 2)
}

impl EventLoopClock {
    /// Makes the threads of the runtime `builder` builds refresh the tick
    /// each time they wake ([`refresh`](Self::refresh) on
    /// `on_thread_unpark`) and say when they begin to wait
    /// ([`before_wait`](Self::before_wait) on `on_thread_park`), replacing
    /// any hooks set there before. Spawn one
    /// [`refresh_every_tick`](Self::refresh_every_tick) on the runtime too.
    pub fn hook_runtime(builder: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
        builder
            .on_thread_park(Self::before_wait)
            .on_thread_unpark(Self::refresh)
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
    ///
    /// On a multi-thread runtime the task backs off by what matters to
    /// readers instead: each tick sets a flag in the tick that the first
    /// reading on a loop thread clears (that reading takes the real time).
    /// While the ticks find the flag still set, nobody read the tick since
    /// the one before, and each comes twice as late, up to
    /// [`IDLE_TICK`](Self::IDLE_TICK). While the task backs off, readings on
    /// loop threads leave the flag set and take the real time (so they are
    /// exact, at ~27 ns more), and its next tick returns to full rate. The
    /// task is not woken by a reading: a wake-up from a worker busy reading
    /// would queue it behind that worker's work. So readings lag by at most
    /// the resolution — twice it, once, when a reading comes just as the
    /// task begins to back off — plus the runtime's delay in running it.
    pub async fn refresh_every_tick() {
        // On several threads this task's thread-local view of waiting says
        // nothing about the others, which may be busy (and they wake one
        // another to steal work): there the task backs off by readings.
        let current_thread = Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::CurrentThread);
        if !current_thread {
            return Self::refresh_while_read().await;
        }
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
            } else if waited {
                backed_off = (backed_off * 2).min(Self::IDLE_TICK);
                wait = backed_off;
            } else {
                backed_off = Self::RESOLUTION;
                wait = Self::RESOLUTION;
            }
            let due = match by_timer {
                true => sleep.deadline(),
                false => Instant::now(),
            };
            sleep.as_mut().reset(next_tick(due, wait));
            if wait > Self::RESOLUTION {
                // Moving the runtime's earliest timer makes tokio wake its
                // driver, which would end the coming wait at once and pass
                // for a wake-up into work; a yield lets the runtime take
                // that wake without waiting for events.
                tokio::task::yield_now().await;
            }
        }
    }

    /// [`refresh_every_tick`](Self::refresh_every_tick) on a multi-thread
    /// runtime: full rate while loop threads read the tick, backing off
    /// while nobody does.
    async fn refresh_while_read() {
        let mut wait = Self::RESOLUTION;
        let mut next = Instant::now() + wait;
        loop {
            tokio::time::sleep_until(next).await;
            // (Both asked: `|`, not `||`, so that the flag is reset.)
            let read =
                tick_and_ask_if_read() | READ_WHILE_BACKING_OFF.swap(false, Ordering::AcqRel);
            if read {
                wait = Self::RESOLUTION;
                BACKING_OFF.store(false, Ordering::Release);
            } else {
                wait = (wait * 2).min(Self::IDLE_TICK);
                BACKING_OFF.store(true, Ordering::Release);
            }
            next = next_tick(next, wait);
        }
    }

    /// The longest an idle runtime waits between two ticks of
    /// [`refresh_every_tick`](Self::refresh_every_tick): eight wake-ups a
    /// second instead of a thousand, and on a current-thread runtime a bound
    /// on the lag in the one case its back-off cannot tell apart (see
    /// there).
    pub const IDLE_TICK: Duration = Duration::from_millis(128);
}

/// Waits for the refreshing task's timer or, when backing off is allowed,
/// for the next [`EventLoopClock::refresh`] on this thread (a wake-up from
/// waiting for events), whichever comes first: `true` when the timer ended
/// the wait, `false` when a refresh did.
struct WakeOnRefresh<'a> {
    sleep: Pin<&'a mut Sleep>,
    /// Whether a refresh on this thread ends the wait.
    on_refresh: bool,
    /// Whether this wait's waker was left for a refresh to take.
    registered: bool,
}

impl<'a> WakeOnRefresh<'a> {
    fn until(sleep: Pin<&'a mut Sleep>, on_refresh: bool) -> Self {
        WakeOnRefresh {
            sleep,
            on_refresh,
            registered: false,
        }
    }
}

impl Future for WakeOnRefresh<'_> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
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

impl Drop for WakeOnRefresh<'_> {
    fn drop(&mut self) {
        if self.registered {
            drop(WAKE_ON_REFRESH.take());
        }
    }
}
