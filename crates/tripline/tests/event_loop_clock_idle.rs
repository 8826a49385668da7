//! `EventLoopClock`'s refreshing task on an idle current-thread runtime:
//! it stops waking the runtime every millisecond, and comes back to full
//! rate as soon as the runtime wakes into work.
//!
//! In real time, by exception: what is counted is how often the thread is
//! woken from waiting for events, and tokio's paused time cannot stand in
//! for that — under it, any task woken on the runtime's thread stops the
//! next wait from advancing the clock, so a backed-off wait always ends at
//! once. The test idles for 0.6 s, then spins for 0.1 s, and asserts on
//! counts with bounds far from the expected figures, not on durations. Its
//! own process, because any real reading elsewhere would raise the shared
//! tick.

use std::time::Duration;

use tripline::clock::{Clock, EventLoopClock, PreciseClock};

mod support {
    pub mod wake_count;
}

/// A current-thread runtime set up as `tripline proxy` sets up its per-core
/// runtimes, counting its wake-ups.
fn runtime() -> tokio::runtime::Runtime {
    support::wake_count::hooked(&mut tokio::runtime::Builder::new_current_thread())
}

#[test]
fn an_idle_runtime_is_left_asleep_and_a_busy_one_is_refreshed_at_full_rate_again() {
    runtime().block_on(async {
        let refreshing = tokio::spawn(EventLoopClock::refresh_every_tick());

        // 600 ms idle: ~760 wake-ups at full rate (each tick moves the
        // runtime's earliest timer, and tokio wakes its driver for that
        // too). Backing off, the ticks come at 1, 3, 7, … 255 ms, then every
        // 128 ms: ten, plus a few of tokio's own timer-wheel wake-ups and
        // a tick at full rate after each (15–22 in all, measured).
        let idle_wakes = support::wake_count::wakes_while_idle(Duration::from_millis(600)).await;
        assert!(
            idle_wakes <= 50,
            "{idle_wakes} wake-ups in 600 idle ms: the refresher backs off"
        );

        // The runtime has just woken (the sleep's timer). A task that only
        // yields keeps it busy for 500 ms, never waiting for events: brought
        // back to full rate by that wake-up, the refreshing task moves the
        // tick every millisecond or two — backed off, every 128 ms at most
        // (four times). Twenty is far from either, and holds even if this
        // thread waits for a core for most of the time.
        let busy = tokio::spawn(async {
            let start = PreciseClock.now();
            let (mut ticks, mut last) = (0u32, EventLoopClock.now());
            while PreciseClock.now().saturating_duration_since(start) < Duration::from_millis(500) {
                let tick = EventLoopClock.now();
                if tick != last {
                    ticks += 1;
                    last = tick;
                }
                tokio::task::yield_now().await;
            }
            ticks
        });
        let ticks = busy.await.unwrap();
        assert!(
            ticks >= 20,
            "the tick moved {ticks} times in 500 busy ms: the refresher stayed backed off"
        );
        refreshing.abort();
    });
}
