//! `EventLoopClock` on a real tokio runtime: the two hooks keep its cached
//! tick moving whether the runtime is too busy to wait for events or wakes
//! from waiting. The clock exists to follow real time, so these tests watch
//! real time pass; each waits a few milliseconds and fails after seconds.

use std::time::Duration;

use tripline::clock::{Clock, EventLoopClock, PreciseClock, Timestamp};

/// A current-thread runtime whose thread refreshes the clock, as
/// `tripline proxy` builds its per-core runtimes.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .on_thread_unpark(EventLoopClock::on_thread_unpark)
        .build()
        .expect("runtime")
}

fn give_up_after(real_start: Timestamp) {
    assert!(
        PreciseClock.now() - real_start < Duration::from_secs(10),
        "the cached tick did not move"
    );
}

#[test]
fn a_runtime_too_busy_to_wait_for_events_still_moves_the_tick() {
    runtime().block_on(async {
        EventLoopClock::refresh();
        tokio::spawn(EventLoopClock::refresh_every_tick());
        let (start, real_start) = (EventLoopClock.now(), PreciseClock.now());
        // Yielding never lets the runtime wait for events: only the
        // refreshing task moves the tick.
        while EventLoopClock.now() - start < Duration::from_millis(3) {
            tokio::task::yield_now().await;
            give_up_after(real_start);
        }
        assert!(
            EventLoopClock.now() <= PreciseClock.now(),
            "never ahead of real time"
        );
    });
}

#[test]
fn a_runtime_waking_from_a_wait_refreshes_the_tick() {
    runtime().block_on(async {
        EventLoopClock::refresh();
        let before = EventLoopClock.now();
        // No refreshing task: the thread waits for the timer, and the tick
        // it reads after waking is the one its wake-up refreshed.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(
            EventLoopClock.now() - before >= Duration::from_millis(5),
            "woken after the sleep, the tick is not older than the sleep"
        );
    });
}

#[test]
fn a_thread_running_no_loop_reads_the_real_clock() {
    let real = PreciseClock.now();
    let reading = std::thread::spawn(|| EventLoopClock.now()).join().unwrap();
    assert!(reading >= real);
}
