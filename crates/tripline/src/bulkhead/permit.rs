//! Bulkhead slots: freed when the last holder drops them.

use std::fmt;

use super::Inner;
use crate::sync::Arc;

/// A slot, borrowed from the bulkhead; freed on drop.
#[must_use = "the slot is freed when the permit drops"]
pub struct BulkheadPermit<'a> {
    pub(super) inner: &'a Inner,
}

impl Drop for BulkheadPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.inner.release();
    }
}

impl fmt::Debug for BulkheadPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BulkheadPermit")
    }
}

/// A slot owning a handle to the bulkhead; freed on drop.
#[must_use = "the slot is freed when the permit drops"]
pub struct OwnedBulkheadPermit {
    pub(super) inner: Arc<Inner>,
}

impl OwnedBulkheadPermit {
    /// Turns the permit into a clonable one: the slot is freed when the
    /// last clone drops. Hand a clone to work that may outlive the call.
    pub fn into_shared(self) -> SharedBulkheadPermit {
        SharedBulkheadPermit(Arc::new(self))
    }
}

impl Drop for OwnedBulkheadPermit {
    fn drop(&mut self) {
        self.inner.release();
    }
}

impl fmt::Debug for OwnedBulkheadPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnedBulkheadPermit")
    }
}

/// A slot shared by the call and any work it handed off; freed when the
/// last clone drops.
///
/// ```
/// use tripline::bulkhead::{Bulkhead, BulkheadConfig};
/// let b = Bulkhead::try_new(BulkheadConfig { max_concurrent: 1, ..Default::default() }).unwrap();
/// let shared = b.try_acquire_owned().unwrap().into_shared();
/// let for_the_spawned_work = shared.clone();
/// drop(shared); // the call is over…
/// assert_eq!(b.stats().in_flight, 1); // …its work is not
/// drop(for_the_spawned_work);
/// assert_eq!(b.stats().in_flight, 0);
/// ```
#[derive(Clone, Debug)]
pub struct SharedBulkheadPermit(#[allow(dead_code)] Arc<OwnedBulkheadPermit>);
