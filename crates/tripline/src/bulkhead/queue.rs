//! The bounded wait queue of a bulkhead.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{BulkheadFull, Inner, OwnedBulkheadPermit};
use crate::sync::{Arc, lock};
use crate::timeout::{SharedTimer, Sleep};

#[derive(Default)]
pub(super) struct Queue {
    next_id: u64,
    waiting: VecDeque<(u64, Waker)>,
    /// Waiters handed a slot that have not yet collected it.
    granted: Vec<u64>,
}

/// Hands free slots to the waiters at the front of the queue.
pub(super) fn grant_waiters(inner: &Inner) {
    let mut q = lock(&inner.queue);
    grant_locked(inner, &mut q);
}

fn grant_locked(inner: &Inner, q: &mut Queue) {
    while !q.waiting.is_empty() && inner.take_slot() {
        if let Some((id, waker)) = q.waiting.pop_front() {
            inner.waiting.fetch_sub(1, Ordering::SeqCst);
            q.granted.push(id);
            waker.wake();
        }
    }
}

enum Stage {
    Start,
    Queued(u64),
    Done,
}

/// Waits for a bulkhead slot; see [`Bulkhead::acquire`](super::Bulkhead::acquire).
pub struct Acquire {
    inner: Arc<Inner>,
    timer: Option<SharedTimer>,
    limit: Option<Duration>,
    sleep: Option<Sleep>,
    stage: Stage,
}

impl Acquire {
    pub(super) fn new(
        inner: Arc<Inner>,
        timer: Option<SharedTimer>,
        limit: Option<Duration>,
    ) -> Self {
        Acquire {
            inner,
            timer,
            limit,
            sleep: None,
            stage: Stage::Start,
        }
    }

    fn permit(&mut self) -> OwnedBulkheadPermit {
        self.stage = Stage::Done;
        OwnedBulkheadPermit {
            inner: self.inner.clone(),
        }
    }

    /// Leaves the queue; `true` if a slot was granted meanwhile (and is now ours).
    fn leave(&mut self, id: u64) -> bool {
        let mut q = lock(&self.inner.queue);
        if let Some(pos) = q.granted.iter().position(|g| *g == id) {
            q.granted.swap_remove(pos);
            return true;
        }
        if let Some(pos) = q.waiting.iter().position(|(w, _)| *w == id) {
            q.waiting.remove(pos);
            self.inner.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        false
    }
}

impl Future for Acquire {
    type Output = Result<OwnedBulkheadPermit, BulkheadFull>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match this.stage {
            Stage::Done => Poll::Pending,
            Stage::Start => {
                if this.inner.try_take() {
                    return Poll::Ready(Ok(this.permit()));
                }
                let wait = this.limit.map_or(this.inner.config.max_wait, |l| {
                    l.min(this.inner.config.max_wait)
                });
                let Some(timer) = this.timer.as_ref().filter(|_| !wait.is_zero()) else {
                    this.stage = Stage::Done;
                    return Poll::Ready(Err(this.inner.reject(false)));
                };
                let mut q = lock(&this.inner.queue);
                if q.waiting.len() >= this.inner.config.max_queue as usize {
                    drop(q);
                    this.stage = Stage::Done;
                    return Poll::Ready(Err(this.inner.reject(false)));
                }
                let id = q.next_id;
                q.next_id += 1;
                q.waiting.push_back((id, cx.waker().clone()));
                this.inner.waiting.fetch_add(1, Ordering::SeqCst);
                // A slot freed between our failed take and the enqueue is
                // handed out here (to the front of the queue, maybe us).
                grant_locked(&this.inner, &mut q);
                if let Some(pos) = q.granted.iter().position(|g| *g == id) {
                    q.granted.swap_remove(pos);
                    drop(q);
                    return Poll::Ready(Ok(this.permit()));
                }
                drop(q);
                this.stage = Stage::Queued(id);
                let mut sleep = timer.sleep(wait);
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(this.time_out(id));
                }
                this.sleep = Some(sleep);
                Poll::Pending
            }
            Stage::Queued(id) => {
                {
                    let mut q = lock(&this.inner.queue);
                    if let Some(pos) = q.granted.iter().position(|g| *g == id) {
                        q.granted.swap_remove(pos);
                        drop(q);
                        return Poll::Ready(Ok(this.permit()));
                    }
                    if let Some(entry) = q.waiting.iter_mut().find(|(w, _)| *w == id) {
                        entry.1.clone_from(cx.waker());
                    }
                }
                match this.sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
                    Some(Poll::Ready(())) => Poll::Ready(this.time_out(id)),
                    _ => Poll::Pending,
                }
            }
        }
    }
}

impl Acquire {
    fn time_out(&mut self, id: u64) -> Result<OwnedBulkheadPermit, BulkheadFull> {
        if self.leave(id) {
            return Ok(self.permit());
        }
        self.stage = Stage::Done;
        Err(self.inner.reject(true))
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let Stage::Queued(id) = self.stage
            && self.leave(id)
        {
            // Granted while we were being dropped: give the slot back.
            self.inner.release();
        }
    }
}
