//! Bulkhead: a dependency may hold at most `max_concurrent` calls, so one
//! slow dependency cannot take every thread, connection or task with it.
//!
//! When several dependencies share one pool and one turns slow, its calls
//! fill the pool and starve the calls to healthy dependencies.
//! A bulkhead gives each dependency its own quota — here a
//! semaphore (the usual default, paired with a strict timeout).
//!
//! Beyond the quota, a call may wait in a *bounded* queue (`max_queue`
//! places, at most `max_wait`, never past the request's deadline) and is
//! otherwise rejected at once with [`BulkheadFull`]. Nothing ever queues
//! without bound. Synchronous callers never wait: a parked thread is the
//! very resource the bulkhead protects.
//!
//! # Permits and the work they cover
//!
//! A slot is held by a permit ([`BulkheadPermit`], [`OwnedBulkheadPermit`])
//! and freed when the permit drops, so it lives exactly as long as the code
//! holding it. Work that outlives its caller — a task spawned by an attempt
//! that then timed out — keeps the slot by holding a
//! [`SharedBulkheadPermit`] (see `AsyncAttempt::bulkhead_permit` in the
//! pipeline): the slot is freed when the last holder is gone, not when the
//! caller stopped waiting. A timeout frees the caller, never the capacity.
//!
//! # Algorithm
//!
//! Admission is one CAS on the in-flight count. Waiters sit in a FIFO under
//! a mutex; a release hands its slot straight to the first waiter, and a
//! new arrival does not jump a non-empty queue. The release and the enqueue
//! each check the other's counter after publishing their own (sequentially
//! consistent), so no slot is freed while a waiter sleeps.

mod config;
mod permit;
mod queue;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use crate::error::BulkheadFull;
pub use config::{BulkheadConfig, BulkheadStats};
pub use permit::{BulkheadPermit, OwnedBulkheadPermit, SharedBulkheadPermit};
pub use queue::Acquire;

use crate::error::PolicyConfigError;
use crate::sync::{Arc, Mutex};
use crate::timeout::SharedTimer;

pub(crate) struct Inner {
    config: BulkheadConfig,
    max: u64,
    in_flight: AtomicU64,
    waiting: AtomicU64,
    admitted: AtomicU64,
    rejected: AtomicU64,
    queue: Mutex<queue::Queue>,
}

/// A concurrency limit shared by every clone.
///
/// ```
/// use tripline::bulkhead::{Bulkhead, BulkheadConfig};
///
/// let bulkhead = Bulkhead::try_new(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let permit = bulkhead.try_acquire().unwrap();
/// assert!(bulkhead.try_acquire().is_err()); // full
/// drop(permit);
/// assert_eq!(bulkhead.call(|| Ok::<_, ()>(7)).unwrap(), 7);
/// ```
#[derive(Clone)]
pub struct Bulkhead {
    inner: Arc<Inner>,
}

impl Bulkhead {
    /// A bulkhead with `config`.
    pub fn try_new(config: BulkheadConfig) -> Result<Self, PolicyConfigError> {
        config.validate()?;
        Ok(Bulkhead {
            inner: Arc::new(Inner {
                max: u64::from(config.max_concurrent),
                config,
                in_flight: AtomicU64::new(0),
                waiting: AtomicU64::new(0),
                admitted: AtomicU64::new(0),
                rejected: AtomicU64::new(0),
                queue: Mutex::new(queue::Queue::default()),
            }),
        })
    }

    /// The limits.
    pub fn config(&self) -> &BulkheadConfig {
        &self.inner.config
    }

    /// Occupancy and counts.
    pub fn stats(&self) -> BulkheadStats {
        let i = &self.inner;
        BulkheadStats {
            in_flight: i.in_flight.load(Ordering::SeqCst),
            waiting: i.waiting.load(Ordering::SeqCst),
            admitted: i.admitted.load(Ordering::Relaxed),
            rejected: i.rejected.load(Ordering::Relaxed),
        }
    }

    /// Takes a slot now, or fails without waiting.
    #[inline]
    pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
        if self.inner.try_take() {
            Ok(BulkheadPermit { inner: &self.inner })
        } else {
            Err(self.inner.reject(false))
        }
    }

    /// Like [`try_acquire`](Self::try_acquire), with a permit that owns a
    /// handle (for futures and spawned tasks).
    pub fn try_acquire_owned(&self) -> Result<OwnedBulkheadPermit, BulkheadFull> {
        if self.inner.try_take() {
            Ok(OwnedBulkheadPermit {
                inner: self.inner.clone(),
            })
        } else {
            Err(self.inner.reject(false))
        }
    }

    /// Takes a slot now without a permit object, for an owner that keeps
    /// this bulkhead and frees the slot with
    /// [`release_detached`](Self::release_detached) (the pipeline's tower
    /// future, which owns its pipeline: no per-call reference count).
    /// `false`: no slot free at once (the caller may still queue with
    /// [`acquire`](Self::acquire)); nothing is counted as rejected.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn try_take_detached(&self) -> bool {
        self.inner.try_take()
    }

    /// Frees a slot taken by [`try_take_detached`](Self::try_take_detached).
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn release_detached(&self) {
        self.inner.release();
    }

    /// Takes a slot, waiting in the queue (if configured) at most
    /// `max_wait` and at most `limit`. Without a `timer` it cannot wait and
    /// behaves like [`try_acquire_owned`](Self::try_acquire_owned).
    /// Dropping the future leaves the queue (and returns a slot handed to
    /// it meanwhile).
    pub fn acquire(&self, timer: Option<&SharedTimer>, limit: Option<Duration>) -> Acquire {
        Acquire::new(self.inner.clone(), timer.cloned(), limit)
    }

    /// Runs `f` in a slot (sync; never waits).
    pub fn call<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, crate::error::PolicyError<E>> {
        let _permit = self
            .try_acquire()
            .map_err(crate::error::PolicyError::BulkheadFull)?;
        f().map_err(crate::error::PolicyError::Inner)
    }

    /// Awaits `fut` in a slot, queueing as configured on `timer`.
    pub async fn call_async<T, E>(
        &self,
        timer: Option<&SharedTimer>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, crate::error::PolicyError<E>> {
        let _permit = self
            .acquire(timer, None)
            .await
            .map_err(crate::error::PolicyError::BulkheadFull)?;
        fut.await.map_err(crate::error::PolicyError::Inner)
    }

    /// Whether two handles share one bulkhead.
    pub fn ptr_eq(&self, other: &Bulkhead) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Inner {
    /// One CAS: a slot if one is free and nobody is queued ahead.
    #[inline]
    fn try_take(&self) -> bool {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            return false;
        }
        self.take_slot()
    }

    #[inline]
    fn take_slot(&self) -> bool {
        let mut cur = self.in_flight.load(Ordering::SeqCst);
        while cur < self.max {
            match self.in_flight.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    self.admitted.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
        false
    }

    fn reject(&self, queued: bool) -> BulkheadFull {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        BulkheadFull {
            max_concurrent: self.config.max_concurrent,
            queued,
        }
    }

    #[inline]
    fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            queue::grant_waiters(self);
        }
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}
