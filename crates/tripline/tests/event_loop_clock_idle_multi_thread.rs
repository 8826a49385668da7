//! `EventLoopClock`'s refreshing task on an idle multi-thread runtime: it
//! stops waking the runtime every millisecond while nobody reads the tick,
//! readings meanwhile take the real time, and its next tick after a reading
//! is back at full rate.
//!
//! In real time, by exception, for the reason `event_loop_clock_idle.rs`
//! gives: what is counted is how often the workers are woken from waiting
//! for events, which tokio's paused time cannot stand in for. The test
//! idles for 0.6 s, then reads the clock for 0.3 s, and asserts on counts
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
        // wake ~290 times (measured with the back-off taken out). Backing
        // off, the ticks come at 1, 3, 7, … 255 ms, then every 128 ms:
        // about ten, each waking a worker (11 wake-ups, measured).
        let idle_wakes = support::wake_count::wakes_while_idle(Duration::from_millis(600)).await;
        assert!(
            idle_wakes <= 100,
            "{idle_wakes} wake-ups in 600 idle ms: the refresher backs off"
        );

        // A task reads the tick for 300 ms, yielding between readings as
        // async code does. Until the refresher's next backed-off tick (at
        // most 128 ms) every reading takes the real time, so no two are
        // alike; from then on, back at full rate, readings are the cached
        // tick, which only the refresher and the workers' wake-ups move:
        // in the last 100 ms most readings repeat the one before (none
        // would if the refresher stayed backed off), and none is far
        // behind real time.
        let reading = tokio::spawn(async {
            let start = PreciseClock.now();
            let mut last = EventLoopClock.now();
            let (mut late_readings, mut late_repeats) = (0u64, 0u64);
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
                if elapsed >= Duration::from_millis(200) {
                    late_readings += 1;
                    late_repeats += u64::from(tick == last);
                }
                last = tick;
                tokio::task::yield_now().await;
            }
            (late_readings, late_repeats, worst_lag)
        });
        let (late_readings, late_repeats, worst_lag) = reading.await.unwrap();
        println!(
            "{idle_wakes} idle wake-ups; in the last 100 of 300 read ms {late_repeats} of \
             {late_readings} readings repeated the one before; worst lag {worst_lag:?}"
        );
        assert!(
            late_repeats * 4 >= late_readings,
            "{late_repeats} of {late_readings} readings were the cached tick: the refresher \
             did not come back to full rate"
        );
        // A stopped refresher would leave readings 200 ms behind; the
        // bound leaves room for a refresher that waits for a core.
        assert!(
            worst_lag <= Duration::from_millis(100),
            "a reading lagged real time by {worst_lag:?}"
        );
        refreshing.abort();
    });
}
