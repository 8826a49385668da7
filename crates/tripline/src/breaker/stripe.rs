//! Striping: spreading hot counters over cache lines so threads that share a
//! breaker do not write the same line on every call.
//!
//! Each thread carries a stripe hint, assigned round-robin on first use.
//! When a CAS on a striped word fails (another thread wrote it), the thread
//! moves to the next stripe for its later calls, so persistent collisions
//! resolve themselves (the probe rehash of Java's `LongAdder`).

use crate::sync::{AtomicU64, Ordering};

/// Aligns `T` to a 64-byte cache line. Written here rather than taken from
/// crossbeam because `CachePadded` pads to 128 bytes on x86_64, which would
/// double the footprint of 20 000 keyed breakers for no measured gain.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Stripes per breaker on this machine: the core count rounded up to a
/// power of two, at most 4 (more stripes cost memory and read time for no
/// gain on the machines we target).
pub(crate) fn stripes() -> usize {
    #[cfg(loom)]
    {
        1
    }
    #[cfg(not(loom))]
    {
        use std::sync::OnceLock;
        static STRIPES: OnceLock<usize> = OnceLock::new();
        *STRIPES.get_or_init(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .next_power_of_two()
                .min(4)
        })
    }
}

#[cfg(not(loom))]
mod hint {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static NEXT: AtomicUsize = AtomicUsize::new(0);

    thread_local! {
        static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
    }

    #[inline]
    pub(crate) fn get() -> usize {
        HINT.with(|h| {
            let v = h.get();
            if v != usize::MAX {
                return v;
            }
            let v = NEXT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
            h.set(v);
            v
        })
    }

    #[cold]
    pub(crate) fn collided() {
        HINT.with(|h| h.set(h.get().wrapping_add(1) & (usize::MAX >> 1)));
    }
}

#[cfg(loom)]
mod hint {
    pub(crate) fn get() -> usize {
        0
    }
    pub(crate) fn collided() {}
}

/// This thread's stripe among `n` (a power of two).
#[inline]
pub(crate) fn current(n: usize) -> usize {
    hint::get() & (n - 1)
}

/// Called after a CAS lost to another thread: move to another stripe.
#[inline]
pub(crate) fn collided() {
    hint::collided()
}

/// Monotonic event counters, striped per thread.
pub(crate) struct Counters {
    stripes: Box<[Padded<[AtomicU64; 8]>]>,
}

/// Index of each counter in a stripe.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum Counter {
    Rejected = 0,
    Ignored = 1,
    LateSuccess = 2,
    LateFailure = 3,
    ProbeSuccess = 4,
    ProbeFailure = 5,
    Cancelled = 6,
    Transitions = 7,
}

impl Counters {
    pub(crate) fn new(n: usize) -> Self {
        Counters {
            stripes: (0..n).map(|_| Padded(Default::default())).collect(),
        }
    }

    #[inline]
    pub(crate) fn add(&self, c: Counter, n: u64) {
        let s = current(self.stripes.len());
        self.stripes[s].0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.stripes.len() * std::mem::size_of::<Padded<[AtomicU64; 8]>>()
    }

    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0[c as usize].load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}
