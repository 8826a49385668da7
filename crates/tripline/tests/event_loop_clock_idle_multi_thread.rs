//! `EventLoopClock`'s refreshing task on an idle multi-thread runtime: it
//! stops waking the runtime every millisecond while nobody reads the tick,
//! readings meanwhile take the real time, and its next tick after a reading
//! is back at full rate.
//!
//! In real time, by exception, for the reason `event_loop_clock_idle.rs`
//! gives: what is counted is how often the workers are woken from waiting
//! for events, which tokio's paused time cannot stand in for. The test
//! idles for 0.6 s, then reads the clock for 0.3 s (busy on one worker),
//! and asserts on counts
//! with bounds far from the expected figures. Its own process, because the
//! tick and the refreshing task's state are shared by the whole process.

use std::time::Duration;

use tripline::clock::{Clock, EventLoopClock, PreciseClock};

mod support {
    pub mod wake_count;
}

/// A two-worker runtime set up as `tripline proxy --runtime multi-thread`
/// sets up its runtime, counting its workers' wake-ups.
fn runtime() -> tokio::runtime::Runtime {
    support::wake_count::hooked(tokio::runtime::Builder::new_multi_thread().worker_threads(2))
}

#[test]
fn an_idle_multi_thread_runtime_is_left_asleep_until_the_tick_is_read_again() {
    runtime().block_on(async {
        let refreshing = tokio::spawn(EventLoopClock::refresh_every_tick());

        // 600 ms with nobody reading the tick: at full rate the workers
        // wake ~1 000 times a second. Backing off, the ticks come at 1, 3,
        // 7, … 255 ms, then every 128 ms: about ten, each waking a worker
        // or two.
        let idle_wakes = support::wake_count::wakes_while_idle(Duration::from_millis(600)).await;
        assert!(
            idle_wakes <= 100,
            "{idle_wakes} wake-ups in 600 idle ms: the refresher backs off"
        );

        // A task reads the tick for 300 ms without yielding, so that its
        // worker neither waits nor wakes the other one to steal work: only
        // the refreshing task, on the other worker, moves the tick. Until
        // the refresher's next backed-off tick (at most 128 ms) every
        // reading takes the real time; from then on, back at full rate,
        // readings are the cached tick, which moves every millisecond or
        // two: in the last 100 ms about 50–100 distinct readings (millions
        // if every reading still took the real time, a handful if the
        // refresher stayed backed off), never far behind real time.
        let reading = tokio::spawn(async {
            let start = PreciseClock.now();
            let (mut last, mut late_moves) = (EventLoopClock.now(), 0u32);
            let mut worst_lag = Duration::ZERO;
            loop {
                let real = PreciseClock.now();
                let elapsed = real.saturating_duration_since(start);
                if elapsed >= Duration::from_millis(300) {
                    break;
                }
                let tick = EventLoopClock.now();
                assert!(tick >= last, "never backwards");
                worst_lag = worst_lag.max(real.saturating_duration_since(tick));
                if tick != last && elapsed >= Duration::from_millis(200) {
                    late_moves += 1;
                }
                last = tick;
            }
            (late_moves, worst_lag)
        });
        let (late_moves, worst_lag) = reading.await.unwrap();
        println!(
            "{idle_wakes} idle wake-ups; in the last 100 of 300 read ms the tick moved \
             {late_moves} times; worst lag {worst_lag:?}"
        );
        assert!(
            (10..=2_000).contains(&late_moves),
            "the tick moved {late_moves} times in 100 read ms: not refreshed at full rate"
        );
        assert!(
            worst_lag <= Duration::from_millis(50),
            "a reading lagged real time by {worst_lag:?}"
        );
        refreshing.abort();
    });
}
