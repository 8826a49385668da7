//! A coarse timer for limits that are long and almost never reached: the
//! default overall limit of a route that sets none (15 s).
//!
//! Why not tokio's timer: a `tokio::time::timeout` around every try
//! registers an entry in the runtime's timer wheel and removes it again,
//! ~2 000 instructions a request under `benches/proxy/instructions.sh`
//! (8 % of the request path) for a limit that almost never fires. Here
//! requests due in the same tenth of a second share one bucket, the
//! buckets are woken by one task sleeping until the earliest, and a
//! request pays a lock, a map lookup and a waker clone to register and a
//! lock to leave. The price is the resolution: a coarse sleep ends up to
//! [`RESOLUTION`] late, nothing for a 15 s limit.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use slab::Slab;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How late a coarse sleep may end.
pub(crate) const RESOLUTION: Duration = Duration::from_millis(100);

/// The buckets of waiting sleeps, by the instant they are due.
pub(crate) struct CoarseTimers {
    /// Bucket instants are `origin` plus a multiple of [`RESOLUTION`].
    origin: Instant,
    state: Mutex<State>,
    /// Wakes [`run`](Self::run) when a bucket earlier than the one it
    /// sleeps until appears.
    earlier: Notify,
    /// Counts the times buckets fired: a sleep polled again while it has
    /// not moved was woken by the future it races, not by its bucket,
    /// and answers `Pending` for one load.
    fired: AtomicU64,
}

#[derive(Default)]
struct State {
    /// A bucket stays, emptied, until it is due: a steady stream of
    /// requests reuses its buckets rather than allocating one each.
    buckets: BTreeMap<Instant, Slab<Waker>>,
    /// What [`CoarseTimers::run`] sleeps until (`None`: nothing).
    armed: Option<Instant>,
}

impl Default for CoarseTimers {
    fn default() -> Self {
        CoarseTimers {
            origin: Instant::now(),
            state: Mutex::new(State::default()),
            earlier: Notify::new(),
            fired: AtomicU64::new(0),
        }
    }
}

impl CoarseTimers {
    /// A sleep that ends once `due` has passed (at most [`RESOLUTION`]
    /// late), while [`run`](Self::run) runs.
    pub(crate) fn sleep_until(&self, due: Instant) -> CoarseSleep<'_> {
        let steps = due
            .saturating_duration_since(self.origin)
            .as_nanos()
            .div_ceil(RESOLUTION.as_nanos());
        let step = u32::try_from(steps).unwrap_or(u32::MAX);
        CoarseSleep {
            timers: self,
            due: self.origin + RESOLUTION.saturating_mul(step),
            slot: None,
            registered: None,
        }
    }

    /// Wakes each bucket when it is due. Runs for as long as the proxy
    /// serves (spawned when it starts); ends only with its runtime.
    pub(crate) async fn run(&self) {
        loop {
            let notified = self.earlier.notified();
            let next = {
                let mut state = self.lock();
                state.armed = state.buckets.keys().next().copied();
                state.armed
            };
            match next {
                None => notified.await,
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => self.wake_due(Instant::now()),
                        () = notified => {}
                    }
                }
            }
        }
    }

    /// Wakes every sleep of the buckets due by `now`.
    fn wake_due(&self, now: Instant) {
        let due = {
            let mut state = self.lock();
            let later = state.buckets.split_off(&(now + Duration::from_nanos(1)));
            std::mem::replace(&mut state.buckets, later)
        };
        self.fired.fetch_add(1, Ordering::Release);
        for (_, wakers) in due {
            for (_, waker) in wakers {
                waker.wake();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A sleep of [`CoarseTimers`]; dropped unfinished, it leaves its bucket.
pub(crate) struct CoarseSleep<'a> {
    timers: &'a CoarseTimers,
    /// Rounded up to its bucket's instant.
    due: Instant,
    /// Its place in the bucket, once registered.
    slot: Option<usize>,
    /// The waker registered, and the fire count then.
    registered: Option<(Waker, u64)>,
}

impl Future for CoarseSleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if let Some(slot) = this.slot {
            // Polled again: woken by its bucket, or by the future it races.
            // No bucket fired since it registered, and the same task polls:
            // the race's other future was woken, nothing to do.
            if let Some((waker, fired)) = &this.registered
                && *fired == this.timers.fired.load(Ordering::Acquire)
                && waker.will_wake(cx.waker())
            {
                return Poll::Pending;
            }
            if Instant::now() >= this.due {
                this.leave();
                return Poll::Ready(());
            }
            let mut state = this.timers.lock();
            match state
                .buckets
                .get_mut(&this.due)
                .and_then(|b| b.get_mut(slot))
            {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                Some(waker) => waker.clone_from(cx.waker()),
                // Its bucket fired already, before `due` as this thread's
                // clock reads it: wait in a new one.
                None => {
                    drop(state);
                    this.slot = None;
                    return this.register(cx);
                }
            }
            drop(state);
            let fired = this.timers.fired.load(Ordering::Acquire);
            this.registered = Some((cx.waker().clone(), fired));
            return Poll::Pending;
        }
        this.register(cx)
    }
}

impl CoarseSleep<'_> {
    fn register(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.timers.lock();
        let bucket = state.buckets.entry(self.due).or_default();
        self.slot = Some(bucket.insert(cx.waker().clone()));
        // Read under the lock: a fire after it has this sleep's waker.
        self.registered = Some((
            cx.waker().clone(),
            self.timers.fired.load(Ordering::Acquire),
        ));
        // Under steady traffic every new bucket is later than the one the
        // ticker sleeps until: it is told only of an earlier one.
        let earlier = state.armed.is_none_or(|armed| self.due < armed);
        if earlier {
            state.armed = Some(self.due);
        }
        drop(state);
        if earlier {
            self.timers.earlier.notify_one();
        }
        Poll::Pending
    }

    fn leave(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let mut state = self.timers.lock();
        if let Some(bucket) = state.buckets.get_mut(&self.due) {
            bucket.try_remove(slot);
        }
    }
}

impl Drop for CoarseSleep<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_coarse_sleep_ends_after_its_instant_and_at_most_a_resolution_late() {
        let timers = std::sync::Arc::new(CoarseTimers::default());
        let ticker = tokio::spawn({
            let timers = timers.clone();
            async move { timers.run().await }
        });
        let start = Instant::now();
        for wait in [Duration::from_millis(250), Duration::from_secs(15)] {
            let begun = Instant::now();
            timers.sleep_until(begun + wait).await;
            let slept = begun.elapsed();
            assert!(
                slept >= wait && slept <= wait + RESOLUTION,
                "{slept:?} for {wait:?}"
            );
        }
        assert!(start.elapsed() < Duration::from_secs(16));
        ticker.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleep_dropped_unfinished_leaves_no_waker_behind() {
        let timers = std::sync::Arc::new(CoarseTimers::default());
        let ticker = tokio::spawn({
            let timers = timers.clone();
            async move { timers.run().await }
        });
        let due = Instant::now() + Duration::from_secs(15);
        let raced = tokio::time::timeout(Duration::from_millis(10), timers.sleep_until(due)).await;
        assert!(raced.is_err(), "still sleeping after 10 ms");
        assert!(
            timers.lock().buckets.values().all(Slab::is_empty),
            "the dropped sleep left its bucket"
        );
        // An earlier sleep registered after a later one still ends on time.
        let later = timers.sleep_until(Instant::now() + Duration::from_secs(10));
        let mut later = std::pin::pin!(later);
        assert!(futures_poll_once(later.as_mut()).await.is_pending());
        let begun = Instant::now();
        timers.sleep_until(begun + Duration::from_secs(1)).await;
        assert!(begun.elapsed() <= Duration::from_secs(1) + RESOLUTION);
        ticker.abort();
    }

    /// Polls `future` once.
    async fn futures_poll_once<F: Future + Unpin>(mut future: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut future).poll(cx))).await
    }
}
