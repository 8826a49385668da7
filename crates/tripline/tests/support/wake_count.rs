//! Shared by the idle tests of `EventLoopClock`'s refreshing task: a tokio
//! runtime hooked as `tripline proxy` hooks its runtimes, counting how
//! often its threads wake from waiting for events, and how many times they
//! woke while the runtime idled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tripline::clock::EventLoopClock;

/// Times a runtime thread woke from waiting for events.
static WAKES: AtomicU64 = AtomicU64::new(0);

/// `builder` with `EventLoopClock`'s two hooks, the wake-up hook counting.
pub fn hooked(builder: &mut tokio::runtime::Builder) -> tokio::runtime::Runtime {
    EventLoopClock::hook_runtime(builder)
        .enable_time()
        .on_thread_unpark(|| {
            WAKES.fetch_add(1, Ordering::Relaxed);
            EventLoopClock::refresh();
        })
        .build()
        .expect("runtime")
}

/// Wake-ups of the runtime's threads while the calling task sleeps `idle`.
pub async fn wakes_while_idle(idle: Duration) -> u64 {
    let before = WAKES.load(Ordering::Relaxed);
    tokio::time::sleep(idle).await;
    WAKES.load(Ordering::Relaxed) - before
}
