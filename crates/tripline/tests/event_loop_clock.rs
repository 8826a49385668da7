//! `EventLoopClock` on a tokio runtime with paused time: the two hooks keep
//! its cached tick following the real clock whether the runtime is too busy
//! to wait for events or wakes from waiting.
//!
//! The clock caches *real* time, so what is checked is that a refresh
//! happened: after it, the tick is not earlier than a real reading taken
//! before. Time is paused and advanced by hand; nothing sleeps. One test
//! runs both checks in order, because any real reading in the process
//! raises the shared tick and could stand in for a refresh.

use std::time::Duration;

use tripline::clock::{Clock, EventLoopClock, PreciseClock};

/// A current-thread runtime whose thread refreshes the clock when it
/// wakes, as `tripline proxy` builds its per-core runtimes.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .on_thread_unpark(EventLoopClock::refresh)
        .build()
        .expect("runtime")
}

#[test]
fn the_tick_follows_the_real_clock_on_a_busy_runtime_and_on_one_waking() {
    runtime().block_on(async {
        EventLoopClock::refresh();
        let refreshing = tokio::spawn(EventLoopClock::refresh_every_tick());

        // Busy: a task that only yields keeps the run queue full, so the
        // runtime never waits for events (and never runs the unpark hook);
        // only the refreshing task, whose timer comes due as time is
        // advanced, can move the tick.
        let busy = tokio::spawn(async {
            let real = PreciseClock.now();
            for _ in 0..1_000 {
                tokio::time::advance(Duration::from_millis(1)).await;
                if EventLoopClock.now() >= real {
                    return true;
                }
            }
            false
        });
        assert!(
            busy.await.unwrap(),
            "the refreshing task moved the tick while the runtime was busy"
        );

        // Waking: without the refreshing task there is nothing else to run,
        // so the runtime waits for the timer, and the tick read after the
        // wait is the one its wake-up refreshed.
        refreshing.abort();
        let _ = refreshing.await;
        let real = PreciseClock.now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let tick = EventLoopClock.now();
        assert!(tick >= real, "refreshed on waking");
        assert!(tick <= PreciseClock.now(), "never ahead of the real clock");
    });
}
