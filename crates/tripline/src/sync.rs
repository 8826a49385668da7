//! Synchronisation primitives, swapped for loom's under `--cfg loom` so the
//! model checker can explore every interleaving of the breaker's atomics.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

/// Reference counting stays std's even under loom: the model checks the
/// breaker's atomics, not `Arc`'s, and handles need `Weak`.
pub(crate) use std::sync::Arc;

/// Locks `m`, recovering the data if a panicking thread poisoned it: every
/// critical section in tripline leaves its data consistent at each step, so
/// a panic in a user callback must not wedge the breaker.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    #[cfg(loom)]
    {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Locks `m` if no one holds it: for the rare paths that must exclude a
/// reconfiguration but must never wait for one (a call entering half-open).
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}
